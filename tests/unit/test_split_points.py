"""Private split points: stump thresholds at LDP quantiles (issue 22 item 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.boosting.owner import check_learner
from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.boosting.simulation import simulate
from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.split_points import (
    SplitPointOracle,
    private_split_points,
    quantile_thresholds,
    split_owner_count,
    with_midpoints,
)
from privfed.common.learners.stump import Stump, binarize

BOUNDS = Bounds(np.array([0.0, 0.0]), np.array([16.0, 1.0]))


def skewed(rng, n):
    """Feature 0 crowds at the low end of its documented range (an area, a count); feature 1 is binary."""
    return np.column_stack([np.minimum(rng.exponential(2.0, n), 16.0), rng.random(n) < 0.3])


def test_noiseless_split_points_are_the_grid_edges_at_the_quantiles(rng):
    X = skewed(rng, 20000)
    sp = private_split_points(X, BOUNDS, 4, epsilon=math.inf, rng=rng)
    q = np.quantile(X[:, 0], [0.25, 0.5, 0.75])
    assert np.all(np.abs(sp[0] - q) <= 1.0 + 1e-12)  # within one grid cell (16 cells of [0, 16])
    assert np.all((sp[1] > 0.0) & (sp[1] <= 1.0))  # a binary feature splits between its two values
    assert np.all(binarize(X, BOUNDS, 2, sp[:, 1:2])[:, 1] == (X[:, 1] == 1.0))


def test_a_feature_without_reports_keeps_the_equal_width_thresholds():
    hist = np.array([[0.0] * 4, [0.1, 0.2, 0.3, 0.4]])
    out = quantile_thresholds(hist, BOUNDS, 2)
    assert out[0, 0] == 8.0 and out[1, 0] == 0.75


def test_private_split_points_move_towards_the_mass_at_useful_epsilon(rng):
    X = skewed(rng, 3000)
    sp = np.median([private_split_points(X, BOUNDS, 2, epsilon=3.0, rng=rng)[0, 0] for _ in range(9)])
    assert sp < 4.0  # the midpoint is 8; the median of the feature about 1.4


def test_one_report_per_owner_and_the_feature_is_drawn_whatever_the_data(rng):
    oracle = SplitPointOracle(epsilon=1.0, d=2)
    X = skewed(rng, 12)
    owner = np.repeat(np.arange(4), 3)  # owners of three rows
    f1, r1 = oracle.share(X, BOUNDS, np.random.default_rng(5), owner)
    f2, _ = oracle.share(np.zeros_like(X), BOUNDS, np.random.default_rng(5), owner)
    assert f1.shape == (4,) and r1.shape[0] == 4 and np.array_equal(f1, f2)
    assert oracle.oracle in ("krr", "oue") and 0 <= r1.min() and r1.max() < oracle.frequency_oracle.domain


def test_boosting_uses_only_the_public_split_points(rng):
    sp = ((2.0,), (0.5,))
    fb = BoostingParams(epsilon=math.inf, n_classes=2, bounds=BOUNDS, n_rounds=2, n_bins=2, split_points=sp)
    X = skewed(rng, 400)
    y = (X[:, 0] >= 2.0).astype(np.int64)
    model = simulate(fb, X, y, rng=rng).model
    assert model.learners[0].threshold == 2.0 and model.score(X, y) == 1.0
    check_learner(ReleasePlan(fb), Stump(0, 1, 2.0, (0, 1), 0.0))
    with pytest.raises(ConfigError, match="public threshold"):
        check_learner(ReleasePlan(fb), Stump(0, 1, 8.0, (0, 1), 0.0))  # the midpoint is not this run's threshold


@pytest.mark.parametrize("sp", [((2.0, 3.0), (0.5, 0.6)), ((20.0,), (0.5,)), ((math.nan,), (0.5,)), ((1.0,),)])
def test_split_points_of_the_wrong_shape_or_outside_the_bounds_are_refused(sp):
    with pytest.raises(ConfigError):
        BoostingParams(epsilon=1.0, n_classes=2, bounds=BOUNDS, n_rounds=2, n_bins=2, split_points=sp)


def test_midpoints_join_the_quantiles_and_split_owners_leave_boosting_owners():
    np.testing.assert_array_equal(with_midpoints([[2.0], [0.9]], BOUNDS), [[2.0, 8.0], [0.5, 0.9]])
    assert split_owner_count(120, 0.1) == 12 and split_owner_count(2, 0.9) == 1 and split_owner_count(5, 0.01) == 1
