"""Audit 36, A36-2 (accounting, not an owner's privacy): a secure sum's refusal ``unopened`` (A33-2) comes after the
owner's debit, but the coordinator's job book takes it as any refusal, "nothing spent": the job's report names the
owner in neither ``epsilon_by_owner`` nor ``epsilon_unanswered_by_owner``.

The owner core debits a boosting evaluation's release, computes it, and only then hands it to the pairwise-mask
machine, which raises ``Unopened`` when a neighbour's key shares do not open (``owner/core.py`` ``_finish``): the
refusal is debited. The coordinator's machine leaves the accused out, with its accusers when fewer than t of its
neighbours name it (a false complainer, or an honest owner that one hostile neighbour sealed garbage to alone):
such an accuser is never asked again, so the answer from its record that would count the release never comes.
``JobBook.take`` pops the release from the unanswered ones ("refused (nothing spent)") and counts no ε. The README
says the report's two fields together bound what each owner may have spent (walkthrough 10, W10-3; audit 35).
"""

from __future__ import annotations

import numpy as np
import pytest
from differential import boost, kept_history
from test_audit33_ring_framed_successor import (
    MEMBERS,
    SEALER,
    _secagg_sum,
    _secagg_transport,
    false_pairwise_complainer,
)

from privfed.common.boosting.wire import at_round
from privfed.common.tasks import BoostEvaluateTask, Refusal, Result, RingSpec, Task
from privfed.server.contracts import PublicLimits
from privfed.server.dispatcher import RunOutcome
from privfed.server.rounds import JobBook

pytestmark = pytest.mark.in_process


def _evaluate_tasks(owners) -> list[Task]:
    config = boost("stump", "run-a36-2", n_bins=4)
    history = at_round(kept_history(), 1)
    spec = RingSpec("s" * 32, (), 20, 64, config.releases.contribution_bound, (), {})
    task = BoostEvaluateTask(config, history, history.kept[0].learner, spec)
    return [Task(f"t{i}", o, "run-a36-2", task) for i, o in enumerate(owners)]


def test_an_unopened_refusal_is_a_debited_release(monkeypatch):
    """The owner core's side: the owner that refuses ``unopened`` holds the evaluation's debit in its ledger (the
    false complainer of ``test_audit33_ring_framed_successor``, left out with the owner it names)."""
    complainers = false_pairwise_complainer(monkeypatch)
    transport = _secagg_transport()
    record = _secagg_sum(transport).record
    (complainer,) = complainers
    assert record.refused.get(complainer) == "unopened" and complainer not in record.summed, record
    node = complainer.split(".")[0]
    spent = [h for h in transport.ledgers[node].history(complainer) if h["epsilon"] > 0]
    assert spent, "the complainer was not debited"  # it was: the refusal comes after the debit


def test_the_job_book_counts_an_unopened_refusal_as_maybe_spent():
    """The coordinator's side: after the refusal ``unopened`` the report names the owner's ε somewhere (counted, or
    "may have spent"). On current code it is in neither field."""
    tasks = _evaluate_tasks(MEMBERS[:4])
    book = JobBook(PublicLimits(max_rows=2), owner_ids=list(MEMBERS[:4]))
    book.to_ask(tasks)
    eps = tasks[0].spec.config.params.eval_round_epsilon
    refusal = Refusal.of("unopened", SEALER, accused=SEALER)
    results = {tasks[0].task_id: Result(tasks[0].task_id, tasks[0].owner_id, refusal)}
    book.record(tasks[:1], RunOutcome(results, [], []), silent_nodes=[])
    report = book.to_report()
    named = report["epsilon_by_owner"].get(MEMBERS[0], 0.0) + report["epsilon_unanswered_by_owner"].get(MEMBERS[0], 0.0)
    assert np.isclose(named, eps), (report["epsilon_by_owner"], report["epsilon_unanswered_by_owner"])
