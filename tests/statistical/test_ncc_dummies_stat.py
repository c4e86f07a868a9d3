"""A boosted NCC share padded with dummies of weight 0 (common/boosting/owner.py, ``ncc_release_rows``) keeps the
class estimates unbiased.

Monte Carlo over R = 3000 releases of one owner's 20 weighted rows, padded to 32 reports: for both label schemes
that leave a network (``rr``: the row mechanism with a weight column and k-RR labels; ``joint``: one (label, sign)
report per row), the mean of the coordinator's estimates of ``sum u t`` and ``sum u`` per class lies within 4.5
standard errors of the exact value, as does the unpadded release's (the control); the dummies' cost is the
variance they add, which is reported and checked to be larger, not smaller.
"""

from __future__ import annotations

import numpy as np
import pytest

from privfed.common.boosting.owner import ncc_release_rows, share
from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.bounds import Bounds
from privfed.common.learners.ncc import ncc_class_sums, scaled_weights

D, K, N, R = 3, 3, 20, 3000
BOUNDS = Bounds.of(-2.0, 2.0, D)
WEIGHT_BOUND = 2.0


def _estimates(plan: ReleasePlan, X, y, w, rng, padded: bool) -> np.ndarray:
    """One release's estimates, flattened: ``sum u t`` (K, d) then ``sum u`` (K,)."""
    if padded:
        X, y, w = ncc_release_rows(plan, X, y, w, rng=rng)
    release = share(plan, X, y, w, rng=rng)
    if plan.joint_encoding is not None:
        sums, counts = plan.joint_encoding.class_sums(release)
    else:
        sums, counts = ncc_class_sums(release, n_classes=K, d=D, label_rr=plan.label_rr())
    return np.concatenate([np.ravel(sums), np.ravel(counts)])


@pytest.mark.parametrize("labels", ["rr", "joint"])
def test_dummies_leave_the_class_estimates_unbiased(labels):
    rng = np.random.Generator(np.random.PCG64(31))
    X = rng.uniform(-2, 2, (N, D))
    y = rng.integers(0, K, N)
    w = rng.uniform(0.2, 2.5, N)  # some above the weight bound: clipped, as an owner's are
    plan = ReleasePlan(
        BoostingParams(
            base="ncc", epsilon=4.0, labels=labels, n_classes=K, bounds=BOUNDS, n_rounds=2, weight_bound=WEIGHT_BOUND
        )
    )
    assert ncc_release_rows(plan, X, y, w, rng=rng)[0].shape == (32, D)
    u, t = scaled_weights(w, WEIGHT_BOUND, N), BOUNDS.to_unit(X)
    onehot = (y[:, None] == np.arange(K)[None, :]).astype(float)  # (N, K)
    exact = np.concatenate([np.ravel(onehot.T @ (u[:, None] * t)), onehot.T @ u])
    spread = {}
    for padded in (False, True):
        draws = np.array([_estimates(plan, X, y, w, rng, padded) for _ in range(R)])
        se = draws.std(axis=0, ddof=1) / np.sqrt(R)
        z = np.abs(draws.mean(axis=0) - exact) / se
        assert np.all(z < 4.5), (padded, np.round(z, 2))
        spread[padded] = float(np.mean(draws.var(axis=0, ddof=1)))
    assert spread[True] > spread[False], spread  # the dummies' noise: the cost, not hidden


@pytest.mark.parametrize("labels", ["rr", "joint"])
def test_without_noise_the_dummies_add_exactly_nothing(labels):
    """At ε = ∞ the share is the exact weighted rows: with 17 rows padded to 32, the estimates equal the exact
    class sums to rounding (a dummy's ``(0, ..., 0, -1)`` cancels against its reported label's count)."""
    rng = np.random.Generator(np.random.PCG64(32))
    X, y, w = rng.uniform(-2, 2, (17, D)), rng.integers(0, K, 17), rng.uniform(0.2, 2.5, 17)
    plan = ReleasePlan(
        BoostingParams(
            base="ncc", epsilon=np.inf, labels=labels, n_classes=K, bounds=BOUNDS, n_rounds=2, weight_bound=WEIGHT_BOUND
        )
    )
    u, t = scaled_weights(w, WEIGHT_BOUND, 17), BOUNDS.to_unit(X)
    onehot = (y[:, None] == np.arange(K)[None, :]).astype(float)
    exact = np.concatenate([np.ravel(onehot.T @ (u[:, None] * t)), onehot.T @ u])
    np.testing.assert_allclose(_estimates(plan, X, y, w, rng, padded=True), exact, rtol=0, atol=1e-12)


def test_a_subsample_above_the_bound_is_uniform_over_the_subsets():
    """``release_rows`` (common/work_rows.py) above a public bound: 6 rows, bound 3, R = 20000 draws. Every one of
    the C(6, 3) = 20 subsets is drawn with probability 1/20 (chi-square, 19 degrees of freedom, p > 1e-4:
    statistic < 49.4), sorted, with no dummy; at or below the bound every row, then the dummies."""
    from itertools import combinations

    from scipy.stats import chi2

    from privfed.common.work_rows import release_rows

    rng = np.random.Generator(np.random.PCG64(17))
    index = {c: i for i, c in enumerate(combinations(range(6), 3))}
    counts = np.zeros(len(index))
    for _ in range(20000):
        keep, dummies = release_rows(6, 3, rng)
        assert dummies == 0 and list(keep) == sorted(keep)
        counts[index[tuple(int(k) for k in keep)]] += 1
    expected = 20000 / len(index)
    statistic = float(np.sum((counts - expected) ** 2 / expected))
    assert statistic < chi2.ppf(1 - 1e-4, len(index) - 1), (statistic, counts)
    for n, bound, want_dummies in ((3, None, 1), (3, 3, 0), (0, 5, 1), (5, 6, 1)):  # up to min(cell, bound)
        keep, dummies = release_rows(n, bound, rng)
        assert keep.tolist() == list(range(n)) and dummies == want_dummies, (n, bound)
