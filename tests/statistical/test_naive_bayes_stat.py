"""Statistical tests of LDP naive Bayes (:mod:`privfed.common.learners.naive_bayes`): the counts are unbiased,
their variance matches the closed form, reports stay in the oracle's domain, and the e^eps ratio holds.

Eight one-row owners (two features, three bins, three classes) report R = 4000 times; tolerances are
5 standard errors (SPEC §0).
"""

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners.naive_bayes import NaiveBayesEncoding

pytestmark = pytest.mark.slow

BOUNDS = Bounds.of(0.0, 3.0, 2)
X = np.array([[0.5, 2.5], [1.5, 0.2], [2.9, 2.0], [0.1, 1.1], [1.2, 1.9], [2.2, 0.4], [0.3, 0.3], [3.0, 3.0]])
Y = np.array([0, 1, 2, 0, 1, 2, 0, 1])
R = 4000
Z = 5.0


def _exact(enc: NaiveBayesEncoding, x: np.ndarray = X) -> np.ndarray:
    cells = enc.cells(x, Y)
    out = np.zeros((enc.d, enc.domain))
    for f in range(enc.d):
        np.add.at(out[f], cells[:, f], 1.0)
    return out.reshape(enc.d, enc.n_bins, enc.n_classes)


@pytest.mark.parametrize("oracle", ["krr", "oue", "olh"])
@pytest.mark.parametrize("epsilon", [1.0, 3.0, math.inf])
def test_counts_unbiased_with_closed_form_variance(oracle, epsilon):
    enc = NaiveBayesEncoding(
        epsilon=epsilon, bounds=BOUNDS, n_classes=3, oracle=oracle if math.isfinite(epsilon) else None
    )
    rng = np.random.default_rng(7)
    draws = np.stack([enc.counts(*enc.share(X, Y, rng), scaling="d") for _ in range(R)])
    exact, var = _exact(enc), enc.count_variance(enc.cells(X, Y), scaling="d")
    assert np.all(var >= 0) and (np.all(var > 0) or not math.isfinite(epsilon))
    assert np.all(np.abs(draws.mean(axis=0) - exact) <= Z * np.sqrt(var / R) + 1e-12)
    # sample variance of R draws: standard error about var * sqrt(2 / R) (excess kurtosis is small here)
    se = var * math.sqrt(2.0 / R) * 2.0
    assert np.all(np.abs(draws.var(axis=0, ddof=1) - var) <= Z * se + 1e-12)


@pytest.mark.parametrize(("oracle", "epsilon"), [("krr", 1.0), ("oue", 3.0), ("olh", 1.0), (None, math.inf)])
def test_realised_scaling_unbiased_given_the_owners_per_feature_with_closed_form_variance(oracle, epsilon):
    """``scaling="realised"`` given ``n_j``: iid uniform feature draws, given how many owners drew each feature,
    are a uniformly random arrangement of them; so a fixed arrangement (3 owners on feature 0, 5 on feature 1) is
    permuted and each owner reports its cell of its feature through the oracle, as :meth:`share` does."""
    enc = NaiveBayesEncoding(epsilon=epsilon, bounds=BOUNDS, n_classes=3, oracle=oracle)
    rng = np.random.default_rng(3)
    cells, arrangement = enc.cells(X, Y), np.array([0, 0, 0, 1, 1, 1, 1, 1])
    draws = []
    for _ in range(R):
        j = rng.permutation(arrangement)
        value = cells[np.arange(X.shape[0]), j]
        reports = enc.frequency_oracle.privatize(value, rng) if math.isfinite(epsilon) else value
        draws.append(enc.counts(j, reports, scaling="realised"))
    est = np.stack(draws)
    var = enc.count_variance(cells, scaling="realised", drawn=np.bincount(arrangement))
    assert np.all(np.abs(est.mean(axis=0) - _exact(enc)) <= Z * np.sqrt(var / R) + 1e-12)
    se = var * math.sqrt(2.0 / R) * 2.0
    assert np.all(np.abs(est.var(axis=0, ddof=1) - var) <= Z * se + 1e-12)


def test_realised_and_d_scaling_agree_in_expectation_on_the_same_reports():
    """Over :meth:`share`'s own draws, both scalings of the same reports: the d-scaling's mean is the truth ``h``,
    the realised one's ``h (1 - P[n_j = 0])`` (a feature nobody drew counts 0), and the realised one's variance is
    the mean of its variance given ``n_j`` plus ``h^2 P0 (1 - P0)`` (the law of total variance). Three features
    and eight owners make ``P0 = (2/3)^8 = 0.039`` visible."""
    bounds = Bounds.of(0.0, 3.0, 3)
    x3 = np.column_stack([X, X[::-1, 0]])
    enc = NaiveBayesEncoding(epsilon=2.0, bounds=bounds, n_classes=3, oracle="krr")
    rng = np.random.default_rng(5)
    d_draws, r_draws, cond_var = [], [], []
    cells = enc.cells(x3, Y)
    for _ in range(R):
        j, reports = enc.share(x3, Y, rng)
        d_draws.append(enc.counts(j, reports, scaling="d"))
        r_draws.append(enc.counts(j, reports, scaling="realised"))
        cond_var.append(enc.count_variance(cells, scaling="realised", drawn=np.bincount(j, minlength=3)))
    dd, rr = np.stack(d_draws), np.stack(r_draws)
    truth = _exact(enc, x3)
    p0 = (1 - 1 / enc.d) ** x3.shape[0]
    var_d = enc.count_variance(cells, scaling="d")
    var_r = np.mean(cond_var, axis=0) + truth**2 * p0 * (1 - p0)
    assert np.all(np.abs(dd.mean(axis=0) - truth) <= Z * np.sqrt(var_d / R))
    assert np.all(np.abs(rr.mean(axis=0) - truth * (1 - p0)) <= Z * np.sqrt(var_r / R))
    diff = rr - dd  # paired on the same reports: a tighter check of the difference -h P0
    assert np.all(np.abs(diff.mean(axis=0) + truth * p0) <= Z * diff.std(axis=0, ddof=1) / math.sqrt(R))
    assert np.all(np.abs(rr.var(axis=0, ddof=1) - var_r) <= Z * var_r * math.sqrt(2.0 / R) * 2.0)


@pytest.mark.parametrize("oracle", ["krr", "oue", "olh"])
def test_reports_in_range_and_density_ratio(oracle):
    eps = 1.5
    enc = NaiveBayesEncoding(epsilon=eps, bounds=BOUNDS, n_classes=3, oracle=oracle)
    rng = np.random.default_rng(11)
    n = 60_000
    # two neighbouring one-row data sets, every cell different: the (feature, support-of-cell) outcomes
    a, b = np.repeat(X[:1], n, axis=0), np.repeat(X[2:3], n, axis=0)
    outcome = []
    for rows, labels in ((a, np.zeros(n, dtype=int)), (b, np.full(n, 2))):
        j, reports = enc.share(rows, labels, rng)
        assert j.min() >= 0 and j.max() < enc.d
        support = enc.frequency_oracle.supports(reports)
        assert support.shape == (n, enc.domain) and set(np.unique(support)) <= {0, 1}
        cell = enc.cells(rows, labels)[0]
        # the outcome "feature f was sampled and the report supports the first row's cell of f"
        first = enc.cells(a[:1], np.zeros(1, dtype=int))[0]
        outcome.append([np.mean((j == f) & (support[:, first[f]] == 1)) for f in range(enc.d)])
        assert cell.shape == (enc.d,)
    pa, pb = np.array(outcome[0]), np.array(outcome[1])
    se = np.sqrt(pa * (1 - pa) / n) + np.sqrt(pb * (1 - pb) / n)
    ratio = max(np.max(pa / pb), np.max(pb / pa))
    assert ratio <= math.exp(eps) * (1 + Z * float(np.max(se / np.minimum(pa, pb))))
    assert ratio >= math.exp(eps) * 0.8 if oracle == "krr" else ratio > 1.5  # the ratio is really there
