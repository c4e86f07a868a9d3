"""Unbiasedness of the issue-22 releases: an owner's LDP gradient and the split-point cell counts (slow)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners.ldp_gd import gd_mechanism, gradient_shares, logistic_gradients
from privfed.common.learners.split_points import SplitPointOracle

BOUNDS = Bounds(np.array([0.0, -5.0, 0.0]), np.array([10.0, 5.0, 1000.0]))
SPLIT_BOUNDS = Bounds(np.array([0.0, 0.0]), np.array([16.0, 1.0]))


def data(rng, n, k):
    y = rng.integers(0, k, n)
    centres = np.array([[3.0, -1.0, 300.0], [7.0, 1.0, 700.0], [5.0, 3.0, 200.0]])[:k]
    return np.clip(centres[y] + rng.normal(scale=[1.5, 1.5, 150.0], size=(n, 3)), BOUNDS.lo, BOUNDS.hi), y


def skewed(rng, n):
    return np.column_stack([np.minimum(rng.exponential(2.0, n), 16.0), rng.random(n) < 0.3])


@pytest.mark.slow
def test_an_owners_report_is_unbiased_for_its_mean_gradient(rng):
    X, y = data(rng, n=4, k=3)
    theta = rng.normal(size=(3, 4))
    mech = gd_mechanism("pm", epsilon=2.0, p=12)
    copies = 5000  # the same owner's rows 5000 times: 5000 independent reports of one owner's gradient
    reports = gradient_shares(
        theta, np.tile(X, (copies, 1, 1)), np.tile(y, (copies, 1)), bounds=BOUNDS, n_classes=3, mechanism=mech, rng=rng
    )
    truth = logistic_gradients(theta, BOUNDS.to_unit(X), y, 3).mean(axis=0)
    se = reports.std(axis=0, ddof=1) / math.sqrt(reports.shape[0])
    assert np.all(np.abs(reports.mean(axis=0) - truth) < 4.5 * se)


@pytest.mark.slow
def test_ldp_cell_frequencies_are_unbiased_before_post_processing(rng):
    oracle = SplitPointOracle(epsilon=2.0, d=2, n_grid=8)
    X = skewed(rng, 200000)
    features, reports = oracle.share(X, SPLIT_BOUNDS, rng)
    counts = oracle.frequency_oracle.estimate_counts(oracle.frequency_oracle.supports(reports[features == 0]).sum(0),
                                                     int((features == 0).sum()))  # fmt: skip
    truth = np.bincount(oracle.cells(X[features == 0], SPLIT_BOUNDS)[:, 0], minlength=8)
    sd = np.sqrt(oracle.frequency_oracle.count_variance(truth))
    assert np.all(np.abs(counts - truth) < 4.5 * sd)
