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


def _exact(enc: NaiveBayesEncoding) -> np.ndarray:
    cells = enc.cells(X, Y)
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
    draws = np.stack([enc.counts(*enc.share(X, Y, rng)) for _ in range(R)])
    exact, var = _exact(enc), enc.count_variance(enc.cells(X, Y))
    assert np.all(var >= 0) and (np.all(var > 0) or not math.isfinite(epsilon))
    assert np.all(np.abs(draws.mean(axis=0) - exact) <= Z * np.sqrt(var / R) + 1e-12)
    # sample variance of R draws: standard error about var * sqrt(2 / R) (excess kurtosis is small here)
    se = var * math.sqrt(2.0 / R) * 2.0
    assert np.all(np.abs(draws.var(axis=0, ddof=1) - var) <= Z * se + 1e-12)


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
