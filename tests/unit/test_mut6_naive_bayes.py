"""LDP naive Bayes (common/learners/naive_bayes.py L1-135, L300-368): behaviours the mutation round 6 found untested.

- :class:`NaiveBayesEncoding` accepts the whole public ε range (a check of ``2ε`` refused every ε above 15) and the
  smallest documented sizes (``n_bins = 2``), and refuses one class (``n_classes >= 2``).
- The default frequency oracle is the one with the least count variance at the encoding's own ε (a choice made at
  2ε passed: at ε = 0.2 and B K = 6 it picked k-RR, whose count variance there is the larger); at ε = ∞ there is
  none (the exact cell is reported), and asking for one is refused.
- :func:`smoothed_marginals` accepts counts of two bins and two classes and one report, and refuses one bin, one
  class (each alone) and no reports: mutants of its shape check refused two bins or accepted one bin / one class,
  ``n_reports >= 2`` passed. Its class prior is each class's total averaged over the features (summing over the
  features and averaging over the bins passed at d = B) and clipped at 0 before the pseudo-count (unclipped or
  clipped at 1 passed).
- ``shrink_to="marginal"``: a feature's pseudo-counts follow *its own* pooled bins (the m-estimate of the docstring);
  normalising the pooled counts over the features instead of the bins passed, every test having d = 1.
"""

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.naive_bayes import NaiveBayesEncoding, smoothed_marginals
from privfed.common.mechanisms.frequency import ORACLES, make_oracle
from privfed.common.mechanisms.snapping import EPSILON_CEILING, EPSILON_FLOOR

BOUNDS = Bounds.of(0.0, 3.0, 2)


def test_the_whole_public_epsilon_range_and_two_bins_are_accepted_one_class_is_not():
    for epsilon in (EPSILON_FLOOR, 15.5, EPSILON_CEILING):
        enc = NaiveBayesEncoding(epsilon=epsilon, bounds=BOUNDS, n_classes=2)
        assert enc.frequency_oracle.epsilon == epsilon
    with pytest.raises(ConfigError):
        NaiveBayesEncoding(epsilon=EPSILON_CEILING * 1.01, bounds=BOUNDS, n_classes=2)
    enc = NaiveBayesEncoding(epsilon=1.0, bounds=BOUNDS, n_classes=2, n_bins=2)
    assert enc.domain == 4
    X, y = np.array([[0.5, 2.5], [1.6, 0.2]]), np.array([0, 1])
    np.testing.assert_array_equal(enc.cells(X, y), [[0, 2], [3, 1]])  # bin * K + class, bins [0, 1.5) and [1.5, 3]
    with pytest.raises(ConfigError, match="n_classes"):
        NaiveBayesEncoding(epsilon=1.0, bounds=BOUNDS, n_classes=1)


def _leading_variance(name, epsilon, domain):
    oracle = make_oracle(name, epsilon=epsilon, domain=domain)
    return oracle.q * (1 - oracle.q) / (oracle.p - oracle.q) ** 2


@pytest.mark.parametrize("epsilon", [0.1, 0.2, 0.5, 1.0, 2.0, 4.0])
@pytest.mark.parametrize("n_bins, n_classes", [(3, 2), (2, 2), (5, 4), (10, 3)])
def test_the_default_oracle_has_the_least_count_variance_at_the_reports_epsilon(epsilon, n_bins, n_classes):
    enc = NaiveBayesEncoding(epsilon=epsilon, bounds=BOUNDS, n_classes=n_classes, n_bins=n_bins)
    chosen = enc.frequency_oracle
    assert chosen.epsilon == epsilon and chosen.domain == n_bins * n_classes
    best = min(_leading_variance(name, epsilon, enc.domain) for name in ORACLES)
    assert _leading_variance(enc.oracle, epsilon, enc.domain) <= best * (1 + 1e-12)


def test_at_infinite_epsilon_there_is_no_frequency_oracle():
    enc = NaiveBayesEncoding(epsilon=np.inf, bounds=BOUNDS, n_classes=2)
    with pytest.raises(ConfigError, match="exact cell: no frequency oracle"):
        enc.frequency_oracle  # noqa: B018 - the property is the behaviour under test


def test_smoothed_marginals_accept_the_smallest_tables_and_refuse_smaller_ones():
    bounds = Bounds.of(0.0, 1.0, 3)
    counts = np.array([[[3.0, 1.0], [0.0, 2.0]], [[1.0, 1.0], [2.0, 2.0]], [[4.0, 0.0], [2.0, 0.0]]])  # (3, 2, 2)
    for n_reports in (1, 6):
        tables, prior = smoothed_marginals(counts, n_reports, bounds)
        pseudo = n_reports / 12  # smoothing 1 x N / (d B K)
        want = (counts + pseudo) / (counts + pseudo).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(tables, want, rtol=1e-12)
        # the prior: each class's total count averaged over the features, (3 + 3 + 6) / 3 and (3 + 3 + 0) / 3
        np.testing.assert_allclose(prior, np.array([4.0 + pseudo, 2.0 + pseudo]) / (6.0 + 2 * pseudo), rtol=1e-12)
    for shape in [(3, 1, 2), (3, 2, 1), (3, 1, 1), (3, 2)]:
        with pytest.raises(ConfigError, match="counts must be"):
            smoothed_marginals(np.ones(shape), 6, bounds)
    with pytest.raises(ConfigError, match="n_reports"):
        smoothed_marginals(counts, 0, bounds)


@pytest.mark.parametrize("class_total, want", [(-1.5, 0.0), (0.0, 0.0), (0.25, 0.25), (2.0, 2.0)])
def test_a_class_whose_noisy_total_is_negative_gets_the_pseudo_count_alone(class_total, want):
    """The prior's class count is clipped at 0 (post-processing of noisy counts), then smoothed: never negative."""
    bounds = Bounds.of(0.0, 1.0, 2)
    counts = np.zeros((2, 2, 2))
    counts[:, 0, 0] = 5.0
    counts[:, 1, 1] = class_total  # class 1's total is class_total on both features
    _, prior = smoothed_marginals(counts, 8, bounds)
    pseudo = 8 / 8
    np.testing.assert_allclose(prior, np.array([5.0 + pseudo, want + pseudo]) / (5.0 + want + 2 * pseudo), rtol=1e-12)


def test_marginal_shrinkage_of_a_feature_follows_its_own_pooled_bins():
    """Each class column gets the pseudo-mass ``B * pseudo`` spread over the bins as the feature's clipped, evenly
    smoothed counts pooled over the classes; a feature's tables depend on its own counts alone, and a feature
    without counts gets uniform tables."""
    bounds = Bounds.of(0.0, 1.0, 3)
    n_reports, (B, K) = 90, (3, 2)
    pseudo = n_reports / (3 * B * K)
    f0 = np.array([[20.0, 2.0], [5.0, -3.0], [0.0, 1.0]])  # a negative (noisy) count is clipped to 0
    counts = np.stack([f0, np.zeros((B, K)), np.array([[1.0, 9.0], [30.0, 4.0], [2.0, 2.0]])])
    tables, _ = smoothed_marginals(counts, n_reports, bounds, shrink_to="marginal")
    clipped = np.maximum(f0, 0.0)
    pooled = clipped.sum(axis=1) + K * pseudo
    column = clipped + B * pseudo * (pooled / pooled.sum())[:, None]
    np.testing.assert_allclose(tables[0], column / column.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(tables[1], 1.0 / B, rtol=1e-12)
    other = counts.copy()
    other[2] *= 7.0  # another feature's counts change: feature 0's and 1's tables do not
    again, _ = smoothed_marginals(other, n_reports, bounds, shrink_to="marginal")
    np.testing.assert_allclose(again[:2], tables[:2], rtol=1e-12)
