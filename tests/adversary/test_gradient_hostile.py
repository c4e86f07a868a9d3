"""A hostile coordinator against LDP gradient descent's owners (issue 22 item 4), over the real wire.

An honest ``privfed owner`` process hosts one-row owners with different rows. The coordinator

* asks one owner for a second gradient of the same run, at another θ: refused (``already_released``),
  nothing debited; under new run ids it gets a gradient only with a debit, until the budget is spent;
* sends θ outside the public box, non-finite, or of another schema's shape: refused alike, with the same
  text, by owners whose rows differ, and nothing is debited.
"""

import secrets

import numpy as np
from hostile import assert_one_release_per_run, assert_refused_alike, assert_still_serving, matrix

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

    def make(task_id, owner_id, run, variant):  # variant 1: another θ
        return gradient(task_id, owner_id, run, np.full((1, D + 1), 0.5 * variant))

    run = f"gd-{secrets.token_hex(3)}"
    assert_one_release_per_run(coordinator, node, victim, make, released_kind="lr_gradient", epsilon=EPSILON, run=run)
    assert_still_serving(coordinator, node, spare, d=D)


def test_theta_outside_the_public_box_is_refused_alike_for_owners_with_different_rows(coordinator, owners):
    node = owners("owner-0", X, Y)
    a, b = node.owner_ids[:2]
    assert not np.array_equal(node.rows()[a][0], node.rows()[b][0])
    run = f"gd-{secrets.token_hex(3)}"

    def with_theta(name, theta):
        return lambda o: gradient(f"{run}-{name}-{o}", o, run, theta)

    def not_finite(o):  # NaN in θ, written on the wire directly
        t = gradient(f"{run}-nan-{o}", o, run, np.zeros((1, D + 1)))
        t.lr_gradient.theta.CopyFrom(matrix(np.array([[0.0, np.nan, 0.0]])))
        return t

    hostile = {
        "beyond the box": with_theta("box", np.full((1, D + 1), 4.0 + 2**-20)),
        "another schema": with_theta("schema", np.zeros((1, D + 2))),
        "three classes": with_theta("classes", np.zeros((3, D + 1))),
        "not finite": not_finite,
    }
    assert_refused_alike(coordinator, node, (a, b), hostile)
    assert_still_serving(coordinator, node, a, d=D)
