"""The seed's objective-perturbed Huber SVM (SPEC §8; seed 004 Alg. 3), made total by AMP, the total
solver, and the owner's phase-2 release for every model."""

import math

import numpy as np
import pytest
import scipy.optimize

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.choices import SVM_MODELS, ovr_epsilons
from privfed.common.feddpdr.model import add_bias_feature, predict_linear
from privfed.common.feddpdr.release import owner_svm_release
from privfed.common.feddpdr.svm import (
    fit_dp_svm,
    fit_dp_svm_ovr,
    huber_hinge,
    huber_hinge_derivative,
    objective,
    objective_gradient,
)
from privfed.common.mechanisms.amp import (
    AMP_FRACTION,
    AMP_RADIUS,
    AmpOutputNoise,
    accelerated_steps,
    nesterov_within,
)
from privfed.common.mechanisms.amp import norm_laplace_noise as sample_b
from privfed.common.mechanisms.objective import privacy_adjustment


def _blobs(rng, n, d, n_classes, spread=0.15):
    centres = np.linalg.qr(rng.standard_normal((d, n_classes)))[0].T * 0.6
    y = rng.integers(0, n_classes, size=n)
    X = centres[y] + spread * rng.standard_normal((n, d)) / math.sqrt(d)
    return X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True)), y


# --- loss, adjustment, noise ---------------------------------------------------------------------


def test_huber_hinge_values():
    z = np.array([-1, 0, 0.5, 0.75, 1, 1.25, 1.5, 2])
    assert np.allclose(huber_hinge(z), [2, 1, 0.5, 0.28125, 0.125, 0.03125, 0, 0])


def test_huber_derivative_matches_finite_differences():
    z = np.linspace(-2, 3, 101) + 1e-3  # avoid the kinks exactly
    step = 1e-6
    numeric = (huber_hinge(z + step) - huber_hinge(z - step)) / (2 * step)
    assert np.allclose(huber_hinge_derivative(z), numeric, atol=1e-6)


@pytest.mark.parametrize(
    "epsilon, rows, lam, rate, delta_reg",
    [  # by hand: a = c/(m lam); log(1 + a) <= eps/2 gives rate = eps - log(1 + a), else Delta = c/(m (e^{eps/2} - 1)) - lam
        (1, 1000, 0.01, 0.904690, 0.0),  # a = 0.1: 1 - log 1.1
        (0.1, 1000, 0.001, 0.05, 0.018504),  # a = 1 > e^0.05 - 1: 1/(1000 * 0.051271) - 0.001
        (1, 100, 0.001, 0.5, 0.014415),
        (0.5, 10000, 1e-4, 0.25, 0.000252),
    ],
)
def test_privacy_adjustment_table(epsilon, rows, lam, rate, delta_reg):
    """SPEC §8's cases, under add/remove-one with the public row count (SPEC's table is replace-one's with n)."""
    got_rate, got_delta = privacy_adjustment(epsilon, rows, lam)
    assert got_rate == pytest.approx(rate, abs=1e-6)
    assert got_delta == pytest.approx(delta_reg, abs=1e-6)


@pytest.mark.parametrize("epsilon", [1e-3, 0.1, 1.0, 5.0, 30.0])
@pytest.mark.parametrize("rows", [1, 7, 1000, 10**9])
@pytest.mark.parametrize("lam", [2.0**-20, 1e-3, 1.0, 2.0**20])
@pytest.mark.parametrize("c", [0.25, 1.0])
def test_privacy_adjustment_spends_exactly_epsilon_under_add_remove(epsilon, rows, lam, c):
    """The noise's rate plus the Jacobian's log(1 + c/(m (lam + Delta))) is epsilon (the privacy loss of one row
    added or removed), Delta >= 0 and the rate at least half of epsilon (the noise's scale is bounded)."""
    rate, Delta = privacy_adjustment(epsilon, rows, lam, c)
    assert Delta >= 0.0 and rate >= epsilon / 2 * (1 - 1e-12)
    assert rate + math.log1p(c / (rows * (lam + Delta))) == pytest.approx(epsilon, rel=1e-9)


def test_privacy_adjustment_bypass_and_invalid():
    assert privacy_adjustment(math.inf, 10, 0.1) == (math.inf, 0.0)
    for args in ((0.0, 10, 0.1), (1.0, 0, 0.1), (1.0, 10, 0.0), (1.0, 10, 0.1, -1.0), (1.0, 2.5, 0.1)):
        with pytest.raises(ConfigError):
            privacy_adjustment(*args)


def test_sample_b_shapes_and_bypass(rng):
    assert sample_b(4, 1.0, rng).shape == (4,)
    assert sample_b(4, 1.0, rng, size=7).shape == (7, 4)
    assert np.array_equal(sample_b(3, math.inf, rng), np.zeros(3))
    with pytest.raises(ConfigError):
        sample_b(0, 1.0, rng)
    with pytest.raises(ConfigError):
        sample_b(3, -1.0, rng)


# --- objective -----------------------------------------------------------------------------------


def test_objective_unit_example():
    X, y, f, b = np.eye(2), np.array([1.0, -1.0]), np.array([0.5, 0.5]), np.array([2.0, 1.0])
    assert objective(f, X, y, 0.1, b, 0.0) == pytest.approx(1.775, abs=1e-12)
    assert np.allclose(objective_gradient(f, X, y, 0.1, b, 0.0), [0.55, 1.05], atol=1e-12)


def test_gradient_matches_finite_differences(rng):
    X, y = _blobs(rng, 40, 5, 2)
    y = np.where(y == 1, 1.0, -1.0)
    b, f = rng.standard_normal(5) * 3, rng.standard_normal(5)
    step = 1e-6
    numeric = np.array(
        [
            (objective(f + step * e, X, y, 0.05, b, 0.02) - objective(f - step * e, X, y, 0.05, b, 0.02)) / (2 * step)
            for e in np.eye(5)
        ]
    )
    assert np.allclose(objective_gradient(f, X, y, 0.05, b, 0.02), numeric, atol=1e-7)


# --- fitting -------------------------------------------------------------------------------------


def _independent_objective(f, X, y, lam):
    """The non-private Huber SVM objective written out separately from the module's code."""
    z = y * (X @ f)
    loss = np.zeros_like(z)
    mid = np.abs(1 - z) <= 0.5
    loss[mid] = (1.5 - z[mid]) ** 2 / 2.0
    loss[z < 0.5] = 1 - z[z < 0.5]
    return loss.mean() + lam / 2 * f @ f


def test_non_private_fit_is_the_huber_svm_minimiser(rng):
    X, y = _blobs(rng, 60, 3, 2, spread=0.8)
    y = np.where(y == 1, 1.0, -1.0)
    f = fit_dp_svm(X, y, epsilon=math.inf, lam=0.1, rng=rng)
    ref = scipy.optimize.minimize(
        _independent_objective,
        np.ones(3),
        args=(X, y, 0.1),
        method="Powell",
        options={"xtol": 1e-12, "ftol": 1e-15, "maxiter": 100000},
    )
    assert np.allclose(f, ref.x, atol=1e-5)
    assert _independent_objective(f, X, y, 0.1) <= ref.fun + 1e-12
    assert np.max(np.abs(objective_gradient(f, X, y, 0.1, np.zeros(3), 0.0))) < 1e-8


@pytest.mark.parametrize("epsilon, lam", [(2.0, 0.1), (0.1, 0.01)])  # Delta = 0 and Delta > 0 branches
def test_private_fit_is_within_the_amp_radius_of_the_perturbed_minimiser(rng, epsilon, lam):
    """The release is (a point within r of the exact minimiser of J with Theorem 9's b) + AMP's output
    noise; the same generator reproduces both draws."""
    X, y = _blobs(rng, 80, 4, 2)
    y = np.where(y == 1, 1.0, -1.0)
    f = fit_dp_svm(X, y, epsilon=epsilon, lam=lam, rng=np.random.default_rng(11))
    rate, Delta = privacy_adjustment((1 - AMP_FRACTION) * epsilon, 80, lam)
    draws = np.random.default_rng(11)
    b = sample_b(4, 2 * rate, draws)  # density ~ exp(-rate ||b||)
    v = AMP_RADIUS * sample_b(4, AMP_FRACTION * epsilon, draws)
    # ||grad J|| <= mu r at the solver's point p; the release rounds p + v to AMP's grid L, so f - v is within
    # L/2 per coordinate of p, and J's gradient is (mu + c)-Lipschitz (c = 1/(2h) = 1)
    grid = AmpOutputNoise(epsilon=AMP_FRACTION * epsilon, d=4).output_grid.grid
    slack = (lam + Delta + 1.0) * math.sqrt(4) * grid / 2
    assert np.all(f == np.rint(f / grid) * grid)
    assert np.linalg.norm(objective_gradient(f - v, X, y, lam, b, Delta)) <= (lam + Delta) * AMP_RADIUS + slack
    assert 0 < np.linalg.norm(v) and not np.allclose(f, fit_dp_svm(X, y, epsilon=math.inf, lam=lam, rng=rng))


def test_huge_noise_still_releases_after_the_public_steps():
    """Totality (issue 20, finding 2): at a tiny epsilon the noise b is huge (L-BFGS used to give up on it);
    the solver starts at the noise's own minimiser and runs its public steps, so the release is finite and
    debited, never refused, whatever the rows."""
    X, y = _blobs(np.random.default_rng(0), 300, 21, 10)
    W, eps = fit_dp_svm_ovr(X, y, 10, epsilon=0.01, lam=0.01, rng=np.random.default_rng(5))
    assert np.all(np.isfinite(W)) and np.isclose(eps.sum(), 0.01) and np.max(np.abs(W)) > 1.0


def test_accelerated_steps_reach_the_radius_on_a_quadratic():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((6, 6))
    H = A @ A.T + 0.5 * np.eye(6)
    eig = np.linalg.eigvalsh(H)
    target = rng.standard_normal(6) * 100
    start = rng.standard_normal(6)
    distance = float(np.linalg.norm(H @ (start - target))) / eig[0]  # strong convexity: >= ||start - target||
    x = nesterov_within(lambda x: H @ (x - target), start, mu=eig[0], smooth=eig[-1], start_distance=distance)
    assert np.linalg.norm(x - target) <= AMP_RADIUS
    assert accelerated_steps(100.0, 1.0, 2.0) == 0 and accelerated_steps(100.0, 10.0, 1e-6) > 100
    with pytest.raises(ConfigError):
        nesterov_within(lambda x: x, start, mu=2.0, smooth=1.0, start_distance=1.0)


def test_fit_validates_inputs(rng):
    X, y = np.array([[0.5, 0.5], [0.1, 0.0]]), np.array([1.0, -1.0])
    with pytest.raises(ConfigError, match="norm"):
        fit_dp_svm(X * 3, y, epsilon=1.0, lam=0.1, rng=rng)
    with pytest.raises(ConfigError):
        fit_dp_svm(X, np.array([1.0, 0.0]), epsilon=1.0, lam=0.1, rng=rng)
    with pytest.raises(ConfigError):
        fit_dp_svm(X, y[:1], epsilon=1.0, lam=0.1, rng=rng)
    with pytest.raises(ConfigError):
        fit_dp_svm(X, y, epsilon=1.0, lam=0.0, rng=rng)
    with pytest.raises(ConfigError):
        fit_dp_svm(X, y, epsilon=0.0, lam=0.1, rng=rng)
    with pytest.raises(TypeError):
        fit_dp_svm(X, y, epsilon="1", lam=0.1, rng=rng)


def test_bias_feature_keeps_rows_in_the_ball():
    X = np.array([[1.0, 0.0], [0.0, 0.0]])
    Xb = add_bias_feature(X)
    assert np.allclose(Xb, np.array([[1, 0, 1], [0, 0, 1]]) / math.sqrt(2))
    assert np.all(np.linalg.norm(Xb, axis=1) <= 1 + 1e-15)


def test_ovr_budget_split_sums_to_epsilon2():
    assert np.allclose(ovr_epsilons(0.05, 2), [0.05])
    split = np.asarray(ovr_epsilons(0.05, 10))
    assert split.shape == (10,) and np.allclose(split, 0.005) and split.sum() == pytest.approx(0.05)
    with pytest.raises(ConfigError):
        ovr_epsilons(1.0, 1)


def test_ovr_non_private_separates_blobs(rng):
    X, y = _blobs(rng, 300, 6, 4)
    W, eps = fit_dp_svm_ovr(X, y, 4, epsilon=math.inf, lam=1e-3, rng=rng)
    assert W.shape == (4, 7) and np.all(np.isinf(eps))
    assert np.mean(predict_linear(W, X) == y) > 0.95


def test_ovr_binary_is_one_problem(rng):
    X, y = _blobs(rng, 100, 3, 2)
    W, eps = fit_dp_svm_ovr(X, y, 2, epsilon=0.8, lam=0.05, rng=np.random.default_rng(2))
    assert np.allclose(W[0], -W[1]) and np.allclose(eps, [0.8])
    f = fit_dp_svm(
        add_bias_feature(X), np.where(y == 1, 1.0, -1.0), epsilon=0.8, lam=0.05, rng=np.random.default_rng(2)
    )
    assert np.allclose(W[1], f, atol=1e-6)


def test_ovr_and_predict_validate(rng):
    X, y = _blobs(rng, 20, 3, 3)
    with pytest.raises(ConfigError):
        fit_dp_svm_ovr(X, y + 1, 3, epsilon=1.0, lam=0.1, rng=rng)
    with pytest.raises(ConfigError):
        fit_dp_svm_ovr(X, y.astype(float), 3, epsilon=1.0, lam=0.1, rng=rng)
    with pytest.raises(ConfigError):
        predict_linear(np.zeros((3, 3)), X)


# --- owner release and the whole pipeline --------------------------------------------------------


def _raw_parts(rng, sizes, d=6, n_classes=3):
    X, y = _blobs(rng, sum(sizes), d, n_classes)
    raw = X * 10 + 10  # inside the public bounds [0, 20]
    cuts = np.cumsum(sizes)[:-1]
    return list(zip(np.split(raw, cuts), np.split(y, cuts))), Bounds.of(0, 20, d)


def test_owner_svm_release_shapes(rng):
    parts, bounds = _raw_parts(rng, [50])
    U = np.linalg.qr(rng.standard_normal((6, 2)))[0]
    W, n, eps = owner_svm_release(*parts[0], bounds, U, 3, 0.3, 0.01, rng, delta=0.0, model="ovr-huber")
    assert W.shape == (3, 3) and n == 50 and eps.sum() == pytest.approx(0.3)
    W, _, _ = owner_svm_release(*parts[0], bounds, None, 3, 0.3, 0.01, rng, delta=0.0, model="ovr-huber")
    assert W.shape == (3, 7)
    with pytest.raises(ConfigError, match="orthonormal"):
        owner_svm_release(*parts[0], bounds, 2 * U, 3, 0.3, 0.01, rng, delta=0.0, model="ovr-huber")


@pytest.mark.parametrize("model", SVM_MODELS)
def test_every_model_releases_from_no_rows_and_learns_from_many(model):
    """Total (an owner with no rows still makes its release) and, without noise, accurate."""
    rng = np.random.default_rng(7)
    parts, bounds = _raw_parts(rng, [400])
    X, y = parts[0]
    delta = 0.0 if model == "ovr-huber" else 1e-5
    W, n, eps = owner_svm_release(X[:0], y[:0], bounds, None, 3, 1.0, 0.01, rng, delta=delta, model=model)
    assert W.shape == (3, 7) and n == 0 and np.all(np.isfinite(W)) and eps.sum() == pytest.approx(1.0)
    W, _, _ = owner_svm_release(X, y, bounds, None, 3, math.inf, 1e-3, rng, delta=delta, model=model)
    if model == "centroid":
        from privfed.common.feddpdr.centroid import centroid_coef

        W = centroid_coef(W, 0.0)
    from privfed.common.feddpdr.pca import scale_rows

    assert np.mean(predict_linear(W, scale_rows(X, bounds)) == y) > 0.9
    if model != "ovr-huber":  # an (epsilon, delta) model needs the delta that is debited for it
        with pytest.raises(ConfigError, match="delta"):
            owner_svm_release(X, y, bounds, None, 3, 1.0, 0.01, rng, delta=0.0, model=model)
