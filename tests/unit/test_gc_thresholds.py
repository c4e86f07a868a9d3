"""The cyclic collector's thresholds of privfed's processes (:mod:`privfed.common.gc_thresholds`): an owner node's
and a coordinator's command runs with the young generation at 20 000 objects (a 10^4-owner BDT coordinator spent
~10 % of its CPU in the collector at CPython's 700); a short command keeps CPython's; and an in-process caller
(these tests, the Python API) gets its own thresholds back however the command ends.

Each command's handler is replaced by a probe that records the thresholds it runs under: what is checked is
:func:`privfed.deploy.cli.main`'s parse-and-dispatch, the path every ``privfed`` process takes.
"""

from __future__ import annotations

import gc
import importlib

import pytest

from privfed.common.errors import PrivfedError
from privfed.common.gc_thresholds import GC_THRESHOLDS
from privfed.deploy.cli import main

#: command line -> (module, name) of the handler its parser dispatches to
COMMANDS = {
    ("simulate",): ("privfed.deploy.cli", "_simulate"),
    ("coordinator", "--insecure"): ("privfed.deploy.cli", "_coordinator"),
    (
        "owner",
        "--insecure",
        "--name",
        "owner-0",
        "--coordinator",
        "localhost:1",
        "--ledger",
        "l.sqlite",
        "--epsilon-budget",
        "1",
    ): (
        "privfed.deploy.owner_cli",
        "_owner",
    ),
    ("serve", "--insecure", "--store", "jobs"): ("privfed.deploy.service_cli", "_serve"),
    ("certs", "--out", "pki"): ("privfed.deploy.admin_cli", "_certs"),
}
LONG_LIVED = ("simulate", "coordinator", "owner", "serve")


def _probe(monkeypatch, argv, seen, fail=False):
    module, name = COMMANDS[argv]

    def handler(args):
        seen.append(gc.get_threshold())
        if fail:
            raise PrivfedError("the probe fails")
        return 0

    monkeypatch.setattr(importlib.import_module(module), name, handler)


@pytest.mark.parametrize("argv", list(COMMANDS), ids=lambda argv: argv[0])
def test_a_command_runs_at_its_thresholds_and_gives_the_caller_its_own_back(monkeypatch, argv):
    own = (1234, 11, 12)  # neither CPython's nor privfed's
    before = gc.get_threshold()
    gc.set_threshold(*own)
    try:
        seen: list[tuple[int, ...]] = []
        _probe(monkeypatch, argv, seen)
        assert main(list(argv)) == 0
        assert seen == [GC_THRESHOLDS if argv[0] in LONG_LIVED else own]
        assert gc.get_threshold() == own
    finally:
        gc.set_threshold(*before)


def test_thresholds_come_back_when_the_command_fails(monkeypatch):
    before = gc.get_threshold()
    seen: list[tuple[int, ...]] = []
    _probe(monkeypatch, ("coordinator", "--insecure"), seen, fail=True)
    assert main(["coordinator", "--insecure"]) == 2
    assert seen == [GC_THRESHOLDS] and gc.get_threshold() == before
