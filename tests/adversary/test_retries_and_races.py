"""A hostile coordinator's retries and races against a real owner node (audit 20): what it gets never exceeds
what the ledger debited.

* Two tasks of one owner that each fit its remaining budget but not together, sent at once in one batch, or
  one in the answer to the push that carries the other: one is released, the other refused; the ε released is
  the ε debited, within the budget. (The check sees the batch's earlier debits, and the ledger checks again
  under its write lock.)
* Results the coordinator records and then drops (the push fails UNAVAILABLE, so the node cannot tell they
  arrived): the node pushes them again, and a task asked again under its id, or a boosting share asked under a
  new task id for the same run, gets the one release already debited: one payload and one debit per release.

Audit 20 checked each with a control that breaks it (a kept release drawn again; a check blind to the batch's
earlier debits): 3 releases for 1 debit, 2.5 released against a budget of 2.0.
"""

import grpc
import pytest
from hostile import (
    BUDGET,
    HostileCoordinator,
    boost_config,
    boost_share,
    kind,
    ledger_history,
    ncc_task,
    refusal_code,
    spent_epsilon,
    wait_until,
)

D = 3
X = [[0.1, 0.5, 0.9], [0.7, 0.2, 0.4], [0.3, 0.8, 0.6], [0.9, 0.9, 0.1]] * 2
Y = [0, 1] * 4
SMALL = {"epsilon": 0.4, "label_epsilon": 0.1}  # an NCC share of 0.5
BIG = {"epsilon": 0.8, "label_epsilon": 0.2}  # 1.0: after a small one, one fits in the budget of 2, two do not


def answer(result) -> str:
    return refusal_code(result) if kind(result) == "refusal" else kind(result)


def payload(result) -> bytes | None:
    return None if kind(result) in (None, "refusal") else getattr(result, kind(result)).SerializeToString()


def test_two_tasks_that_fit_only_one_at_a_time_release_what_is_debited(coordinator, owners):
    node = owners("owner-0", X, Y, shards=4)
    one_batch, push_answer = node.owner_ids[1], node.owner_ids[2]
    coordinator.run([ncc_task(f"pre-{o}", o, d=D, **SMALL) for o in (one_batch, push_answer)])

    both = coordinator.run([ncc_task(f"big-{i}", one_batch, d=D, **BIG) for i in range(2)])
    second = ncc_task("big2-1", push_answer, d=D, **BIG)
    coordinator.on_push = lambda req: [second] if any(r.task_id == "big2-0" for r in req.results) else []
    since = len(coordinator.results)
    coordinator.send([ncc_task("big2-0", push_answer, d=D, **BIG)])
    raced = {r.task_id: r for r in coordinator.wait_results(["big2-0", "big2-1"], since=since)}
    coordinator.on_push = None

    for owner, results in ((one_batch, both), (push_answer, raced)):
        answers = sorted(answer(r) for r in results.values())
        assert answers == ["budget_exceeded", "ncc_share"], (owner, answers)
        spent = spent_epsilon(ledger_history(node.ledger, owner))
        assert spent == pytest.approx(0.5 + 1.0) and spent <= BUDGET, (owner, spent)


class RecordThenDrop(HostileCoordinator):
    """Records every pushed result, then fails the next ``drops`` pushes that carry results (UNAVAILABLE)."""

    drops = 0

    def _push(self, request, context):
        if request.results and self.drops > 0:
            with self._cv:
                self.drops -= 1
                self.results.extend(type(r).FromString(r.SerializeToString()) for r in request.results)
                self._cv.notify_all()
            context.abort(grpc.StatusCode.UNAVAILABLE, "dropped after recording")
        return super()._push(request, context)


@pytest.fixture
def coordinator(certs):
    """This module's hostile coordinator (the shared ``owners`` fixture spawns nodes against it): one that can
    drop pushes it recorded; it drops none until a test sets ``drops``."""
    hc = RecordThenDrop(certs)
    yield hc
    hc.stop()


def test_results_recorded_then_dropped_are_one_release_each_however_often_asked(coordinator, owners):
    dropping = coordinator
    node = owners("owner-0", X, Y, shards=4)
    ncc_owner, boost_owner = node.owner_ids[0], node.owner_ids[1]
    config = boost_config(D, "run-r", epsilon=0.5)
    dropping.run([ncc_task("warm", node.owner_ids[3], d=D, **SMALL)])
    dropping.drops = 2
    since = len(dropping.results)
    dropping.send([ncc_task("n1", ncc_owner, d=D, **SMALL), boost_share("s1", boost_owner, "run-r", config)])
    assert wait_until(lambda: dropping.drops == 0, timeout=40), "the node did not push again"
    dropping.run([ncc_task("n1", ncc_owner, d=D, **SMALL), boost_share("s1", boost_owner, "run-r", config)])
    dropping.run([boost_share("s2", boost_owner, "run-r", config)])  # a new task id for the same run's share

    got = dropping.results[since:]
    ncc = [r for r in got if r.task_id == "n1"]
    shares = [r for r in got if r.task_id in ("s1", "s2")]
    assert len(ncc) >= 2 and len(shares) >= 3, ([answer(r) for r in ncc], [answer(r) for r in shares])
    assert len({payload(r) for r in ncc} - {None}) == 1, [answer(r) for r in ncc]  # the same release, or refused
    assert len({payload(r) for r in shares} - {None}) == 1, [answer(r) for r in shares]
    assert spent_epsilon(ledger_history(node.ledger, ncc_owner)) == pytest.approx(0.5)
    assert len(ledger_history(node.ledger, boost_owner)) == 1  # the run's one share, debited once
