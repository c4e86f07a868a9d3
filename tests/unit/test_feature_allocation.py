"""The public feature distribution of the two-phase allocation (:mod:`privfed.common.learners.feature_allocation`):
what a coordinator's distribution may be, what the owner draws from it, and how the coordinator scales the counts.
Unbiasedness is tested statistically in ``tests/statistical/test_feature_allocation_stat.py``."""

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.feature_allocation import allocation, feature_scores, two_phase_counts
from privfed.common.learners.naive_bayes import NaiveBayesEncoding


def _data(n=600, seed=0):
    """Feature 0 follows the class, feature 1 is noise, feature 2 follows it more loosely."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = np.clip(np.stack([y + rng.normal(0, 0.4, n), rng.uniform(0, 2, n), 2 - y + rng.normal(0, 0.9, n)], 1), 0, 2)
    return X, y, Bounds.of(0.0, 2.0, 3)


@pytest.mark.parametrize(
    "probs",
    [[0.5, 0.5], [0.5, 0.5, 0.5], [math.nan, 0.5, 0.5], [math.inf, 0.0, 0.0], [-0.5, 1.0, 0.5], [0.0, 0.0, 0.0],
     [0.3, 0.3, 0.3], [[1.0, 0.0, 0.0]]],
)  # fmt: skip
def test_a_distribution_that_is_not_one_over_the_features_is_refused(probs):
    X, y, bounds = _data(20)
    enc = NaiveBayesEncoding(epsilon=3.0, bounds=bounds, n_classes=3)
    with pytest.raises(ConfigError, match="feature distribution"):
        enc.share(X, y, np.random.default_rng(0), feature_probs=probs)
    with pytest.raises(ConfigError, match="feature distribution"):
        enc.counts(np.zeros(1, dtype=np.int64), np.zeros((1, 1), dtype=np.int64), feature_probs=probs)


def test_all_mass_on_one_feature_draws_only_it_one_report_per_owner():
    """The most a coordinator's distribution does: every owner reports the same feature, still once."""
    X, y, bounds = _data(50)
    enc = NaiveBayesEncoding(epsilon=3.0, bounds=bounds, n_classes=3)
    j, reports = enc.share(X, y, np.random.default_rng(1), feature_probs=[0.0, 0.0, 1.0])
    assert j.tolist() == [2] * 50 and reports.shape[0] == 50
    counts = enc.counts(j, reports, feature_probs=[0.0, 0.0, 1.0])
    assert np.all(counts[:2] == 0.0) and counts[2].sum() == pytest.approx(50.0)


def test_zero_probability_features_are_never_drawn_and_their_reports_refused():
    X, y, bounds = _data(2000)
    enc = NaiveBayesEncoding(epsilon=math.inf, bounds=bounds, n_classes=3)
    probs = np.array([0.7, 0.0, 0.3])
    j, cells = enc.share(X, y, np.random.default_rng(2), feature_probs=probs)
    assert 1 not in j and abs(np.mean(j == 0) - 0.7) < 5 * math.sqrt(0.21 / 2000)
    with pytest.raises(ConfigError, match="of probability 0"):
        enc.counts(np.array([1]), np.array([0]), feature_probs=probs)
    with pytest.raises(ConfigError, match="scaling 'd'"):
        enc.counts(j, cells, feature_probs=probs, scaling="realised")


def test_counts_divide_each_report_by_its_features_probability():
    """Exact reports: an owner of a feature drawn with probability 1/4 counts 4 times; the uniform distribution is
    the d-scaling."""
    enc = NaiveBayesEncoding(epsilon=math.inf, bounds=Bounds.of(0.0, 1.0, 2), n_classes=2)
    j, cells = np.array([1, 0, 1]), np.array([0, 3, 5])
    counts = enc.counts(j, cells, feature_probs=[0.25, 0.75])
    np.testing.assert_allclose(counts.reshape(2, -1), [[0, 0, 0, 4, 0, 0], [4 / 3, 0, 0, 0, 0, 4 / 3]])
    np.testing.assert_array_equal(enc.counts(j, cells, feature_probs=[0.5, 0.5]), enc.counts(j, cells))


def test_scores_rank_the_informative_features_and_the_allocation_keeps_a_floor():
    X, y, bounds = _data(3000)
    enc = NaiveBayesEncoding(epsilon=math.inf, bounds=bounds, n_classes=3)
    scores = feature_scores(enc.counts(*enc.share(X, y, np.random.default_rng(3))), 3000, bounds)
    assert scores[0] > scores[2] > scores[1] >= 0.0 and scores[1] < 0.05
    p = allocation(scores, floor=0.3, power=2.0)
    assert p.sum() == pytest.approx(1.0) and np.all(p >= 0.1 - 1e-12) and p[0] > p[2] > p[1]
    np.testing.assert_allclose(allocation(np.zeros(4), floor=0.2), 0.25)
    np.testing.assert_allclose(allocation(scores, floor=1.0), 1 / 3)
    for bad in ({"floor": 0.0}, {"floor": 1.5}, {"floor": 0.5, "power": 0.0}):
        with pytest.raises(ConfigError):
            allocation(scores, **bad)
    with pytest.raises(ConfigError, match="scores"):
        allocation([0.1, math.nan], floor=0.5)


def test_two_phase_counts_concentrate_phase_two_on_the_informative_feature():
    X, y, bounds = _data(3000)
    enc = NaiveBayesEncoding(epsilon=3.0, bounds=bounds, n_classes=3)
    counts, probs = two_phase_counts(enc, X, y, np.random.default_rng(4), phase1_fraction=0.3, floor=0.3)
    assert counts.shape == (3, 3, 3) and counts.sum() == pytest.approx(3 * 3000, rel=0.2)
    assert probs[0] > 0.4 and probs[1] >= 0.1 - 1e-12
    with pytest.raises(ConfigError, match="phase1_fraction"):
        two_phase_counts(enc, X, y, np.random.default_rng(4), phase1_fraction=1.0, floor=0.3)


def test_evidence_scales_each_feature_to_the_reports_it_expects():
    """``evidence``: the same reports (same generator), each feature's counts times ``d e_j / N``."""
    X, y, bounds = _data(600)
    enc = NaiveBayesEncoding(epsilon=3.0, bounds=bounds, n_classes=3)
    kw = {"phase1_fraction": 0.5, "floor": 0.3}
    plain, probs = two_phase_counts(enc, X, y, np.random.default_rng(5), **kw)
    scaled, same = two_phase_counts(enc, X, y, np.random.default_rng(5), evidence=True, **kw)
    np.testing.assert_array_equal(probs, same)
    np.testing.assert_allclose(scaled, plain * (3 * (300 / 3 + 300 * probs) / 600)[:, None, None])
