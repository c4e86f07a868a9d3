"""Audit 39, A39-2: under ``share_groups="all"`` every write-ahead report lists every release of the run so far.

``JobBook.to_report`` now adds ``epsilon_by_release`` (``releases_to_report``): owner -> {release key: ε} of every
release counted, asked or carried. Under ``share_groups="all"`` (and ``eval_groups="all"``) each round is a new key
per owner (``boost-share:<run>#r<round>``), and the report is written ahead of *every* batch that asks for releases
(``run_federated_job(write_ahead=True)``, the service's jobs always). Round t's write serialises n * t keys, so a
job's writes cost O(n * T^2) where ``epsilon_by_owner`` kept them O(n) each (O(n * T) in all).

Measured (this machine, 2 shared cores, real owner cores answering, JSON serialisation only, no disk): see
/work/runs/audit39/NOTES.md. At MAX_ROUNDS = 1000 and 1000 owners the last write-ahead report is ~30 MB and the job
writes ~15 GB of reports over its life, in the service's one job loop.

The test: real owner cores answer every round; the write-ahead report must not grow with the rounds (the per-owner
account it carries is a number's worth, as before the change), i.e. the last write is within a small factor of the
first.

Fixed: a report lists only the releases its job's journal does not hold (``JobBook.releases_to_report``);
the journaled part is the rest of each owner's total, which a resumed run replays. The test checkpoints
each round as the journaled strategy does.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from differential import BOUNDS, XB, YB, K

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, at_round, empty_history
from privfed.common.ledger import Ledger
from privfed.common.tasks import BoostShareTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner
from privfed.server.contracts import PublicLimits
from privfed.server.dispatcher import RunOutcome
from privfed.server.rounds import JobBook

pytestmark = pytest.mark.in_process

N, T = 20, 30


def _sizes(tmp_path, share_groups: str, *, without: str = "") -> list[int]:
    owners = [f"node-0.o{i:05d}" for i in range(N)]
    local = [LocalOwner(o, XB, YB, np.random.Generator(np.random.PCG64(i)), K, BOUNDS) for i, o in enumerate(owners)]
    core = OwnerCore(local, Ledger(tmp_path / "ledger.sqlite", epsilon_budget=100.0, delta_budget=1e-3))
    params = BoostingParams(
        base="stump", epsilon=1.0, n_classes=K, bounds=BOUNDS, n_rounds=T, group_size=1, share_groups=share_groups
    )
    config = BoostConfig("run-a39-2", params)
    book = JobBook(PublicLimits(max_rows=XB.shape[0]), owner_ids=owners)
    sizes: list[int] = []

    def written() -> None:  # run_federated_job's write_ahead
        report = book.to_report()
        report.pop(without, None)
        sizes.append(len(json.dumps(report)))

    book.on_ask = written
    rounds = T if share_groups == "all" else 1
    for r in range(rounds):
        spec = BoostShareTask(config, at_round(empty_history(), r))
        tasks = [Task(f"t{r}.{i}", o, config.run_id, spec) for i, o in enumerate(owners)]
        book.to_ask(tasks)
        out = core.answer(tasks)
        assert not any(isinstance(a.payload, Refusal) for a in out.results)
        book.record(tasks, RunOutcome({a.task_id: a for a in out.results}, [], []), silent_nodes=[])
        book.account()  # the round's journal checkpoint (a boosting job by shares always has a journal)
    return sizes


def test_write_ahead_report_does_not_grow_with_the_rounds(tmp_path):
    sizes = _sizes(tmp_path, "all")
    assert len(sizes) == T  # one write ahead of each round's batch
    assert sizes[-1] <= 3 * sizes[0], (sizes[0], sizes[-1])


def test_control_the_rest_of_the_report_stays_flat(tmp_path):
    """Control: without ``epsilon_by_release`` the same reports stay one entry per owner however many rounds."""
    sizes = _sizes(tmp_path, "all", without="epsilon_by_release")
    assert len(sizes) == T
    assert sizes[-1] <= 3 * sizes[0], (sizes[0], sizes[-1])
