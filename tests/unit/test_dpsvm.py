"""Objective-perturbed Huber SVM and the FedDPDR-DPML pipeline (SPEC §8, §9; seed 004 Alg. 1, 3)."""

import math

import numpy as np
import pytest
import scipy.optimize

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.svm import (
    add_bias_feature,
    feddpdr_fit,
    fit_dp_svm,
    fit_dp_svm_ovr,
    huber_hinge,
    huber_hinge_derivative,
    objective,
    objective_gradient,
    ovr_epsilons,
    owner_svm_release,
    predict_linear,
    privacy_adjustment,
    sample_b,
)
from privfed.common.mechanisms.gaussian import standard_normal


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
    "epsilon, n, lam, eps_prime, delta_reg",
    [
        (1, 1000, 0.01, 0.809380, 0.0),
        (0.1, 1000, 0.001, 0.05, 0.038502),
        (1, 100, 0.001, 0.5, 0.034208),
        (0.5, 10000, 1e-4, 0.25, 0.000651),
    ],
)
def test_privacy_adjustment_table(epsilon, n, lam, eps_prime, delta_reg):
    got_eps, got_delta = privacy_adjustment(epsilon, n, lam)
    assert got_eps == pytest.approx(eps_prime, abs=1e-6)
    assert got_delta == pytest.approx(delta_reg, abs=1e-6)


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
def test_private_fit_minimises_the_perturbed_objective(rng, epsilon, lam):
    X, y = _blobs(rng, 80, 4, 2)
    y = np.where(y == 1, 1.0, -1.0)
    f = fit_dp_svm(X, y, epsilon=epsilon, lam=lam, rng=np.random.default_rng(11))
    eps_prime, Delta = privacy_adjustment(epsilon, 80, lam)
    b = sample_b(4, eps_prime, np.random.default_rng(11))  # the same draw the fit made
    assert np.max(np.abs(objective_gradient(f, X, y, lam, b, Delta))) < 1e-6
    assert not np.allclose(f, fit_dp_svm(X, y, epsilon=math.inf, lam=lam, rng=rng))


def test_heavily_noised_fit_is_still_an_exact_minimiser():
    """Large b makes L-BFGS stop short on float resolution (here at 6e-8 x scale); the Newton polish
    must finish the job."""
    X, y = _blobs(np.random.default_rng(0), 300, 21, 10)
    W, _ = fit_dp_svm_ovr(X, y, 10, epsilon=0.01, lam=0.01, rng=np.random.default_rng(5))
    eps_prime, Delta = privacy_adjustment(0.001, 300, 0.01)
    B = sample_b(22, eps_prime, np.random.default_rng(5), size=10)  # the same draws the fit made
    Xb = add_bias_feature(X)
    scale = 1 + np.abs(B).max() / 300
    for k in range(10):
        g = objective_gradient(W[k], Xb, np.where(y == k, 1.0, -1.0), 0.01, B[k], Delta)
        assert np.max(np.abs(g)) < 1e-9 * scale


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
    split = ovr_epsilons(0.05, 10)
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
    W, n, eps = owner_svm_release(*parts[0], bounds, U, 3, 0.3, 0.01, rng)
    assert W.shape == (3, 3) and n == 50 and eps.sum() == pytest.approx(0.3)
    W, _, _ = owner_svm_release(*parts[0], bounds, None, 3, 0.3, 0.01, rng)
    assert W.shape == (3, 7)
    with pytest.raises(ConfigError, match="orthonormal"):
        owner_svm_release(*parts[0], bounds, 2 * U, 3, 0.3, 0.01, rng)


def test_feddpdr_non_private_pipeline_learns(rng):
    parts, bounds = _raw_parts(rng, [60, 150, 90])
    model = feddpdr_fit(parts, bounds, 3, math.inf, 1e-5, math.inf, 1e-3, rng, n_classes=3)
    X = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    assert model.components.shape == (6, 3) and model.coef.shape == (3, 4)
    assert model.owner_sizes == (60, 150, 90)
    assert model.score(X, y) > 0.95


def test_feddpdr_is_reproducible_and_private_runs_differ(rng):
    parts, bounds = _raw_parts(rng, [40, 40])
    fit = lambda seed: feddpdr_fit(parts, bounds, 2, 0.5, 1e-5, 0.5, 0.01, np.random.default_rng(seed), n_classes=3)
    a, b, c = fit(1), fit(1), fit(2)
    assert np.array_equal(a.coef, b.coef) and np.array_equal(a.components, b.components)
    assert not np.allclose(a.coef, c.coef)
    assert a.per_class_epsilon.sum() == pytest.approx(0.5)


# --- multiclass objective perturbation with one budget (fit_dp_softmax) -------------------------

from privfed.common.feddpdr.svm import (  # noqa: E402
    SOFTMAX_GRADIENT_BOUND,
    _softmax_joint,
    fit_dp_softmax,
    softmax_noise_sigma,
    softmax_privacy_split,
)


def _softmax_row_grad(F, x, y):
    s = F @ x
    p = np.exp(s - s.max())
    p /= p.sum()
    p[y] -= 1.0
    return np.outer(p, x), p


def _unit(rng, d):
    v = rng.standard_normal(d)
    return v / np.linalg.norm(v) * rng.uniform(0.5, 1.0) ** (1 / d)


def test_softmax_gradient_sensitivity_is_at_most_2_sqrt2():
    """max over random neighbouring rows and parameters of ||grad_new - grad_old||_F <= 2 sqrt(2),
    and the check is not vacuous: opposite rows, each sure of a wrong class, reach sqrt(6)."""
    rng = np.random.default_rng(0)
    K, d, worst = 10, 6, 0.0
    for _trial in range(4000):
        F = rng.standard_normal((K, d)) * rng.choice([0.1, 1.0, 10.0, 100.0])
        x, x2 = _unit(rng, d), _unit(rng, d)
        g1, _ = _softmax_row_grad(F, x, rng.integers(K))
        g2, _ = _softmax_row_grad(F, x2, rng.integers(K))
        worst = max(worst, np.linalg.norm(g1 - g2))
    assert worst <= 2 * SOFTMAX_GRADIENT_BOUND + 1e-12
    x = np.eye(d)[0]
    F = np.zeros((K, d))
    F[2, 0] = 50.0
    F[3, 0] = -50.0
    g1, _ = _softmax_row_grad(F, x, 0)  # p = e_2, label 0
    g2, _ = _softmax_row_grad(F, -x, 0)  # p = e_3, label 0
    assert np.linalg.norm(g1 - g2) > math.sqrt(6) - 1e-6


def test_softmax_jacobian_ratio_is_at_most_exp_1_over_n_lambda():
    """log det(n Lam I + sum H) changes by at most 1/(n Lam) when one row is replaced (no factor K)."""
    rng = np.random.default_rng(1)
    K, d, n, lam = 4, 3, 6, 0.05
    worst = 0.0
    for _trial in range(300):
        X = np.array([_unit(rng, d) for _ in range(n)])
        y = rng.integers(K, size=n)
        x_new, y_new = _unit(rng, d), rng.integers(K)
        F = rng.standard_normal((K, d)) * rng.choice([0.1, 1.0, 3.0])

        def hessian(rows, labels):
            H = n * lam * np.eye(K * d)
            for x, _ in zip(rows, labels):
                s = F @ x
                p = np.exp(s - s.max())
                p /= p.sum()
                H += np.kron(np.diag(p) - np.outer(p, p), np.outer(x, x))
            return H

        X2 = X.copy()
        X2[0] = x_new
        y2 = y.copy()
        y2[0] = y_new
        a = np.linalg.slogdet(hessian(X, y))[1]
        b = np.linalg.slogdet(hessian(X2, y2))[1]
        worst = max(worst, abs(a - b) * n * lam)
    assert worst <= 1.0 + 1e-9
    assert worst > 0.1  # the check is not vacuous


def test_softmax_noise_sigma_meets_its_condition():
    from scipy.stats import chi2

    for eps, delta, K in [(0.5, 1e-5, 10), (0.1, 1e-6, 2), (3.0, 1e-5, 26)]:
        s = softmax_noise_sigma(eps, delta, K)
        q = math.sqrt(chi2.isf(delta / 2, K))
        assert math.isclose(2 * math.sqrt(2) * q / s + 4 / s**2, eps, rel_tol=1e-9)
    assert softmax_noise_sigma(math.inf, 1e-5, 10) == 0.0
    # on the 1 - delta event the log density ratio of the noise is below eps_noise for every F
    rng = np.random.default_rng(2)
    K, d, eps, delta = 5, 4, 0.5, 1e-3
    sigma = softmax_noise_sigma(eps, delta, K)
    q = math.sqrt(chi2.isf(delta / 2, K))
    for _ in range(500):
        B = rng.standard_normal((K, d)) * sigma
        x, x2 = _unit(rng, d), _unit(rng, d)
        if np.linalg.norm(B @ x) > sigma * q or np.linalg.norm(B @ x2) > sigma * q:
            continue
        F = rng.standard_normal((K, d)) * 5
        s = _softmax_row_grad(F, x, rng.integers(K))[0] - _softmax_row_grad(F, x2, rng.integers(K))[0]
        loss = (np.linalg.norm(B + s) ** 2 - np.linalg.norm(B) ** 2) / (2 * sigma**2)
        assert abs(loss) <= eps + 1e-12


def test_softmax_privacy_split_adds_up():
    for eps, n, lam in [(0.625, 800, 0.01), (0.1, 800, 0.01), (2.0, 4000, 0.001)]:
        eps_j, eps_b, Delta = softmax_privacy_split(eps, n, lam)
        assert math.isclose(eps_j + eps_b, eps) and Delta >= 0
        assert eps_j <= 1.0 / (n * (lam + Delta)) + 1e-15
    assert softmax_privacy_split(0.625, 800, 0.01) == (0.125, 0.5, 0.0)
    assert softmax_privacy_split(math.inf, 10, 0.1) == (0.0, math.inf, 0.0)


def test_fit_dp_softmax_is_the_exact_minimiser_and_learns():
    rng = np.random.default_rng(3)
    X, y = _blobs(rng, 600, 5, 4)
    Xb = add_bias_feature(X)
    F, info = fit_dp_softmax(Xb, y, 4, epsilon=math.inf, delta=1e-5, lam=1e-3, rng=rng)
    assert np.mean(np.argmax(Xb @ F.T, 1) == y) > 0.95 and info["sigma"] == 0
    F, info = fit_dp_softmax(Xb, y, 4, epsilon=2.0, delta=1e-5, lam=1e-2, rng=np.random.default_rng(4))
    # recover B from the stationarity condition: it is Gaussian noise of scale sigma, so F is the argmin
    B = standard_normal(np.random.default_rng(4), F.shape) * info["sigma"]  # the float-safe sampler (SPEC §12)
    grad = _softmax_joint(F.ravel(), Xb, y, 4, 1e-2 + info["Delta"], B)[1]
    assert np.max(np.abs(grad)) < 1e-6 * (1 + np.max(np.abs(B)) / 600)
    with pytest.raises(ConfigError):
        fit_dp_softmax(Xb, y + 4, 4, epsilon=1.0, delta=1e-5, lam=0.1, rng=rng)


def test_owner_svm_release_keeps_its_positional_api():
    rng = np.random.default_rng(5)
    bounds = Bounds.of(-1.0, 1.0, 4)
    X = rng.uniform(-1, 1, (50, 4))
    y = rng.integers(0, 3, 50)
    W, n, eps_each = owner_svm_release(X, y, bounds, None, 3, 1.0, 0.1, rng)  # the handlers' call
    assert W.shape == (3, 5) and n == 50 and math.isclose(eps_each.sum(), 1.0)
    W, n, eps_each = owner_svm_release(X, y, bounds, None, 3, 1.0, 0.1, rng, model="softmax", delta=1e-5)
    assert W.shape == (3, 5) and list(eps_each) == [1.0]
    with pytest.raises(ConfigError):
        owner_svm_release(X, y, bounds, None, 3, 1.0, 0.1, rng, model="softmax")  # delta must be debited
