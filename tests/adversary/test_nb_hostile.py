"""A hostile coordinator against LDP naive Bayes' owners (issue 22 item 3), over the real wire.

An honest ``privfed owner`` process hosts one-row owners with different rows. The coordinator

* asks one owner for a second report of the same run, with other bins: refused (``already_released``),
  nothing debited; under new run ids it gets a report only with a debit, until the budget is spent;
* asks for one bin, more bins than the public limit, another schema's bounds or classes: refused alike,
  with the same text, by owners whose rows differ, and nothing is debited.
"""

import secrets

import numpy as np
from hostile import assert_one_release_per_run, assert_refused_alike, assert_still_serving

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

    def make(task_id, owner_id, run, variant):  # variant 1: other bins
        return report(task_id, owner_id, run, n_bins=3 + variant)

    run = f"nb-{secrets.token_hex(3)}"
    first = assert_one_release_per_run(coordinator, node, victim, make, released_kind="nb", epsilon=EPSILON, run=run)
    assert 0 <= first.nb.feature < D and len(first.nb.report) == 1  # k-RR for 6 cells at eps 0.5
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
    tasks_of = {
        name: (lambda o, name=name, fields=fields: report(f"{run}-{name}-{o}", o, run, **fields))
        for name, fields in hostile.items()
    }
    assert_refused_alike(coordinator, node, (a, b), tasks_of)
    assert_still_serving(coordinator, node, a, d=D)
