"""Mutation round 5 (common/mechanisms/amp.py): AMP's clamp, and the step count's own checks.

The released parameters are clamped at ``M = 2^31 + 40 s`` (the class docstring: "the clamp binds only for
parameters beyond 2^31", far beyond any fit of rows of norm <= 1). No test released a parameter anywhere near
it: a clamp at ``2 * 31 + 40 s`` or ``2^30 + 40 s`` passed, which would pull a fit at a tiny epsilon (its
minimiser ``-b / (m reg)`` grows as ``1/epsilon``; test_dpsvm's huge-noise release reaches past 1) onto the
clamp. Now a point at ``2.1e9 < 2^31`` is released around itself, and one beyond the clamp is released within the noise's reach of it.

``accelerated_steps`` (the public step count of every FedDPDR solve) refused nothing in the tests: its check
with ``or`` for ``and``, ``kappa >= 0`` or ``radius >= 0`` passed, as did no check at all. Each bad argument is
now refused alone, and a start already within the radius takes no step (Thm 3.18's bound needs none).

``nesterov_within`` aiming at ``1.5 r`` instead of ``(1 - FLOAT_SHARE) r``, or with another momentum, passed:
real convergence is faster than Thm 3.18's bound, so only the count and the iteration show it. Now the number of
gradient calls is the docstring's count and the iterates are Bubeck's §3.7.1 method, replayed on a quadratic.
The scale ``2 r / epsilon`` (the Gamma radius's scale, which fixes the grid), epsilon = inf (no noise), d = 0,
the reported bias 0 and the symmetric clamp had no test of their own either.
"""

import math

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.amp import AMP_RADIUS, FLOAT_SHARE, AmpOutputNoise, accelerated_steps, nesterov_within
from privfed.common.mechanisms.snapping import grid_for


@pytest.mark.parametrize("epsilon", [0.01, 1.0])
def test_a_parameter_below_2_to_the_31_is_released_around_itself_and_one_beyond_the_clamp_is_clamped(epsilon):
    amp = AmpOutputNoise(epsilon=epsilon, d=3)
    lo, hi = amp.output_bounds
    assert hi == -lo and hi >= 2.0**31
    F = np.array([[2.1e9, -2.1e9, 5e8], [1e12, -1e12, 0.0]])
    out = amp.privatize(F.copy(), np.random.default_rng(1))
    reach = 60 * math.sqrt(amp.variance()) + amp.output_grid.grid  # 60 sd of the noise, plus the rounding
    assert np.all(np.abs(out[0] - F[0]) <= reach), out[0] - F[0]
    # beyond it: clamped first, so within the noise's reach of the clamp, and never past it
    assert np.all(np.abs(out[1, :2] - [hi, lo]) <= reach) and np.all(np.abs(out) <= hi) and abs(out[1, 2]) <= reach


@pytest.mark.parametrize(
    ("kappa", "distance", "radius"),
    [
        (0.5, 1.0, 1e-6),
        (2.0, 1.0, 0.0),
        (2.0, 1.0, -1e-6),
        (2.0, -1.0, 1e-6),
        (2.0, math.inf, 1e-6),
        (math.nan, 1.0, 1.0),
    ],
)
def test_the_step_count_refuses_each_bad_argument_alone(kappa, distance, radius):
    with pytest.raises(ConfigError):
        accelerated_steps(kappa, distance, radius)


def test_a_start_within_the_radius_takes_no_step_and_one_beyond_it_takes_the_bounds_steps():
    assert accelerated_steps(4.0, 1e-6, 1e-6) == 0 and accelerated_steps(4.0, 0.0, 1e-6) == 0
    # t - 1 >= 2 sqrt(kappa) ln(sqrt(1 + kappa) D / r): 4 ln(sqrt(5) * 1000) = 30.85...
    assert accelerated_steps(4.0, 1e-3, 1e-6) == 31


def test_nesterov_accepts_a_condition_number_of_one_and_reaches_the_minimiser():
    """``mu = smooth`` is a valid pair (a quadratic of one curvature): one step of ``1/smooth`` lands on the minimiser."""
    target = np.array([3.0, -7.5, 1e3])
    x = nesterov_within(lambda x: 2.0 * (x - target), np.zeros(3), mu=2.0, smooth=2.0, start_distance=1e4)
    assert np.all(np.abs(x - target) <= AMP_RADIUS)


@pytest.mark.parametrize(("mu", "smooth", "distance"), [(1e-3, 1.0, 10.0), (0.5, 3.0, 2.0), (1.0, 1.0, 1e-5)])
def test_nesterov_takes_exactly_the_public_count_for_its_real_arithmetic_share_of_the_radius(mu, smooth, distance):
    """The docstring's count: ``accelerated_steps(smooth / mu, start_distance, (1 - FLOAT_SHARE) r)`` gradient calls,
    whatever the iterates (the other ``FLOAT_SHARE r`` is left to rounding); a target of ``1.5 r`` or ``r`` takes
    fewer steps and leaves no margin for it."""
    calls = []

    def gradient(x):
        calls.append(1)
        return mu * (x - 1.0)

    nesterov_within(gradient, np.zeros(2), mu=mu, smooth=smooth, start_distance=distance)
    expected = accelerated_steps(smooth / mu, distance, (1.0 - FLOAT_SHARE) * AMP_RADIUS)
    assert len(calls) == expected and expected > accelerated_steps(smooth / mu, distance, AMP_RADIUS)


def test_nesterov_is_bubecks_constant_momentum_method_whose_count_thm_3_18_proves():
    """The step count is proved for Bubeck's §3.7.1 iteration only: ``y' = x - grad(x) / smooth``,
    ``x' = (1 + m) y' - m y`` with ``m = (sqrt(kappa) - 1) / (sqrt(kappa) + 1)``. Another momentum (``(q - 2) / (q + 1)``,
    ``(q - 1) / (q + 2)``) still converges on easy problems but carries no such count. Replayed here on a quadratic."""
    rng = np.random.default_rng(12)
    A = rng.standard_normal((4, 4))
    H = A @ A.T + 0.05 * np.eye(4)
    mu, smooth = np.linalg.eigvalsh(H)[[0, -1]]
    target = rng.standard_normal(4)
    start = np.zeros(4)
    got = nesterov_within(lambda x: H @ (x - target), start, mu=mu, smooth=smooth, start_distance=3.0)
    q = math.sqrt(smooth / mu)
    m = (q - 1.0) / (q + 1.0)
    x = y = start
    for _ in range(accelerated_steps(smooth / mu, 3.0, (1.0 - FLOAT_SHARE) * AMP_RADIUS)):
        y_next = x - H @ (x - target) / smooth
        x, y = (1.0 + m) * y_next - m * y, y_next
    np.testing.assert_allclose(got, y, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("epsilon", "radius"), [(1.0, 1.0), (0.25, 0.01), (3.0, AMP_RADIUS)])
def test_the_scale_is_the_gamma_radius_scale_and_fixes_the_grid(epsilon, radius):
    """``s = 2 r / epsilon`` is the scale of the noise's radius ``r Gamma(d, 2/epsilon)``: the mean distance of a
    release from its point is ``d s`` (5 s.e.; the grid's rounding moves it by at most ``sqrt(d) L / 2``), and the
    grid is :func:`grid_for` of it (SPEC §12)."""
    d, n = 3, 20_000
    amp = AmpOutputNoise(epsilon=epsilon, radius=radius, d=d)
    s = 2.0 * radius / epsilon
    assert amp.scale == pytest.approx(s, rel=1e-15)
    assert amp.output_grid.grid == grid_for(s) and amp.output_grid.bound >= 2.0**31 + 40 * s - amp.output_grid.grid
    out = amp.privatize(np.zeros((n, d)), np.random.default_rng(2))
    # symmetric noise: the reported bias is 0 and the mean release is the point (5 s.e., plus the rounding)
    assert amp.bias() == 0.0
    assert np.all(np.abs(out.mean(axis=0)) <= 5 * math.sqrt(amp.variance() / n) + amp.output_grid.grid)
    dist = np.linalg.norm(out, axis=1)
    se = math.sqrt(d) * s / math.sqrt(n)  # sd of a Gamma(d, s) radius
    assert abs(dist.mean() - d * s) <= 5 * se + math.sqrt(d) * amp.output_grid.grid / 2


def test_an_infinite_epsilon_adds_no_noise_and_a_noise_of_no_coordinates_is_refused():
    F = np.array([[0.125, -3.0], [7.0, 1e-3]])
    exact = AmpOutputNoise(epsilon=math.inf, d=2)
    assert exact.privatize(F, np.random.default_rng(0)) is F and exact.variance() == 0.0
    assert exact.output_bounds == (-math.inf, math.inf)
    with pytest.raises(ConfigError, match="d"):
        AmpOutputNoise(epsilon=1.0, d=0)
