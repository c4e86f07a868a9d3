"""The one-budget multiclass objective perturbation (privfed.common.feddpdr.multiclass; issue 21): the
constants its privacy proof rests on, checked numerically (gradient norm, Hessian trace, the inner
product bound, the Jacobian ratio, the noise calibration), the exact minimiser, and learning."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from privfed.common.errors import ConfigError
from privfed.common.feddpdr import multiclass as mc
from privfed.common.feddpdr.model import add_bias_feature
from privfed.common.mechanisms import objective, objective_gaussian
from privfed.common.mechanisms.amp import AMP_FRACTION, AMP_RADIUS, AmpOutputNoise
from privfed.common.mechanisms.amp import norm_laplace_noise as sample_b
from privfed.common.mechanisms.gaussian import standard_normal


def _unit(rng, d):
    v = rng.standard_normal(d)
    return v / np.linalg.norm(v) * rng.uniform(0.3, 1.0)


def _blobs(rng, n, d, K):
    centres = np.linalg.qr(rng.standard_normal((d, K)))[0].T * 0.6
    y = rng.integers(0, K, size=n)
    X = centres[y] + 0.15 * rng.standard_normal((n, d)) / math.sqrt(d)
    return X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True)), y


def _finite_difference_hessian(s, y, loss, step=1e-5):
    K = s.size
    grad = lambda v: mc.score_gradients(v[None], np.array([y]), loss)[1][0]  # noqa: E731
    H = np.column_stack([(grad(s + e) - grad(s - e)) / (2 * step) for e in np.eye(K) * step])
    return (H + H.T) / 2


@pytest.mark.parametrize("loss", mc.LOSSES)
def test_gradient_norm_hessian_trace_and_inner_product_bounds(loss):
    """||grad_s l||^2 <= 2, hess_s l is PSD with trace <= beta, and |c^T u| <= max_k |u_y - u_k|
    for every score vector (the three facts the proof uses), over random and extreme scores; and its
    largest eigenvalue is at most CURVATURE_BOUND (the solver's smoothness)."""
    rng = np.random.default_rng(0)
    K = 6
    worst_trace = worst_eigenvalue = 0.0
    for _ in range(400):
        s = rng.standard_normal(K) * rng.choice([0.1, 1.0, 3.0, 30.0])
        y = int(rng.integers(K))
        _, G = mc.score_gradients(s[None], np.array([y]), loss)
        c = G[0]
        assert c @ c <= objective_gaussian.GRADIENT_NORM_SQ + 1e-12
        u = rng.standard_normal(K)
        assert abs(c @ u) <= np.max(np.abs(u[y] - np.delete(u, y))) + 1e-12
        H = mc.score_hessian(s, y, loss)
        if np.min(np.abs(1 - (s[y] - np.max(np.delete(s, y))))) > 0.05:  # away from Huber's kinks
            assert np.allclose(H, _finite_difference_hessian(s, y, loss), atol=1e-4)
        assert np.linalg.eigvalsh(H).min() >= -1e-9
        worst_trace = max(worst_trace, np.trace(H))
        worst_eigenvalue = max(worst_eigenvalue, np.linalg.eigvalsh(H).max())
    assert worst_trace <= mc.TRACE_BOUND[loss] + 1e-12
    assert worst_trace > 0.3 * mc.TRACE_BOUND[loss]  # the bound is not vacuous
    assert 0.3 * mc.CURVATURE_BOUND[loss] < worst_eigenvalue <= mc.CURVATURE_BOUND[loss] + 1e-12


@pytest.mark.parametrize("loss", mc.LOSSES)
def test_objective_gradient_matches_finite_differences(loss):
    rng = np.random.default_rng(1)
    X, y = _blobs(rng, 30, 4, 3)
    B, F = rng.standard_normal((3, 4)), rng.standard_normal(12)
    grad = mc.perturbed_objective(F, X, y, loss, 0.7, B)[1]
    step = 1e-6
    numeric = [
        (
            mc.perturbed_objective(F + step * e, X, y, loss, 0.7, B)[0]
            - mc.perturbed_objective(F - step * e, X, y, loss, 0.7, B)[0]
        )
        / (2 * step)
        for e in np.eye(12)
    ]
    assert np.allclose(grad, numeric, atol=1e-6)


def test_jacobian_ratio_of_adding_one_row_is_at_most_exp_epsilon_j():
    """log det(Lambda I + sum H_i + H_x) - log det(Lambda I + sum H_i) in [0, beta / Lambda]."""
    rng = np.random.default_rng(2)
    K, d, n, Lambda = 4, 3, 5, 0.4
    for loss in mc.LOSSES:
        worst = 0.0
        for _ in range(80):
            X = np.array([_unit(rng, d) for _ in range(n + 1)])
            y = rng.integers(K, size=n + 1)
            F = rng.standard_normal((K, d)) * rng.choice([0.3, 1.0, 3.0])
            H = [np.kron(mc.score_hessian(F @ x, yy, loss), np.outer(x, x)) for x, yy in zip(X, y)]
            base = Lambda * np.eye(K * d) + sum(H[:n])
            change = np.linalg.slogdet(base + H[n])[1] - np.linalg.slogdet(base)[1]
            assert -1e-9 <= change <= mc.TRACE_BOUND[loss] / Lambda + 1e-6
            worst = max(worst, change * Lambda / mc.TRACE_BOUND[loss])
        assert worst > 0.05


def test_noise_sigma_meets_its_condition_and_the_split_adds_up():
    for eps_b, delta, K in [(1.1, 1e-5, 10), (0.1, 1e-6, 2), (4.4, 1e-5, 26)]:
        s = objective_gaussian.noise_sigma(eps_b, delta, K)
        z = norm.isf(delta / (2 * (K - 1)))
        assert math.isclose(math.sqrt(2) * z / s + 1 / s**2, eps_b, rel_tol=1e-9)
    assert objective_gaussian.noise_sigma(math.inf, 0.0, 10) == 0.0
    with pytest.raises(ConfigError):
        objective_gaussian.noise_sigma(1.0, 0.0, 10)
    for loss in mc.LOSSES:
        split = mc.mechanism(1.25, 1e-5, 10, loss).calibration()
        assert math.isclose(split["epsilon_J"] + split["epsilon_B"] + split["epsilon_out"], 1.25)
        assert math.isclose(split["Lambda"], mc.TRACE_BOUND[loss] / split["epsilon_J"])
        assert split["epsilon_out"] == AMP_FRACTION * 1.25


def test_on_the_good_event_the_noise_log_ratio_is_below_epsilon_b_for_every_parameter():
    """With max_k |u_y - u_k| <= sqrt 2 sigma z (u = B x), the log density ratio of B and B - g(F) stays
    below epsilon_B whatever F is; the event has probability >= 1 - delta (union bound, tested here)."""
    rng = np.random.default_rng(3)
    K, d, eps_b, delta = 5, 4, 0.5, 1e-2
    sigma = objective_gaussian.noise_sigma(eps_b, delta, K)
    t = math.sqrt(2) * sigma * norm.isf(delta / (2 * (K - 1)))
    bad = 0
    for trial in range(4000):
        B = rng.standard_normal((K, d)) * sigma
        x, y = _unit(rng, d), int(rng.integers(K))
        u = B @ x
        if np.max(np.abs(u[y] - np.delete(u, y))) > t:
            bad += 1
            continue
        if trial % 8:
            continue
        for loss in mc.LOSSES:
            F = rng.standard_normal((K, d)) * rng.choice([0.5, 5.0, 50.0])
            g = np.outer(mc.score_gradients((F @ x)[None], np.array([y]), loss)[1][0], x)
            for sign in (1, -1):  # adding the row and removing it
                log_ratio = (np.sum((B - sign * g) ** 2) - np.sum(B**2)) / (2 * sigma**2)
                assert abs(log_ratio) <= eps_b + 1e-12
    assert bad / 4000 <= delta + 3 * math.sqrt(delta / 4000)


@pytest.mark.parametrize("loss", mc.LOSSES)
def test_fit_is_the_perturbed_minimiser_plus_amp_noise_and_learns(loss):
    rng = np.random.default_rng(4)
    X, y = _blobs(rng, 600, 5, 4)
    Xb = add_bias_feature(X)
    F, info = mc.fit_dp_multiclass(Xb, y, 4, loss=loss, epsilon=math.inf, delta=0.0, rng=rng)
    assert np.mean(np.argmax(Xb @ F.T, 1) == y) > 0.95 and info["sigma"] == 0
    F, info = mc.fit_dp_multiclass(Xb, y, 4, loss=loss, epsilon=3.0, delta=1e-5, rng=np.random.default_rng(5))
    assert np.mean(np.argmax(Xb @ F.T, 1) == y) > 0.8
    draws = np.random.default_rng(5)  # the same draws the fit made: B, then AMP's output noise
    B = standard_normal(draws, F.shape) * info["sigma"]  # the float-safe sampler (SPEC §12)
    V = AMP_RADIUS * sample_b(F.size, info["epsilon_out"], draws).reshape(F.shape)

    def perturbed_j(f):
        return mc.perturbed_objective(f, Xb, y, loss, info["Lambda"], B)

    point = objective.minimise_perturbed(  # the release's solver, with the loss's bounds: within r of the minimiser
        lambda G: mc.perturbed_objective(G.ravel(), Xb, y, loss, 0.0, np.zeros_like(B))[1].reshape(G.shape),
        B,
        reg=info["Lambda"],
        divisor=1.0,
        curvature=mc.CURVATURE_BOUND[loss] * Xb.shape[0],
        gradient_bound=Xb.shape[0] * math.sqrt(objective_gaussian.GRADIENT_NORM_SQ),
    ).ravel()
    assert np.linalg.norm(perturbed_j(point)[1]) <= info["Lambda"] * AMP_RADIUS
    # the release is the solver's point (within r of this one) plus V, rounded to AMP's grid (SPEC §12)
    grid = AmpOutputNoise(epsilon=info["epsilon_out"], d=F.size).output_grid.grid
    assert np.all(F == np.rint(F / grid) * grid)
    assert np.max(np.abs(F - V - point.reshape(F.shape))) <= grid / 2 + 2 * AMP_RADIUS
    empty, _ = mc.fit_dp_multiclass(Xb[:0], y[:0], 4, loss=loss, epsilon=1.0, delta=1e-5, rng=rng)
    assert empty.shape == (4, 6) and np.all(np.isfinite(empty))  # total: no rows, still a release
    with pytest.raises(ConfigError):
        mc.fit_dp_multiclass(Xb, y + 4, 4, loss=loss, epsilon=1.0, delta=1e-5, rng=rng)
