"""Distribution of the objective-perturbation noise b (SPEC §8; Chaudhuri et al. 2011 Alg. 2;
:func:`privfed.common.mechanisms.amp.norm_laplace_noise`) and of AMP's gridded release of it.

Density proportional to exp(-(eps'/2)||b||) on R^d: radius Gamma(shape d, scale 2/eps'), direction
uniform on the sphere, independent of the radius. Tolerances are 4 standard errors (SPEC §0).
"""

import math

import numpy as np
import pytest
from scipy import stats

from privfed.common.mechanisms.amp import AMP_RADIUS, AmpOutputNoise, norm_laplace_variance
from privfed.common.mechanisms.amp import norm_laplace_noise as sample_b
from privfed.common.mechanisms.objective import privacy_adjustment

pytestmark = pytest.mark.slow

DRAWS = 40_000


@pytest.mark.parametrize(
    "epsilon, rows, lam, expected_mean",
    [  # d / rate with privacy_adjustment's rates for SPEC §8's cases under add/remove (test_dpsvm's table)
        (1, 1000, 0.01, 10 / (1 - math.log(1.1))),
        (0.1, 1000, 0.001, 200.0),
        (1, 100, 0.001, 20.0),
        (0.5, 10000, 1e-4, 40.0),
    ],
)
def test_norm_is_gamma_with_the_calibrated_mean(rng, epsilon, rows, lam, expected_mean):
    """The objective's noise at its calibration: density ~ exp(-rate ||b||), so ||b|| ~ Gamma(d, 1/rate)."""
    d = 10
    rate, _ = privacy_adjustment(epsilon, rows, lam)
    assert d / rate == pytest.approx(expected_mean, rel=1e-9)
    radius = np.linalg.norm(sample_b(d, 2 * rate, rng, size=DRAWS), axis=1)
    se = math.sqrt(d) / rate / math.sqrt(DRAWS)
    assert abs(radius.mean() - expected_mean) < 4 * se
    assert stats.kstest(radius, stats.gamma(a=d, scale=1 / rate).cdf).pvalue > 1e-3


def test_direction_is_uniform_and_independent_of_radius(rng):
    d = 5
    b = sample_b(d, 0.7, rng, size=DRAWS)
    radius = np.linalg.norm(b, axis=1)
    u = b / radius[:, None]
    # E u = 0 with per-coordinate s.e. sqrt(1/(d M)); E u u^T = I/d
    assert np.all(np.abs(u.mean(axis=0)) < 4 * math.sqrt(1 / (d * DRAWS)))
    second = u.T @ u / DRAWS
    # Var(u_j^2) = 2(d-1)/(d^2 (d+2)) for a uniform direction
    se_diag = math.sqrt(2 * (d - 1) / (d * d * (d + 2)) / DRAWS)
    assert np.all(np.abs(np.diag(second) - 1 / d) < 4 * se_diag)
    assert abs(np.corrcoef(radius, u[:, 0] ** 2)[0, 1]) < 4 / math.sqrt(DRAWS)


def test_radius_histogram_matches_gamma(rng):
    """Chi-square on ten equiprobable Gamma bins, at two values of eps'."""
    d = 3
    for eps_prime in (0.25, 2.0):
        radius = np.linalg.norm(sample_b(d, eps_prime, rng, size=DRAWS), axis=1)
        edges = stats.gamma(a=d, scale=2 / eps_prime).ppf(np.linspace(0, 1, 11))
        counts, _ = np.histogram(radius, edges)
        expected = np.full(10, DRAWS / 10)
        chi2 = np.sum((counts - expected) ** 2 / expected)
        assert chi2 < stats.chi2(df=9).ppf(0.999)


@pytest.mark.parametrize("d, eps", [(1, 0.4), (4, 0.9), (12, 3.0)])
def test_each_coordinate_has_the_closed_form_variance(rng, d, eps):
    """Var b_j = E r^2 / d = (d + 1)(2/eps)^2 (norm_laplace_variance), within 5 s.e.: E b_j^4 = 3 (d+1)(d+3)
    theta^4, so the kurtosis of a coordinate is 3 (d + 3) / (d + 1)."""
    b = sample_b(d, eps, rng, size=DRAWS)
    var = norm_laplace_variance(d, eps)
    assert var == pytest.approx((d + 1) * (2 / eps) ** 2)
    kurtosis = 3 * (d + 3) / (d + 1)
    assert abs(float(np.mean(b**2)) - var) <= 5 * var * math.sqrt((kurtosis - 1) / b.size)
    assert np.all(np.abs(b.mean(axis=0)) <= 5 * math.sqrt(var / DRAWS))


@pytest.mark.parametrize("eps, F0", [(0.01, 0.3e-4), (0.3, -1.7)])
def test_amp_release_is_on_its_grid_unbiased_with_the_closed_form_variance(rng, eps, F0):
    """AMP's release ``round_L(F + r V)`` (SPEC §8, §12): on its public grid, mean ``F`` and variance
    ``r^2 (d + 1) (2/eps)^2`` within the rounding's ``L^2 / 4``."""
    d = 3
    amp = AmpOutputNoise(epsilon=eps, d=d)
    F = np.full((DRAWS, d), F0)
    out = amp.privatize(F, rng)
    grid = amp.output_grid.grid
    assert np.all(out == np.rint(out / grid) * grid) and np.all(np.abs(out) <= amp.output_grid.bound)
    var = amp.variance()
    assert np.all(np.abs(out.mean(axis=0) - F0) < 4 * math.sqrt(var / DRAWS) + grid**2 / math.sqrt(var))
    # Var v_j^2 = E R^4 E u_j^4 - (E v_j^2)^2 = theta^4 (d + 1)(2 d + 8) for a Gamma(d, theta) radius, r theta = 2 r/eps
    se = (2 * AMP_RADIUS / eps) ** 2 * math.sqrt((d + 1) * (2 * d + 8) / DRAWS)
    second = np.mean((out - F0) ** 2, axis=0)
    assert np.all(np.abs(second - var) < 4 * se + grid * math.sqrt(var) + grid**2 / 4)
