"""Statistical tests of the float-safe Gaussian and count releases (SPEC §7, §8, §12; issue 20 item 3).

Tolerances at 5 standard errors computed from the closed forms, as in test_mechanisms_stat.py.
"""

import math

import numpy as np
import pytest
from scipy.special import ndtr

from privfed.common.mechanisms import EPSILON_CEILING, EPSILON_FLOOR, GaussianMechanism, GeometricMechanism
from privfed.common.mechanisms.gaussian import gamma_integer_shape, standard_normal

pytestmark = pytest.mark.slow

M = 1_000_000
Z = 5.0


def test_standard_normal_moments_and_tails(rng):
    z = standard_normal(rng, (M,))
    assert abs(z.mean()) <= Z / math.sqrt(M)
    assert abs(z.var() - 1.0) <= Z * math.sqrt(2.0 / M)
    assert abs(np.mean(z**4) - 3.0) <= Z * math.sqrt(96.0 / M)  # Var z^4 = 105 - 9
    for x in (1.0, 2.5, 4.0):
        p = 2 * ndtr(-x)
        assert abs(np.mean(np.abs(z) > x) - p) <= Z * math.sqrt(p * (1 - p) / M)
    pairs = standard_normal(rng, (M // 2, 2))  # the cos and sin halves are independent
    assert abs(np.corrcoef(pairs[:, 0], pairs[:, 1])[0, 1]) <= Z / math.sqrt(M // 2)
    assert abs(np.corrcoef(pairs[:, 0] ** 2, pairs[:, 1] ** 2)[0, 1]) <= Z / math.sqrt(M // 2)


@pytest.mark.parametrize("shape", [1, 3, 20])
def test_gamma_radius_has_its_moments(shape, rng):
    draws = gamma_integer_shape(rng, shape, 2.5, (200_000,))
    n = draws.size
    assert abs(draws.mean() - 2.5 * shape) <= Z * 2.5 * math.sqrt(shape / n)
    var_hat = draws.var()
    assert abs(var_hat - 6.25 * shape) <= Z * 6.25 * shape * math.sqrt((2 + 6 / shape) / n)


@pytest.mark.parametrize("x", [0.0, 0.3, -12.7, 2.0**25 + 0.3])
@pytest.mark.parametrize("eps, delta, sigma", [(1.0, 1e-5, 3.73), (EPSILON_CEILING, 1e-3, 0.19), (0.1, 1e-5, 30.7)])
def test_gaussian_release_is_unbiased_with_variance_sigma_squared(x, eps, delta, sigma, rng):
    mech = GaussianMechanism(epsilon=eps, delta=delta, sigma=sigma)
    out = mech.privatize(np.full(M, x), rng)
    grid = mech.output_grid.grid
    lo, hi = mech.output_bounds
    assert np.all(out / grid == np.rint(out / grid)) and np.all((out >= lo) & (out <= hi))
    err = out - x
    assert mech.bias(x) == 0.0 and mech.variance(x) == sigma**2
    assert abs(err.mean()) <= Z * sigma / math.sqrt(M) + grid**2 / sigma
    assert abs(np.mean(err**2) - mech.variance(x)) <= Z * sigma**2 * math.sqrt(2 / M) + 2 * grid * sigma + grid**2


def test_gaussian_release_of_neighbours_has_the_expected_privacy_loss_tail(rng):
    """Neighbours x and x + 1 at (eps, delta) = (1, 1e-5): the fraction of outputs whose privacy loss
    ln(p(o | x) / p(o | x + 1)) exceeds eps matches the ideal Gaussian's (the snapped release keeps it)."""
    sigma = 3.73
    mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sigma=sigma)
    out = mech.privatize(np.zeros(M), rng)
    loss = (1.0 - 2 * out) / (2 * sigma**2)  # ln N(o; 0) - ln N(o; 1)
    tail = np.mean(loss > 0.5)
    ideal = ndtr(-(0.5 * sigma**2 - 0.5) / sigma)  # P[(1 - 2 Z sigma) / (2 sigma^2) > 1/2]
    assert abs(tail - ideal) <= Z * math.sqrt(ideal * (1 - ideal) / M) + 1e-4


@pytest.mark.parametrize("eps", [EPSILON_FLOOR * 10, 0.3, 2.0])
def test_exact_discrete_laplace_has_its_law(eps, rng):
    mech = GeometricMechanism(epsilon=eps)
    out = mech.privatize(np.full(M, 7, dtype=np.int64), rng) - 7
    assert abs(out.mean()) <= Z * math.sqrt(mech.variance() / M)
    assert abs(out.var() / mech.variance() - 1) <= Z * math.sqrt(5.0 / M) + 1e-3
    a = mech.alpha
    for z in (0, 1, -2):
        p = (1 - a) / (1 + a) * a ** abs(z)
        assert abs(np.mean(out == z) - p) <= Z * math.sqrt(p * (1 - p) / M) + 1e-9


def test_exact_discrete_laplace_ratio_of_neighbouring_counts(rng):
    eps = 1.0
    mech = GeometricMechanism(epsilon=eps)
    a = mech.privatize(np.full(M, 40, dtype=np.int64), rng)
    b = mech.privatize(np.full(M, 41, dtype=np.int64), rng)
    for value in (38, 40, 41, 43):
        k1, k2 = np.count_nonzero(a == value), np.count_nonzero(b == value)
        expected = eps if value <= 40 else -eps
        assert abs(math.log(k1 / k2) - expected) <= Z * math.sqrt(1 / k1 + 1 / k2)
