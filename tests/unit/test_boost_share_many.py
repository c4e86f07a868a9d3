"""A node's boosting shares drawn together (``BoostShareKind.compute_many``, issue 27) against the same
owners' shares drawn one by one (``compute``, :func:`privfed.common.boosting.owner.share`): the same release,
an independent draw per owner. Deterministic encodings (ε = ∞) must agree exactly; noisy ones in
distribution: each owner's contribution to the encoding's unbiased estimate is i.i.d. across owners, so the
two means per coordinate are compared with a two-sample z test, their spreads by their ratio, and the
draws of owners that hold the same row must be uncorrelated (one draw each, not one shared)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import at_round, config_to_dict, empty_history
from privfed.common.bounds import Bounds
from privfed.common.learners.stump_sampled_encoding import SampledReports
from privfed.common.tasks import BoostShareTask, Task
from privfed.owner.kinds.boosting import BoostShareKind
from privfed.owner.local import LocalOwner

BOUNDS = Bounds.of(0.0, 1.0, 3)
N_BINS = 4
ROWS = np.array([[0.9, 0.1, 0.6], [0.2, 0.7, 0.4]])  # owner i holds row i % 2, label i % 2


def _owners(n: int, seed: int) -> list[LocalOwner]:
    return [
        LocalOwner(
            f"owner-0.o{i:05d}",
            ROWS[i % 2 : i % 2 + 1],
            np.array([i % 2]),
            np.random.Generator(np.random.PCG64([seed, i])),
            2,
            BOUNDS,
        )
        for i in range(n)
    ]


def _tasks(owners: list[LocalOwner], epsilon: float) -> list[Task]:
    params = BoostingParams(epsilon=epsilon, n_classes=2, bounds=BOUNDS, n_rounds=4, n_bins=N_BINS)
    spec = BoostShareTask(config_to_dict(params, "run-1"), at_round(empty_history(), 0))
    return [Task(f"t{i}", o.owner_id, "run-1", spec) for i, o in enumerate(owners)]


def test_deterministic_shares_are_the_same_together_and_one_by_one():
    kind, owners = BoostShareKind(), _owners(40, 0)
    tasks = _tasks(owners, math.inf)
    together = kind.compute_many(tasks, owners)
    assert together is not None
    alone = [kind.compute(t, t.spec, o) for t, o in zip(tasks, _owners(40, 1), strict=True)]
    for a, b in zip(together, alone, strict=True):
        assert type(a) is type(b)
        np.testing.assert_array_equal(a.reports, b.reports)


@pytest.mark.parametrize("fallback", [False, True])
def test_noisy_shares_have_one_distribution_together_and_one_by_one(fallback):
    n, kind = 4000, BoostShareKind()
    owners = _owners(n, 2)
    tasks = _tasks(owners, 1.0)
    plan = tasks[0].spec.config.releases
    encoding = plan.share_encoding
    if fallback:
        together = kind.fallback_many(tasks, owners)
        alone = [kind.fallback(t.spec, o.public, o.n_rows, o.rng) for t, o in zip(tasks, _owners(n, 3), strict=True)]
    else:
        together = kind.compute_many(tasks, owners)
        alone = [kind.compute(t, t.spec, o) for t, o in zip(tasks, _owners(n, 3), strict=True)]
    assert together is not None and len(together) == n

    def contributions(replies) -> np.ndarray:
        assert all(type(r) is type(replies[0]) and r.reports.shape[0] == 1 for r in replies)
        return np.stack(
            [
                encoding.estimate(
                    SampledReports(encoding.kind, encoding.oracle, encoding.epsilon, r.coordinates, r.reports)
                ).reshape(-1)
                for r in replies
            ]
        )

    a, b = contributions(together), contributions(alone)
    se = np.sqrt(a.var(axis=0, ddof=1) / n + b.var(axis=0, ddof=1) / n)
    z = np.abs(a.mean(axis=0) - b.mean(axis=0)) / np.maximum(se, 1e-12)
    assert z.max() < 5.0, z  # a few dozen coordinates: a false alarm below 1e-4 (fixed seeds: none)
    assert a.std(axis=0).max() > 0  # noisy indeed
    ratio = a.var(axis=0, ddof=1) / np.maximum(b.var(axis=0, ddof=1), 1e-12)
    assert np.all((ratio > 0.85) & (ratio < 1.15)), ratio  # one noise level
    for c in np.flatnonzero(a.std(axis=0) > 0):  # independent draws: owners i and i + 2 hold the same row
        r = np.corrcoef(a[:-2, c], a[2:, c])[0, 1]
        assert abs(r) * math.sqrt(n) < 5.0, (c, r)


def test_an_owner_of_no_rows_has_the_same_fallback_together_as_alone():
    """A stump share encodes rows that exist: an owner of no rows falls back on the midpoint's one row, alone
    (``fallback``) and together (``fallback_many``) alike, so a batch holding such an owner is not thrown back
    to one-by-one fallbacks (a longer path only when some owner has no rows)."""
    kind, owners = BoostShareKind(), _owners(6, 4)
    empty = LocalOwner(
        "owner-0.o00006",
        np.empty((0, 3)),
        np.empty(0, dtype=np.int64),
        np.random.Generator(np.random.PCG64(9)),
        2,
        BOUNDS,
    )
    owners.append(empty)
    tasks = _tasks(owners, math.inf)
    together = kind.fallback_many(tasks, owners)
    assert together is not None
    alone = [kind.fallback(t.spec, o.public, o.n_rows, o.rng) for t, o in zip(tasks, owners, strict=True)]
    for a, b in zip(together, alone, strict=True):
        np.testing.assert_array_equal(a.reports, b.reports)
    assert together[-1].reports.shape[0] == 1
