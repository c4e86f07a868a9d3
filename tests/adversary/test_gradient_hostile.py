"""A hostile coordinator against LDP gradient descent's owners (issue 22 item 4), over the real wire.

An honest ``privfed owner`` process hosts one-row owners with different rows. The coordinator

* asks one owner for a second gradient of the same run, at another θ: refused (``already_released``),
  nothing debited; under new run ids it gets a gradient only with a debit, until the budget is spent;
* sends θ outside the public box, non-finite, or of another schema's shape: refused alike, with the same
  text, by owners whose rows differ, and nothing is debited.
"""

import secrets

import numpy as np
from hostile import BUDGET, assert_still_serving, kind, ledger_history, matrix, refusal_code, spent_epsilon

from privfed.common.bounds import Bounds
from privfed.common.tasks import LrGradientTask, Task
from privfed.proto import serde

D = 2
X = np.array([[0.3141592, 0.7], [0.7734, 0.2], [0.05, 0.95]])
Y = np.array([1, 0, 1])
EPSILON = 0.5


def gradient(task_id: str, owner_id: str, run: str, theta, *, epsilon: float = EPSILON, param_bound: float = 4.0):
    spec = LrGradientTask("pm", epsilon, np.asarray(theta, dtype=float), param_bound, 2, Bounds.of(0.0, 1.0, D))
    return serde.task_to_proto(Task(task_id, owner_id, run, spec))


def test_a_second_gradient_of_a_run_is_refused_and_a_new_run_is_debited_until_the_budget_is_spent(coordinator, owners):
    node = owners("owner-0", X, Y)
    victim, spare = node.owner_ids[0], node.owner_ids[-1]
    prefix = secrets.token_hex(3)
    run = f"gd-{prefix}"
    first = coordinator.run([gradient(f"{run}-a", victim, run, np.zeros((1, D + 1)))])[f"{run}-a"]
    assert kind(first) == "lr_gradient", first
    spent = spent_epsilon(ledger_history(node.ledger, victim))
    assert spent == EPSILON
    for i, theta in enumerate([np.zeros((1, D + 1)), np.full((1, D + 1), 0.5)]):  # the same θ, another θ
        again = coordinator.run([gradient(f"{run}-again{i}", victim, run, theta)])[f"{run}-again{i}"]
        assert kind(again) == "refusal" and refusal_code(again) == "already_released", again
    assert spent_epsilon(ledger_history(node.ledger, victim)) == spent

    released = 1
    for i in range(10):
        other = f"gd-{prefix}-{i}"
        result = coordinator.run([gradient(f"{other}-a", victim, other, np.zeros((1, D + 1)))])[f"{other}-a"]
        if kind(result) == "refusal":
            assert refusal_code(result) == "budget_exceeded", result
            break
        assert kind(result) == "lr_gradient", result
        released += 1
    history = ledger_history(node.ledger, victim)
    assert released == BUDGET / EPSILON and spent_epsilon(history) <= BUDGET * (1 + 1e-9), history
    assert len({h["release_id"] for h in history}) == released  # one release id per run
    assert_still_serving(coordinator, node, spare, d=D)


def test_theta_outside_the_public_box_is_refused_alike_for_owners_with_different_rows(coordinator, owners):
    node = owners("owner-0", X, Y)
    a, b = node.owner_ids[:2]
    assert not np.array_equal(node.rows()[a][0], node.rows()[b][0])
    run = f"gd-{secrets.token_hex(3)}"
    hostile = {
        "beyond the box": np.full((1, D + 1), 4.0 + 2**-20),
        "another schema": np.zeros((1, D + 2)),
        "three classes": np.zeros((3, D + 1)),
        "not finite": None,  # NaN in θ, written on the wire directly
    }
    for name, theta in hostile.items():
        tasks = []
        for o in (a, b):
            t = gradient(f"{run}-{name}-{o}", o, run, np.zeros((1, D + 1)) if theta is None else theta)
            if theta is None:
                t.lr_gradient.theta.CopyFrom(matrix(np.array([[0.0, np.nan, 0.0]])))
            tasks.append(t)
        results = coordinator.run(tasks)
        answers = [results[t.task_id] for t in tasks]
        assert all(kind(r) == "refusal" for r in answers), (name, answers)
        assert answers[0].refusal == answers[1].refusal, name
    assert ledger_history(node.ledger, a) == [] and ledger_history(node.ledger, b) == []
    assert_still_serving(coordinator, node, a, d=D)
