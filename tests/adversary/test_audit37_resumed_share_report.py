"""Audit 37, A37-2: a resumed boosting job's report can name less than an owner spent on the job.

``JobBook.carry`` (walkthrough 14, W14-2) nets per *owner*: what the interrupted run's report says an owner may
have spent, minus whatever the resumed run counts for that owner, is named unanswered. That is right when the
resumed run's count is the *same* release again (the owner sends its kept share, or refuses ``already_released``
and the carry keeps the old one). It is wrong when the resumed run counts a *new* release of that owner: the old
one is netted away.

Under ``share_groups="all"`` (every owner shares in every round, ``shares_per_owner = T``) that is what happens when
the owner's node restarted while the coordinator was down (a host reboot, ``docker compose restart``): the
share's ledger entry is keyed by its task id and counted per run (``boost-share:<run>``), not per round, so the
restarted node, its kept share gone, finds ``released < T`` and draws the interrupted round's share afresh, debiting
it again (``server/journal.py``'s docstring says such a node refuses ``already_released``; it does only under
``share_groups="disjoint"``). The resumed run counts that new share, ``carry`` nets the first one away, and the
finished report names one share of ε fewer than the owner's ledger holds for the job (the owner then refuses the
run's last round, its T shares spent, which the report shows as an ordinary refusal).

The owner's ledger still bounds what the coordinator learns (the run's T shares), so this is an accounting fault of
the report, not a leak. Real owner cores over one ledger file (the node's restart is a new core over it); the job
books are the coordinator's own (``server/rounds.py``), driven as ``run_federated_job`` drives them with
``write_ahead``: run 1's report is written when the batch is asked, then the coordinator dies before it books the
answer; run 2 carries that report's :func:`may_have_spent`.

Fixed: under ``share_groups="all"`` a share's ledger entry is keyed by its run and round
(``BoostShareKind.debits``), so the restarted node refuses ``already_released``; these tests pass since.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from differential import BOUNDS, XB, YB, K, boost

from privfed.common.boosting.wire import empty_history
from privfed.common.ledger import Ledger
from privfed.common.tasks import BoostShareTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner
from privfed.server.contracts import PublicLimits
from privfed.server.dispatcher import RunOutcome
from privfed.server.rounds import JobBook, may_have_spent

pytestmark = pytest.mark.in_process

RUN = "run-a37-2"
OWNER = "node-0.o00000"


def _node(ledger: Path) -> OwnerCore:
    """A (re)started owner node: a fresh core and owner (nothing kept in memory) over the same ledger file."""
    owner = LocalOwner(OWNER, XB, YB, np.random.Generator(np.random.PCG64(1)), K, BOUNDS)
    return OwnerCore([owner], Ledger(ledger, epsilon_budget=10.0, delta_budget=1e-3))


def _book() -> JobBook:
    return JobBook(PublicLimits(max_rows=XB.shape[0]), owner_ids=[OWNER])


def _resumed(tmp_path: Path, share_groups: str) -> tuple[float, float, object]:
    """(what the resumed job's report says the owner may have spent, what its ledger holds, run 2's answer)."""
    ledger = tmp_path / "ledger.sqlite"
    spec = BoostShareTask(boost("stump", RUN, share_groups=share_groups), empty_history())
    # run 1: round 0's share is asked (the write-ahead report names it), the owner pays, the coordinator dies
    first = _book()
    task = Task("run1-round0", OWNER, RUN, spec)
    first.to_ask([task])
    (answer,) = _node(ledger).answer([task]).results
    assert not isinstance(answer.payload, Refusal), answer.payload
    spent_before = may_have_spent(first.to_report())
    # the owner's node restarted meanwhile; the service resumes the job and asks round 0 again (not journaled)
    second = _book()
    second.carry(spent_before)
    task = Task("run2-round0", OWNER, RUN, spec)
    second.to_ask([task])
    core = _node(ledger)
    (answer,) = core.answer([task]).results
    second.record([task], RunOutcome({answer.task_id: answer}, [], []), silent_nodes=[])
    reported = may_have_spent(second.to_report()).get(OWNER, 0.0)
    held = sum(h["epsilon"] for h in core.ledger.history(OWNER))
    return reported, held, answer.payload


def test_a_resumed_jobs_report_names_what_the_ledger_holds_every_owner_sharing(tmp_path):
    reported, held, _ = _resumed(tmp_path, "all")
    assert reported >= held - 1e-12, (reported, held)


def test_control_one_share_per_owner_the_restarted_node_refuses_and_the_carry_keeps_it(tmp_path):
    """Control (share_groups="disjoint", the default): the restarted node refuses ``already_released``, the resumed
    run counts nothing, and the carry names the interrupted run's share: the report matches the ledger."""
    reported, held, payload = _resumed(tmp_path, "disjoint")
    assert isinstance(payload, Refusal) and payload.code == "already_released", payload
    assert np.isclose(reported, held), (reported, held)


def test_every_owner_sharing_the_restarted_node_does_not_debit_the_same_round_again(tmp_path):
    """The cause on the owner's side: asked for round 0 again after its restart, the node must not pay for round 0
    twice (as under ``share_groups="disjoint"``: ``already_released``). On current code it answers with a fresh
    draw and its ledger holds two shares for the one round."""
    _, held, payload = _resumed(tmp_path, "all")
    share = boost("stump", RUN, share_groups="all").params.share_round_epsilon
    assert np.isclose(held, share), (held, payload)
