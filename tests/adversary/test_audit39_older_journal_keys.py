"""Audit 39, A39-3: a report whose ``epsilon_by_release`` misses a release its ``epsilon_by_owner`` counts is carried
by its keys alone, so the next run drops that release.

``releases_may_have_spent`` reads only ``epsilon_by_release`` when a report has it (the by-owner fields are ignored).
A resumed run over a journal of older code replays ``counted`` entries ``[owner, release]`` with no ε
(``JobBook.replay``): the release enters ``_counted`` and ``epsilon_by_owner`` (the account's values), but not
``_counted_epsilon``, so the write-ahead report names it in ``epsilon_by_owner`` and not in ``epsilon_by_release``.
The run after that one carries by key: if it ends before it replays the journal (its owners not back by the
register timeout, the service stopped while it waits, A37-3's paths), its report names nothing for the owner whose
ledger holds the share. The service keeps one report per job, so nothing else names it.

Harness: a real owner core over a ledger file pays round 0; the journal account is what a book of older code wrote
(``counted`` without ε); two later books as run_federated_job(write_ahead=True) drives them.

Fixed: ``releases_may_have_spent`` carries the rest of an owner's total beyond its listed releases as
``JOURNALED``, netted only against what a run replays from the journal.
"""

from __future__ import annotations

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
from privfed.server.rounds import JobBook, may_have_spent, releases_may_have_spent

pytestmark = pytest.mark.in_process

RUN = "run-a39-3"
OWNER = "node-0.o00000"
CONFIG = boost("stump", RUN, share_groups="all")
ROUND0 = BoostShareTask(CONFIG, empty_history())


def _book() -> JobBook:
    book = JobBook(PublicLimits(max_rows=XB.shape[0]), owner_ids=[OWNER])
    book.on_ask = lambda: None
    return book


def _runs(tmp_path, *, older_journal: bool):
    owner = LocalOwner(OWNER, XB, YB, np.random.Generator(np.random.PCG64(1)), K, BOUNDS)
    core = OwnerCore([owner], Ledger(tmp_path / "ledger.sqlite", epsilon_budget=10.0, delta_budget=1e-3))
    first = _book()
    task = Task("run1-round0", OWNER, RUN, ROUND0)
    first.to_ask([task])
    (answer,) = core.answer([task]).results
    assert not isinstance(answer.payload, Refusal), answer.payload
    first.record([task], RunOutcome({answer.task_id: answer}, [], []), silent_nodes=[])
    account = first.account()  # the journal's checkpoint of round 0
    if older_journal:  # what a journal of older code holds: [owner, release]
        account["counted"] = [[o, r] for o, r, *_ in account["counted"]]
    # run 2 (the new code): round 0 replayed from the journal, then the run is killed / stopped
    second = _book()
    second.carry(releases_may_have_spent(first.to_report()))
    second.replay(account)
    report2 = second.to_report()
    held = sum(h["epsilon"] for h in core.ledger.history(OWNER))
    assert may_have_spent(report2).get(OWNER, 0.0) >= held - 1e-12  # still right in run 2's own report
    # run 3: ends before it replays the journal (owners not back): only what it carries is named
    third = _book()
    third.carry(releases_may_have_spent(report2))
    third.lose([OWNER])
    return may_have_spent(third.to_report()).get(OWNER, 0.0), held


def test_run_after_an_older_journal_replay_names_the_share(tmp_path):
    reported, held = _runs(tmp_path, older_journal=True)
    assert held > 0
    assert reported >= held - 1e-12, (reported, held)


def test_control_current_journal(tmp_path):
    """Control: a journal of the current code ([owner, release, ε]) is carried by key into run 3."""
    reported, held = _runs(tmp_path, older_journal=False)
    assert reported >= held - 1e-12, (reported, held)
