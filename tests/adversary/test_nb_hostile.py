"""A hostile coordinator against LDP naive Bayes' owners (issue 22 item 3), over the real wire.

An honest ``privfed owner`` process hosts one-row owners with different rows. The coordinator

* asks one owner for a second report of the same run, with other bins: refused (``already_released``),
  nothing debited; under new run ids it gets a report only with a debit, until the budget is spent;
* asks for one bin, more bins than the public limit, another schema's bounds or classes: refused alike,
  with the same text, by owners whose rows differ, and nothing is debited.
"""

import secrets

import numpy as np
from hostile import BUDGET, assert_still_serving, kind, ledger_history, refusal_code, spent_epsilon

from privfed.common.bounds import Bounds
from privfed.common.tasks import NbReportTask, Task
from privfed.proto import serde

D = 2
X = np.array([[0.3141592, 0.7], [0.7734, 0.2], [0.05, 0.95]])
Y = np.array([1, 0, 1])
EPSILON = 0.5


def report(task_id: str, owner_id: str, run: str, *, n_bins: int = 3, n_classes: int = 2, bounds=None):
    spec = NbReportTask(EPSILON, n_bins, n_classes, Bounds.of(0.0, 1.0, D) if bounds is None else bounds)
    return serde.task_to_proto(Task(task_id, owner_id, run, spec))


def test_a_second_report_of_a_run_is_refused_and_a_new_run_is_debited_until_the_budget_is_spent(coordinator, owners):
    node = owners("owner-0", X, Y)
    victim, spare = node.owner_ids[0], node.owner_ids[-1]
    prefix = secrets.token_hex(3)
    run = f"nb-{prefix}"
    first = coordinator.run([report(f"{run}-a", victim, run)])[f"{run}-a"]
    assert kind(first) == "nb", first
    assert 0 <= first.nb.feature < D and len(first.nb.report) == 1  # k-RR for 6 cells at eps 0.5
    assert spent_epsilon(ledger_history(node.ledger, victim)) == EPSILON
    for i, n_bins in enumerate([3, 4]):  # the same task again, other bins
        again = coordinator.run([report(f"{run}-again{i}", victim, run, n_bins=n_bins)])[f"{run}-again{i}"]
        assert kind(again) == "refusal" and refusal_code(again) == "already_released", again
    assert spent_epsilon(ledger_history(node.ledger, victim)) == EPSILON

    released = 1
    for i in range(10):
        other = f"nb-{prefix}-{i}"
        result = coordinator.run([report(f"{other}-a", victim, other)])[f"{other}-a"]
        if kind(result) == "refusal":
            assert refusal_code(result) == "budget_exceeded", result
            break
        assert kind(result) == "nb", result
        released += 1
    history = ledger_history(node.ledger, victim)
    assert released == BUDGET / EPSILON and spent_epsilon(history) <= BUDGET * (1 + 1e-9), history
    assert len({h["release_id"] for h in history}) == released  # one release id per run
    assert_still_serving(coordinator, node, spare, d=D)


def test_hostile_parameters_are_refused_alike_for_owners_with_different_rows(coordinator, owners):
    node = owners("owner-0", X, Y)
    a, b = node.owner_ids[:2]
    assert not np.array_equal(node.rows()[a][0], node.rows()[b][0])
    run = f"nb-{secrets.token_hex(3)}"
    hostile = {
        "one bin": dict(n_bins=1),
        "bins beyond the limit": dict(n_bins=2**31),
        "other classes": dict(n_classes=5),
        "other bounds": dict(bounds=Bounds.of(0.0, 2.0, D)),
        "another schema": dict(bounds=Bounds.of(0.0, 1.0, D + 1)),
    }
    for name, fields in hostile.items():
        tasks = [report(f"{run}-{name}-{o}", o, run, **fields) for o in (a, b)]  # type: ignore[arg-type]
        results = coordinator.run(tasks)
        answers = [results[t.task_id] for t in tasks]
        assert all(kind(r) == "refusal" for r in answers), (name, answers)
        assert answers[0].refusal == answers[1].refusal, name
    assert ledger_history(node.ledger, a) == [] and ledger_history(node.ledger, b) == []
    assert_still_serving(coordinator, node, a, d=D)
