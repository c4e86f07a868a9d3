"""A hostile owner's refusal text is bounded and one line where the coordinator keeps it (wt-redteam3).

An honest owner refuses with a fixed text per code and a short detail (contract 3). The coordinator
keeps each refused owner's ``code: message`` for the job's report (``refused``, ``refusal_summary``)
and, when the job stops for want of owners, in the reason it logs to the job's log; a data user reads
both (``privfed job show|logs``). Before the fix the message was taken as sent: a node answering
every task of its owners with a megabyte-long refusal put a megabyte per owner in the report, and
one with newlines could write lines of its choosing (a fake ``job ... done`` record) into the log. Now a decoded refusal message is cut to a public
length and its control characters replaced.

The real coordinator server over mTLS, and :class:`hostile_owner.HostileOwner` under owner-1's
certificate, speaking the real wire.
"""

import numpy as np
from hostile import WAIT, tls_files
from hostile_owner import HostileOwner

from privfed.common.bounds import Bounds
from privfed.common.tasks import Refusal
from privfed.server.strategies import make_strategy

FAKE = "\n2026-11-26 17:00:00,000 privfed.coordinator INFO job 20261126T170000000000Z-0000 done: accuracy 0.99\n"


def test_a_huge_multiline_refusal_is_cut_to_one_short_line(real_coordinator, certs):
    def answer(task):
        return Refusal("invalid_task", "x" * 1_000_000 + FAKE)

    node = HostileOwner(f"127.0.0.1:{real_coordinator.port}", tls_files(certs, "owner-1"), "owner-1", [0, 1], answer)
    node.start()
    try:
        assert real_coordinator.dispatcher.wait_for_owners(2, WAIT) == 2
        strategy = make_strategy(
            "ncc", mechanism="pm", epsilon=0.1, n_classes=2, bounds=Bounds(np.zeros(2), np.ones(2))
        )
        outcome = real_coordinator.dispatcher.run(strategy.configure(node.owner_ids, "r1"), timeout=WAIT)
    finally:
        node.stop()
    refusals = [r.payload for r in outcome.results.values()]
    assert len(refusals) == 2 and all(isinstance(p, Refusal) for p in refusals), refusals
    for p in refusals:
        assert p.code == "invalid_task"
        assert len(p.message) <= 1000, len(p.message)
        assert "\n" not in p.message and "\r" not in p.message
