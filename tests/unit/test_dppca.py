"""Analyze-Gauss DP-PCA (SPEC §7; seed 004 Alg. 2)."""

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.pca import (
    dp_pca,
    noisy_covariance,
    owner_pca_release,
    scale_rows_to_unit_ball,
    top_k_eigenvectors,
)
from privfed.common.mechanisms.gaussian import analytic_gaussian_delta, gaussian_sigma, symmetric_gaussian_noise
from privfed.common.mechanisms.snapping import grid_for

# --- sigma calibration ---------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon, sigma", [(0.5, 9.689611), (0.1, 48.448053)])
def test_classic_sigma_matches_spec_table(epsilon, sigma):
    assert gaussian_sigma(epsilon, 1e-5, method="classic") == pytest.approx(sigma, abs=1e-6)


def test_classic_sigma_refuses_epsilon_one_and_the_table_value_is_still_valid():
    with pytest.raises(ConfigError, match="analytic"):
        gaussian_sigma(1.0, 1e-5, method="classic")
    spec_value = math.sqrt(2 * math.log(1.25 / 1e-5))
    assert spec_value == pytest.approx(4.844805, abs=1e-6)
    # the SPEC row (eps=1) meets the exact condition, but loosely: analytic is smaller
    assert analytic_gaussian_delta(spec_value, 1.0) <= 1e-5
    assert gaussian_sigma(1.0, 1e-5) < spec_value


# Reference values computed independently with Balle & Wang's Algorithm 1 (the B+/B- bisection).
@pytest.mark.parametrize(
    "epsilon, delta, sigma",
    [
        (0.01, 1e-5, 243.785438),
        (0.1, 1e-5, 30.749566),
        (0.5, 1e-5, 7.031827),
        (1.0, 1e-5, 3.730632),
        (2.0, 1e-5, 1.993812),
        (0.1, 1e-4, 24.508106),
    ],
)
def test_analytic_sigma_values(epsilon, delta, sigma):
    assert gaussian_sigma(epsilon, delta) == pytest.approx(sigma, abs=1e-6)


@pytest.mark.parametrize("epsilon", [0.05, 0.7, 1.0, 3.0, 10.0])
def test_analytic_sigma_is_tight_and_on_the_safe_side(epsilon):
    sigma = gaussian_sigma(epsilon, 1e-5)
    assert analytic_gaussian_delta(sigma, epsilon) <= 1e-5
    assert analytic_gaussian_delta(sigma * (1 - 1e-9), epsilon) > 1e-5 * (1 - 1e-6)


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 0.99])
def test_analytic_never_worse_than_classic(epsilon):
    assert gaussian_sigma(epsilon, 1e-5) <= gaussian_sigma(epsilon, 1e-5, method="classic")


def test_sigma_is_linear_in_sensitivity_and_zero_at_infinite_epsilon():
    assert gaussian_sigma(0.3, 1e-6, 2.5) == pytest.approx(2.5 * gaussian_sigma(0.3, 1e-6), rel=1e-10)
    assert gaussian_sigma(math.inf, 1e-5) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(epsilon=0.0, delta=1e-5),
        dict(epsilon=-1.0, delta=1e-5),
        dict(epsilon=1.0, delta=0.0),
        dict(epsilon=1.0, delta=1.0),
        dict(epsilon=1.0, delta=1e-5, sensitivity=0.0),
        dict(epsilon=1.0, delta=1e-5, method="laplace"),
    ],
)
def test_invalid_sigma_parameters(kwargs):
    with pytest.raises(ConfigError):
        gaussian_sigma(**kwargs)


def test_sigma_rejects_non_numbers():
    with pytest.raises(TypeError):
        gaussian_sigma("1", 1e-5)


# --- the noise matrix ----------------------------------------------------------------------------


def test_noise_is_symmetric_with_variance_sigma_squared_everywhere(rng):
    sigma, d, draws = math.sqrt(2 * math.log(1.25e5)), 20, 5000
    E = np.stack([symmetric_gaussian_noise(d, sigma, rng) for _ in range(draws)])
    assert np.array_equal(E, np.swapaxes(E, 1, 2))
    # E||E||_F^2 = d^2 sigma^2 = 9388.86 (SPEC §7); Var ||E||_F^2 = (2d + 8 d(d-1)/2) sigma^4
    frob2 = np.sum(E**2, axis=(1, 2))
    assert d * d * sigma**2 == pytest.approx(9388.86, abs=0.01)
    se = math.sqrt((2 * d + 4 * d * (d - 1)) * sigma**4 / draws)
    assert abs(frob2.mean() - 9388.86) < 4 * se
    # diagonal and off-diagonal entries: each variance sigma^2 (rel. s.e. sqrt(2/M) per entry)
    var = E.var(axis=0)
    assert np.all(np.abs(var / sigma**2 - 1) < 4 * math.sqrt(2 / draws) + 1e-12)
    # distinct upper-triangle entries are uncorrelated
    corr = np.corrcoef(E[:, 0, 1], E[:, 0, 2])[0, 1]
    assert abs(corr) < 4 / math.sqrt(draws)


def test_noisy_covariance_adds_calibrated_noise(rng):
    X = scale_rows_to_unit_ball(rng.uniform(0, 1, size=(50, 4)), Bounds.of(0, 1, 4))
    exact = noisy_covariance(X, epsilon=math.inf, delta=1e-5, rng=rng)
    assert np.array_equal(exact, X.T @ X)
    seed = 7
    E1 = noisy_covariance(X, epsilon=0.5, delta=1e-5, rng=np.random.default_rng(seed)) - exact
    E2 = (
        noisy_covariance(X, epsilon=0.5, delta=1e-5, rng=np.random.default_rng(seed), neighbouring="replace-one")
        - exact
    )
    # the release rounds X^T X + E to a grid 2^-12 of sigma (SPEC §12): equal up to the grid
    grid = grid_for(math.sqrt(2) * gaussian_sigma(0.5, 1e-5))
    assert np.array_equal(E1, E1.T)
    assert np.allclose(E2, math.sqrt(2) * E1, rtol=0, atol=2 * grid)
    expected = symmetric_gaussian_noise(4, gaussian_sigma(0.5, 1e-5), np.random.default_rng(seed))
    assert np.allclose(E1, expected, rtol=0, atol=grid)


def test_noisy_covariance_refuses_rows_outside_the_unit_ball(rng):
    with pytest.raises(ConfigError, match="norm"):
        noisy_covariance(np.array([[1.0, 1.0]]), epsilon=1.0, delta=1e-5, rng=rng)
    with pytest.raises(ConfigError, match="neighbouring"):
        noisy_covariance(np.zeros((2, 2)), epsilon=1.0, delta=1e-5, rng=rng, neighbouring="swap")


# --- scaling, eigenvectors, release --------------------------------------------------------------


def test_scale_rows_uses_public_midpoint_and_radius():
    b = Bounds(np.array([0.0, -2.0]), np.array([4.0, 2.0]))
    X = np.array([[2.0, 0.0], [4.0, 2.0], [0.0, 2.0], [3.0, 1.0], [40.0, 2.0]])
    A = scale_rows_to_unit_ball(X, b)
    radius = math.sqrt(8.0)
    assert np.allclose(A[0], 0.0)
    assert np.allclose(A[1], [2 / radius, 2 / radius]) and np.linalg.norm(A[1]) == pytest.approx(1.0)
    assert np.allclose(A[3], [1 / radius, 1 / radius])
    assert np.linalg.norm(A[4]) == pytest.approx(1.0)  # out of bounds: clipped onto the sphere
    with pytest.raises(ConfigError):
        scale_rows_to_unit_ball(np.zeros((3, 3)), b)


def test_top_k_is_descending_and_validates_k():
    C = np.diag([1.0, 5.0, 3.0])
    U, values = top_k_eigenvectors(C, 2)
    assert np.allclose(values, [5.0, 3.0])
    assert np.allclose(np.abs(U), [[0, 0], [1, 0], [0, 1]])
    for k in (0, 4, 1.5, True):
        with pytest.raises(ConfigError):
            top_k_eigenvectors(C, k)


def test_noiseless_dp_pca_recovers_the_data_subspace(rng):
    basis, _ = np.linalg.qr(rng.standard_normal((6, 2)))
    X = (rng.standard_normal((200, 2)) * [3.0, 1.0]) @ basis.T
    X /= 1.01 * np.max(np.linalg.norm(X, axis=1))
    U = dp_pca(X, 2, epsilon=math.inf, delta=1e-5, rng=rng)
    assert np.allclose(U @ U.T, basis @ basis.T, atol=1e-10)


def test_private_dp_pca_is_orthonormal_and_seeded():
    X = np.eye(5)[:3] * 0.9
    U1 = dp_pca(X, 3, epsilon=0.5, delta=1e-5, rng=np.random.default_rng(3))
    U2 = dp_pca(X, 3, epsilon=0.5, delta=1e-5, rng=np.random.default_rng(3))
    assert np.array_equal(U1, U2)
    assert np.allclose(U1.T @ U1, np.eye(3))


def test_owner_pca_release_returns_basis_and_count(rng):
    b = Bounds.of(0, 255, 8)
    X = rng.uniform(0, 255, size=(30, 8))
    U, n = owner_pca_release(X, b, 3, 1.0, 1e-5, rng)
    assert U.shape == (8, 3) and n == 30
    U, n = owner_pca_release(X[:0], b, 3, 1.0, 1e-5, rng)  # total: no rows still make the debited release
    assert U.shape == (8, 3) and n == 0 and np.allclose(U.T @ U, np.eye(3))


def test_normalise_rows_uses_only_the_bounds_and_the_row():
    from privfed.common.bounds import Bounds
    from privfed.common.feddpdr.pca import normalise_rows, scale_rows

    bounds = Bounds.of(0.0, 255.0, 4)
    X = np.array([[0, 0, 0, 0], [255, 0, 0, 0], [10, 20, 30, 40], [300, -5, 0, 0]], dtype=float)
    Z = normalise_rows(X, bounds)
    assert np.allclose(np.linalg.norm(Z, axis=1), [0, 1, 1, 1])
    assert np.allclose(Z[2], np.array([1, 2, 3, 4]) / math.sqrt(30))
    assert np.allclose(Z[3], [1, 0, 0, 0])  # clipped into the bounds first
    assert np.array_equal(normalise_rows(X[2:3], bounds), Z[2:3])  # row by row: no other row is read
    assert np.array_equal(scale_rows(X, bounds, "normalise"), Z)
    with pytest.raises(ConfigError):
        scale_rows(X, bounds, "other")
