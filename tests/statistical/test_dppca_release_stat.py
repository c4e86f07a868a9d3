"""The DP-PCA release (Analyze-Gauss, SPEC §7; common/feddpdr/pca.py ``noisy_covariance``) end to end: unbiased,
variance sigma^2 per released entry, inside the public clamp, and (epsilon, delta)-DP on the worst-case
neighbours of *both* neighbouring relations, at the sensitivity the module states (1 add/remove, sqrt 2
replace-one).

The unit tests check the noise matrix's variance and symmetry (tests/unit/test_dppca.py) and the Gaussian
mechanism's privacy-loss tail at a fixed shift (test_float_safe_stat.py); the class sums have a hockey-stick
test (test_class_sums_stat.py). Nothing checked that ``NEIGHBOURING_SENSITIVITY`` is the real sensitivity of
the released upper triangle of ``X^T X``: a row ``e_1`` added moves it by exactly 1, ``e_2`` replaced by
``e_1`` by exactly sqrt 2 (the maxima over the unit ball).

The divergence is estimated as in test_class_sums_stat.py: ``delta(eps) = E_{S ~ M(D1)} max(0, 1 - e^eps
p_D0(S) / p_D1(S))`` over releases drawn by the mechanism ``noisy_covariance`` uses (the first draw is checked
equal to ``noisy_covariance``'s on the same seed), with the ideal Gaussian densities. It must be <= delta + 4 s.e.
and above delta / 2 (the calibration is tight); the same draws shrunk to 0.8 sigma, or replace-one neighbours
released at the add/remove calibration, must exceed delta (the test can fail).
"""

import math

import numpy as np
import pytest

from privfed.common.feddpdr.pca import NEIGHBOURING_SENSITIVITY, covariance_release, noisy_covariance

pytestmark = pytest.mark.slow

D = 3
UPPER = np.triu_indices(D)
DRAWS = 40_000


def base_rows(rng, n=5):
    X = rng.uniform(-1.0, 1.0, (n, D))
    return 0.9 * X / np.linalg.norm(X, axis=1, keepdims=True) * rng.uniform(0.2, 1.0, (n, 1))


def neighbours(rng, neighbouring):
    """Worst-case neighbours: add ``e_1``, or replace a row ``e_2`` by ``e_1``."""
    X0 = base_rows(rng)
    e1, e2 = np.eye(D)[:1], np.eye(D)[1:2]
    if neighbouring == "add-remove":
        return X0, np.vstack([X0, e1])
    return np.vstack([X0, e2]), np.vstack([X0, e1])


def upper(X):
    return (X.T @ X)[UPPER]


def releases(X, epsilon, delta, neighbouring, rng):
    """DRAWS releases of the upper triangle of ``X^T X`` through ``noisy_covariance``'s mechanism."""
    release = covariance_release(epsilon, delta, neighbouring=neighbouring)
    seed = int(rng.integers(2**31))
    full = noisy_covariance(X, epsilon=epsilon, delta=delta, rng=np.random.default_rng(seed), neighbouring=neighbouring)
    one = release.privatize(upper(X)[None, :], np.random.default_rng(seed))[0]
    assert np.array_equal(full, full.T) and np.array_equal(full[UPPER], one)  # the same release, vectorised below
    return release, release.privatize(np.broadcast_to(upper(X), (DRAWS, UPPER[0].size)), rng)


def hockey_stick(draws_d1, mean_d0, mean_d1, sigma, eps):
    diff = mean_d1 - mean_d0
    log_ratio = ((draws_d1 - mean_d1) @ diff) / sigma**2 + diff @ diff / (2 * sigma**2)  # log p_D1 - log p_D0
    terms = np.maximum(0.0, 1.0 - np.exp(eps - log_ratio))
    return float(terms.mean()), float(terms.std(ddof=1) / math.sqrt(terms.size))


@pytest.mark.parametrize("neighbouring", ["add-remove", "replace-one"])
def test_release_is_unbiased_with_variance_sigma_squared_in_range(neighbouring, rng):
    _, X1 = neighbours(rng, neighbouring)
    release, draws = releases(X1, 0.8, 1e-5, neighbouring, rng)
    sigma = release.sigma
    lo, hi = release.output_bounds
    assert np.all((draws >= lo) & (draws <= hi))
    err = draws - upper(X1)
    assert np.all(np.abs(err.mean(axis=0)) <= 5 * sigma / math.sqrt(DRAWS))
    assert np.all(np.abs(err.var(axis=0) / release.variance() - 1) <= 5 * math.sqrt(2 / DRAWS))


@pytest.mark.parametrize("neighbouring", ["add-remove", "replace-one"])
@pytest.mark.parametrize("epsilon, delta", [(0.3, 0.05), (1.0, 0.01)])
def test_release_on_worst_case_neighbours_meets_epsilon_delta_tightly(neighbouring, epsilon, delta, rng):
    X0, X1 = neighbours(rng, neighbouring)
    S0, S1 = upper(X0), upper(X1)
    assert np.linalg.norm(S1 - S0) == pytest.approx(NEIGHBOURING_SENSITIVITY[neighbouring])  # attained
    release, draws = releases(X1, epsilon, delta, neighbouring, rng)
    estimate, se = hockey_stick(draws, S0, S1, release.sigma, epsilon)
    assert estimate <= delta + 4 * se, (estimate, se)
    assert estimate > 0.5 * delta  # tight: the analytic calibration spends what it may
    shrunk = S1 + (draws - S1) * 0.8  # the same draws at 0.8 sigma: caught
    over, se_over = hockey_stick(shrunk, S0, S1, 0.8 * release.sigma, epsilon)
    assert over > delta + 4 * se_over


def test_replace_one_neighbours_at_the_add_remove_calibration_are_caught(rng):
    """sqrt 2 is needed: replace-one neighbours released with the sensitivity-1 sigma exceed delta."""
    epsilon, delta = 1.0, 0.01
    X0, X1 = neighbours(rng, "replace-one")
    release, draws = releases(X1, epsilon, delta, "add-remove", rng)
    over, se = hockey_stick(draws, upper(X0), upper(X1), release.sigma, epsilon)
    assert over > delta + 4 * se, (over, se)
