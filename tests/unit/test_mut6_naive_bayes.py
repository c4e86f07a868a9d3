"""LDP naive Bayes (common/learners/naive_bayes.py L1-135, L300-368): behaviours the mutation round 6 found untested.

- :class:`NaiveBayesEncoding` accepts the whole public ε range (a check of ``2ε`` refused every ε above 15) and the
  smallest documented sizes (``n_bins = 2``), and refuses one class (``n_classes >= 2``).
- The default frequency oracle is the one with the least count variance at the encoding's own ε (a choice made at
  2ε passed: at ε = 0.2 and B K = 6 it picked k-RR, whose count variance there is the larger); at ε = ∞ there is
  none (the exact cell is reported), and asking for one is refused.
"""

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.naive_bayes import NaiveBayesEncoding
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
