"""Audit 38, A38-1: A37-2's fix keeps a restarted node from paying twice for one round, yet the resumed job's report
still names one share of epsilon fewer than the node's ledger holds.

``JobBook.carry`` (walkthrough 14, W14-2) nets per *owner*: what the interrupted run's report says an owner may have
spent, minus *everything* the resumed run counts for that owner, is named unanswered (``server/rounds.py``,
``unanswered_epsilon``). A37-2's fix (``BoostShareKind.debits`` keys a share under ``share_groups="all"`` by its run
and round) makes the restarted node refuse the interrupted round ``already_released`` instead of drawing it again,
so the resumed run counts nothing for that round, as intended. But the job goes on: the refused owner is still in
the plan (a refusal does not take it out of later rounds), and under ``share_groups="all"`` it shares in the next
round, a *new* release the resumed run counts. ``carry`` then nets the interrupted round's share against the next
round's: the report names ``T - 1`` shares while the ledger holds ``T`` (any other release the resumed run counts
for the owner, such as its evaluations, nets the carry away the same way).

A37-2's test asks round 0 only, so the netting never meets a later release. Same harness: real owner cores over one
ledger file (the node's restart is a new core over it), the coordinator's own books (``server/rounds.py``), driven
as ``run_federated_job`` drives them with ``write_ahead``.

Accounting, not a leak: the owner's ledger bounds what the coordinator learned. But a data user reading the report
(or a policy that trusts ``epsilon_by_owner`` + ``epsilon_unanswered_by_owner``) is told one share less than the
owner paid. Suggested fix: carry per *release*, not per owner: the write-ahead report (or the journal) names the
release keys asked, and the resumed run nets the carry only against answers to those same releases (a re-sent kept
share), never against new ones.

Fixed: a report written ahead of its batches lists each owner's releases by key (``epsilon_by_release``), and the
resumed run carries them by key (``releases_may_have_spent``, ``JobBook.carry``).
"""

from __future__ import annotations

import numpy as np
import pytest
from carried import OWNER, ask, book, held, node
from differential import boost

from privfed.common.boosting.wire import at_round, empty_history
from privfed.common.tasks import BoostShareTask, Refusal, Task
from privfed.server.rounds import may_have_spent, releases_may_have_spent

pytestmark = pytest.mark.in_process

RUN = "run-a38-1"
CONFIG = boost("stump", RUN, share_groups="all")
ROUND0 = BoostShareTask(CONFIG, empty_history())
#: round 1 of the run, round 0 skipped (kept nothing): what the resumed run asks after the owner refused round 0
ROUND1 = BoostShareTask(CONFIG, at_round(empty_history(), 1))


def test_the_resumed_report_names_every_share_the_ledger_holds(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    # run 1: round 0's share is asked (the write-ahead report names it), the owner pays, the coordinator dies
    first = book()  # written ahead of its batches, as run_federated_job(write_ahead=True) makes it
    task = Task("run1-round0", OWNER, RUN, ROUND0)
    first.to_ask([task])
    (answer,) = node(ledger).answer([task]).results
    assert not isinstance(answer.payload, Refusal), answer.payload
    spent_before = releases_may_have_spent(first.to_report())  # what the service and the coordinator carry
    # the node restarted meanwhile; the resumed run asks round 0 again (refused, as A37-2's fix wants), then round 1
    second = book()
    second.carry(spent_before)
    core = node(ledger)
    refused = ask(second, core, Task("run2-round0", OWNER, RUN, ROUND0))
    assert isinstance(refused, Refusal) and refused.code == "already_released", refused
    shared = ask(second, core, Task("run2-round1", OWNER, RUN, ROUND1))
    assert not isinstance(shared, Refusal), shared
    reported = may_have_spent(second.to_report()).get(OWNER, 0.0)
    paid = held(core)
    share = CONFIG.params.share_round_epsilon
    assert np.isclose(paid, 2 * share), paid  # two rounds, one share each: the owner paid no round twice
    assert reported >= paid - 1e-12, (reported, paid)  # carried per owner, it was one share


def test_control_one_uninterrupted_run_names_both_shares(tmp_path):
    """Control: the same two rounds in one run, nothing carried: the report names what the ledger holds."""
    run, core = book(), node(tmp_path / "ledger.sqlite")
    for name, spec in (("round0", ROUND0), ("round1", ROUND1)):
        payload = ask(run, core, Task(name, OWNER, RUN, spec))
        assert not isinstance(payload, Refusal), payload
    reported = may_have_spent(run.to_report()).get(OWNER, 0.0)
    assert np.isclose(reported, held(core)), (reported, held(core))
