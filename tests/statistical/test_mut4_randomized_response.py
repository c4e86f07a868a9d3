"""Mutation round 4 (common/mechanisms/randomized_response.py, arithmetic): k-RR's count variance.

``KaryRandomizedResponse.count_variance`` was only checked for its shape: every arithmetic mutant of its closed form
``(N_k p (1 - p) + (N - N_k) q (1 - q)) / (p - q)^2`` but one passed (``p / (1 - p)``, ``total + n_k``,
``(p - q) * 2`` ...). It is the accuracy the naive Bayes and NCC learners quote for their debiased counts. Now it is
checked against the closed form written out from ``p = e^eps / (e^eps + K - 1)``, and against the sample
variance of :meth:`debias_counts` over repeated releases of one data set (6 standard errors of a variance).
"""

import math

import numpy as np
import pytest

from privfed.common.mechanisms import ErrorPairResponse, KaryRandomizedResponse


@pytest.mark.parametrize("eps, k", [(0.5, 2), (1.0, 4), (3.0, 7)])
def test_count_variance_is_the_closed_form(eps, k):
    rr = KaryRandomizedResponse(epsilon=eps, n_classes=k)
    p = math.exp(eps) / (math.exp(eps) + k - 1)
    q = 1 / (math.exp(eps) + k - 1)
    true = np.array([[float(10 * (j + 1)) for j in range(k)], [0.0] * (k - 1) + [37.0]])
    total = true.sum(axis=1, keepdims=True)
    expected = (true * p * (1 - p) + (total - true) * q * (1 - q)) / (p - q) ** 2
    np.testing.assert_allclose(rr.count_variance(true), expected, rtol=1e-12)


def test_count_variance_is_the_variance_of_the_debiased_counts():
    k, reps = 4, 20_000
    rr = KaryRandomizedResponse(epsilon=1.0, n_classes=k)
    labels = np.repeat(np.arange(k), [60, 25, 10, 5])  # N = 100, N_k unequal
    rng = np.random.Generator(np.random.PCG64(20261129))
    reports = rr.privatize(np.tile(labels, (reps, 1)), rng)  # (reps, N): one release of the data set per row
    counts = np.stack([(reports == j).sum(axis=1) for j in range(k)], axis=1).astype(np.float64)
    estimates = rr.debias_counts(counts)
    true = np.array([60.0, 25.0, 10.0, 5.0])
    var = rr.count_variance(true)
    sq = (estimates - true) ** 2  # the mean is known (unbiased), so this is the variance's estimator
    se = sq.std(axis=0) / math.sqrt(reps)
    assert np.all(6 * se < 0.1 * var)  # power: a mutant off by more than 10 % fails
    assert np.all(np.abs(sq.mean(axis=0) - var) <= 6 * se), (sq.mean(axis=0), var, se)


@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])
def test_error_pair_response_public_numbers_are_their_closed_forms_and_tight(eps):
    """``bound`` (the range ``M`` that sizes the boosting secure sum), ``max_std`` and ``noise_scale`` (the Laplace
    scale of the same worst-case variance, which floors the coordinator's error total) had no test of their
    values: ``bound`` with ``(1 + q)`` or ``/ (1 - q)`` (a looser range) and ``noise_scale = max_std * sqrt 2`` (a
    floor twice too high) passed. Now each is its closed form, and ``bound`` is reached by a release."""
    mech = ErrorPairResponse(epsilon=eps, row_bound=0.5, max_rows=3)
    big_b = 1.5
    p = math.exp(eps) / (math.exp(eps) + 2)
    q = 1 / (math.exp(eps) + 2)
    assert mech.bound == pytest.approx(big_b * (1 - q) / (p - q) * (1 + 1e-9), rel=1e-12)
    assert mech.max_std == pytest.approx(big_b / (2 * (p - q)), rel=1e-12)
    assert 2 * mech.noise_scale**2 == pytest.approx(mech.max_std**2, rel=1e-12)  # Laplace variance 2 b^2
    worst = big_b * (0.5 - q) / (p - q)  # P_1 = 1/2: the largest variance B^2 / (4 (p - q)^2), if e <= B reaches it
    if worst <= big_b:
        assert mech.variance([(worst, big_b)])[0, 0] == pytest.approx(mech.max_std**2, rel=1e-9)
    rng = np.random.Generator(np.random.PCG64(20261129))
    out = mech.privatize(np.tile([(big_b, big_b)], (200, 1)), rng)  # reports miss with probability p
    lo, hi = mech.output_bounds
    assert np.all((out >= lo) & (out <= hi))
    assert out.max() >= mech.bound / (1 + 1e-9) * (1 - 1e-12)  # the range is tight, not only sufficient
