"""Checks of a release kind whose ledger entry carries the run's release id (``lr_gradient``, ``nb``), on
in-process owner cores: the same refusal whatever the rows, and one release per owner and run."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from privfed.common.tasks import Refusal, Task
from privfed.owner.core import OwnerCore


def cores_with_different_rows(core: Callable[..., OwnerCore], d: int) -> tuple[OwnerCore, OwnerCore]:
    """Two cores from ``core(X_rows, y_rows)`` hosting the same two owners with other rows, row counts and labels."""
    a = core([np.full((1, d), 1.0), np.full((1, d), 9.0)], [np.array([0]), np.array([1])])
    b = core([np.linspace(0.0, 10.0, 2 * d).reshape(2, d), np.full((4, d), 7.0)], [np.array([1, 1]), np.zeros(4, int)])
    return a, b


def assert_refused_alike(cores: Sequence[OwnerCore], tasks: list[Task], name: str) -> None:
    """Every core (same owners and public configuration, other rows) refuses ``tasks`` with the same
    refusals, the same for each owner, and debits nothing."""
    outcomes = []
    for c in cores:
        results = c.answer(tasks).results
        assert all(isinstance(r.payload, Refusal) for r in results), name
        outcomes.append([(r.owner_id, r.payload) for r in results])
        assert all(c.ledger.history(t.owner_id) == [] for t in tasks)
    assert all(o == outcomes[0] for o in outcomes)
    assert len({p for _, p in outcomes[0]}) == 1  # and the same for every owner of a core


def assert_one_release_per_run(core: OwnerCore, make: Callable[[str, str, int], Task], reply: type) -> None:
    """``make(task_id, run, variant)``: a task of one owner whose budget holds two releases and a half
    (variant 1: the same run asked again with other parameters). The second task of a run is refused
    (``already_released``); a new run is debited again until the budget is spent."""
    first = core.answer([make("a1", "run-1", 0)]).results[0]
    assert isinstance(first.payload, reply)
    again = core.answer([make("a2", "run-1", 1)]).results[0]
    assert again.payload.code == "already_released"
    second = core.answer([make("b1", "run-2", 0)]).results[0]
    assert isinstance(second.payload, reply)
    third = core.answer([make("c1", "run-3", 0)]).results[0]
    assert third.payload.code == "budget_exceeded"
    assert core.ledger.spent(first.owner_id).epsilon == pytest.approx(2.0)
