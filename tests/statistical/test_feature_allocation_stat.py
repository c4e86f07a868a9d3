"""Statistical tests of the two-phase allocation (:mod:`privfed.common.learners.feature_allocation`): under a public
non-uniform feature distribution the Horvitz-Thompson counts are unbiased with the closed-form variance, the
d-scaling of the same reports is not; the two-phase counts, whose phase-2 distribution is a function of phase 1's
reports, are unbiased for the histogram of all owners. Tolerances are 5 standard errors (SPEC §0)."""

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.learners.feature_allocation import two_phase_counts
from privfed.common.learners.naive_bayes import NaiveBayesEncoding

pytestmark = pytest.mark.slow

BOUNDS = Bounds.of(0.0, 3.0, 3)
X = np.array([[0.5, 2.5, 0.1], [1.5, 0.2, 2.9], [2.9, 2.0, 1.0], [0.1, 1.1, 0.4], [1.2, 1.9, 2.2], [2.2, 0.4, 0.3],
              [0.3, 0.3, 1.7], [3.0, 3.0, 2.8], [0.4, 2.6, 0.2], [2.5, 0.1, 1.4]])  # fmt: skip
Y = np.array([0, 1, 2, 0, 1, 2, 0, 1, 0, 2])
R = 4000
Z = 5.0


def _exact(enc: NaiveBayesEncoding) -> np.ndarray:
    cells = enc.cells(X, Y)
    out = np.zeros((enc.d, enc.domain))
    for f in range(enc.d):
        np.add.at(out[f], cells[:, f], 1.0)
    return out.reshape(enc.d, enc.n_bins, enc.n_classes)


@pytest.mark.parametrize("epsilon", [1.0, 3.0, math.inf])
def test_counts_under_a_public_distribution_are_unbiased_with_closed_form_variance(epsilon):
    """Owner i contributes ``z_i 1[j_i = f] / pi_f``: variance ``sum_i (s_i + a_i) / pi_f - a_i`` per cell
    (:meth:`NaiveBayesEncoding.count_variance`'s d-scaling with d replaced by 1 / pi_f). The d-scaling of the same
    reports is off by the factor d pi_f, which the same tolerance sees."""
    enc = NaiveBayesEncoding(epsilon=epsilon, bounds=BOUNDS, n_classes=3)
    probs = np.array([0.6, 0.3, 0.1])
    rng = np.random.default_rng(11)
    ht, by_d = [], []
    for _ in range(R):
        j, reports = enc.share(X, Y, rng, feature_probs=probs)
        ht.append(enc.counts(j, reports, feature_probs=probs))
        by_d.append(enc.counts(j, reports))
    exact = _exact(enc)
    var = (enc.count_variance(enc.cells(X, Y)) + exact) / enc.d  # sum_i (s_i + a_i)
    var = var / probs[:, None, None] - exact
    tol = Z * np.sqrt(var / R) + 1e-12
    assert np.all(np.abs(np.mean(ht, axis=0) - exact) <= tol)
    se = var * math.sqrt(2.0 / R) * 2.0
    assert np.all(np.abs(np.var(ht, axis=0, ddof=1) - var) <= Z * se + 1e-12)
    assert np.any(np.abs(np.mean(by_d, axis=0) - exact) > tol)


@pytest.mark.parametrize("epsilon", [3.0, math.inf])
def test_two_phase_counts_are_unbiased_for_all_owners(epsilon):
    """Phase 2's distribution depends on phase 1's reports (and which owners are in phase 1), yet each phase's
    counts are unbiased for its own owners given everything before it, so their sum is for all ten owners."""
    enc = NaiveBayesEncoding(epsilon=epsilon, bounds=BOUNDS, n_classes=3)
    rng = np.random.default_rng(12)
    draws = np.stack([two_phase_counts(enc, X, Y, rng, phase1_fraction=0.4, floor=0.2, power=2.0)[0] for _ in range(R)])
    sd = draws.std(axis=0, ddof=1)
    assert np.all(np.abs(draws.mean(axis=0) - _exact(enc)) <= Z * sd / math.sqrt(R) + 1e-12)
