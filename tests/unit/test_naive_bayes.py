"""LDP naive Bayes (:mod:`privfed.common.learners.naive_bayes`): the fit on exact counts is scikit-learn's
categorical naive Bayes, a learner on separable data classifies it, bad inputs are refused in one line."""

import math

import numpy as np
import pytest
from sklearn.naive_bayes import CategoricalNB

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.naive_bayes import (
    NaiveBayesEncoding,
    fit_naive_bayes,
    ldp_naive_bayes,
    smoothed_marginals,
)
from privfed.common.learners.split_points import grid_cells, least_variance_oracle


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = np.clip(np.stack([y + rng.normal(0, 0.4, n), rng.uniform(0, 2, n), 2 - y + rng.normal(0, 0.6, n)], 1), 0, 2)
    return X, y, Bounds.of(0.0, 2.0, 3)


def test_fit_on_exact_counts_is_categorical_naive_bayes():
    X, y, bounds = _data()
    cells = grid_cells(X, bounds, 3)
    counts = np.zeros((3, 3, 3))
    for f in range(3):
        np.add.at(counts[f], (cells[:, f], y), 1.0)
    model = fit_naive_bayes(counts, X.shape[0], bounds, smoothing=1.0)
    ref = CategoricalNB(alpha=X.shape[0] / 27, min_categories=3).fit(cells, y)
    for f in range(3):
        np.testing.assert_allclose(model.log_tables[f].T, ref.feature_log_prob_[f], rtol=1e-12)
    np.testing.assert_allclose(
        np.exp(model.log_prior), (np.bincount(y) + X.shape[0] / 27) / (X.shape[0] + 3 * X.shape[0] / 27)
    )


def test_pseudo_counts_towards_the_pooled_bins_add_less_spurious_class_signal():
    """``shrink_to="marginal"``: on a feature whose class columns are proportional (no class signal), the columns
    stay closer than with even pseudo-counts, which flatten the smaller class's column more (a spurious
    signal); every cell stays > 0 (logs are taken), an empty bin included; the target's name is checked."""
    bounds = Bounds.of(0.0, 1.0, 1)
    counts = np.array([[[60.0, 6.0], [30.0, 3.0], [0.0, 0.0]]])  # (d=1, B=3, K=2): class 1 a tenth of class 0
    for smoothing in (1.0, 8.0):
        tables, prior = smoothed_marginals(counts, 99, bounds, smoothing=smoothing, shrink_to="marginal")
        assert np.all(tables > 0) and np.allclose(tables.sum(axis=1), 1.0) and np.isclose(prior.sum(), 1.0)
        even, _ = smoothed_marginals(counts, 99, bounds, smoothing=smoothing)
        spurious = np.abs(tables[0, :, 0] - tables[0, :, 1]).max()
        assert spurious < np.abs(even[0, :, 0] - even[0, :, 1]).max() - 0.005
    with pytest.raises(ConfigError, match="shrink_to"):
        smoothed_marginals(counts, 99, bounds, shrink_to="prior")


def test_learns_separable_data_and_sampling_alone_at_infinite_epsilon():
    X, y, bounds = _data(3000)
    rng = np.random.default_rng(1)
    for eps in (math.inf, 4.0):
        model = ldp_naive_bayes(X, y, bounds=bounds, n_classes=3, epsilon=eps, rng=rng)
        assert np.mean(model.predict(X) == y) > 0.8
    assert model.to_dict()["kind"] == "nb"


def test_owner_of_row_reports_once_per_owner():
    X, y, bounds = _data(10)
    enc = NaiveBayesEncoding(epsilon=2.0, bounds=bounds, n_classes=3)
    j, reports = enc.share(X, y, np.random.default_rng(0), owner_of_row=np.arange(10) // 2)
    assert j.shape == (5,) and reports.shape[0] == 5
    assert enc.oracle == least_variance_oracle(2.0, 9)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(epsilon=-1.0), "epsilon"),
        (dict(epsilon=math.nan), "epsilon"),
        (dict(epsilon=1.0, n_bins=1), "n_bins"),
        (dict(epsilon=1.0, oracle="nope"), "oracle"),
    ],
)
def test_bad_configuration(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        NaiveBayesEncoding(bounds=Bounds.of(0.0, 1.0, 2), n_classes=2, **kwargs)


def test_bad_reports_and_counts():
    bounds = Bounds.of(0.0, 1.0, 2)
    enc = NaiveBayesEncoding(epsilon=1.0, bounds=bounds, n_classes=2)
    with pytest.raises(ConfigError, match="sampled features"):
        enc.counts(np.array([2]), np.array([[0]]))
    with pytest.raises(ConfigError, match="class indices"):
        enc.share(np.zeros((1, 2)), np.array([2]), np.random.default_rng(0))
    with pytest.raises(ConfigError, match="counts must be"):
        fit_naive_bayes(np.zeros((3, 3, 2)), 10, bounds)
    exact = NaiveBayesEncoding(epsilon=math.inf, bounds=bounds, n_classes=2)
    with pytest.raises(ConfigError, match="exact reports"):
        exact.counts(np.array([0]), np.array([9]))
    with pytest.raises(ConfigError, match="scaling must be one of"):
        exact.counts(np.array([0]), np.array([1]), scaling="n")
    with pytest.raises(ConfigError, match="pass drawn"):
        exact.count_variance(np.zeros((3, 2), dtype=int), scaling="realised")
    with pytest.raises(ConfigError, match="drawn must be"):
        exact.count_variance(np.zeros((3, 2), dtype=int), scaling="realised", drawn=[1, 1])


def test_realised_scaling_counts_each_feature_to_all_owners():
    """Exact reports: feature 0 drawn by 1 of 4 owners counts that owner 4 times, feature 1 drawn by 3 counts each
    4/3 times (the d-scaling: 2 times each); each feature's realised counts sum to the 4 owners."""
    enc = NaiveBayesEncoding(epsilon=math.inf, bounds=Bounds.of(0.0, 1.0, 2), n_classes=2)
    j, cells = np.array([1, 0, 1, 1]), np.array([0, 3, 0, 5])
    realised, by_d = enc.counts(j, cells, scaling="realised"), enc.counts(j, cells)
    assert realised.reshape(2, -1)[0].tolist() == [0, 0, 0, 4, 0, 0]
    np.testing.assert_allclose(realised.reshape(2, -1)[1], [8 / 3, 0, 0, 0, 0, 4 / 3])
    np.testing.assert_allclose(by_d.reshape(2, -1), [[0, 0, 0, 2, 0, 0], [4, 0, 0, 0, 0, 2]])
    np.testing.assert_allclose(realised.sum(axis=(1, 2)), [4, 4])


def test_d_scaling_tables_are_the_realised_ones_with_count_dependent_pseudo_counts():
    """What the two scalings' fits differ by (:meth:`NaiveBayesEncoding.counts`): the d-scaling's smoothed tables
    equal the realised scaling's counts clipped, plus ``N / (d n_j)`` times the pseudo-counts, normalised."""
    X, y, bounds = _data(90, seed=4)
    enc = NaiveBayesEncoding(epsilon=2.0, bounds=bounds, n_classes=3)
    j, reports = enc.share(X, y, np.random.default_rng(9))
    n_j, n = np.bincount(j, minlength=enc.d), j.size
    tables, _ = smoothed_marginals(enc.counts(j, reports, scaling="d"), n, bounds, smoothing=2.0)
    pseudo = 2.0 * n / (enc.d * enc.n_bins * enc.n_classes) * (n / (enc.d * n_j))[:, None, None]
    cells = np.maximum(enc.counts(j, reports, scaling="realised"), 0.0) + pseudo
    np.testing.assert_allclose(tables, cells / cells.sum(axis=1, keepdims=True), rtol=1e-12)
    assert not np.allclose(tables, smoothed_marginals(cells - pseudo, n, bounds, smoothing=2.0)[0])
