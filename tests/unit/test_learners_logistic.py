"""Logistic regression from perturbed local models (seed 002 §3.5.2): eps = inf vs scikit-learn, single-class owners."""

import json
import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.estimators import LdpLogisticRegression
from privfed.common.learners.logistic import (
    LinearModel,
    clip_parameters,
    fit_local_logistic,
    lr_aggregate,
    lr_share,
    n_parameters,
)
from privfed.common.mechanisms import make_mechanism

INF = math.inf
BOUNDS = Bounds(np.array([-5.0, -5.0, -2.0]), np.array([5.0, 7.0, 2.0]))


def data(rng, n=300, k=2):
    y = rng.integers(0, k, n)
    centres = np.array([[0.0, 0.0, 0.0], [1.5, 1.0, 0.5], [-1.0, 2.0, -0.5]])[:k]
    X = rng.normal(size=(n, 3)) + centres[y]
    return np.clip(X, BOUNDS.lo, BOUNDS.hi), y


def liblinear(C):
    """scikit-learn's liblinear solver regularises the intercept like ours (intercept_scaling=1)."""
    return LogisticRegression(solver="liblinear", C=C, tol=1e-12, max_iter=10000)


# Tolerance: liblinear (tol=1e-12) and our trust-ncg (gtol=1e-9 on the 1/(C n)-scaled objective)
# stop at different points of the same strongly convex optimum; 1e-5 absolute on parameters of
# size ~0.1-3 is well above either stopping error; a different objective (another C, or an
# unregularised intercept) moves the optimum far more.
@pytest.mark.parametrize("C", [0.05, 1.0, 20.0])
def test_binary_matches_sklearn_liblinear(rng, C):
    X, y = data(rng)
    theta = fit_local_logistic(X, y, bounds=BOUNDS, n_classes=2, C=C)
    ref = liblinear(C).fit(BOUNDS.to_unit(X), y)
    assert theta.shape == (4,)
    np.testing.assert_allclose(theta[:3], ref.coef_[0], atol=1e-5)
    assert theta[3] == pytest.approx(ref.intercept_[0], abs=1e-5)


def test_logistic_function_matches_scipy_expit():
    """fit_local_logistic's numpy sigmoid (no scipy.special on the owner path) is expit to rounding."""
    from scipy.special import expit

    from privfed.common.learners.newton import expit as numpy_expit

    z = np.concatenate([np.linspace(-50, 50, 2001), [-1e308, -800.0, -37.0, 0.0, 37.0, 800.0, 1e308]])
    np.testing.assert_allclose(numpy_expit(z), expit(z), rtol=1e-15, atol=0)


def test_multiclass_one_vs_rest_matches_sklearn(rng):
    X, y = data(rng, k=3)
    theta = fit_local_logistic(X, y, bounds=BOUNDS, n_classes=3, C=2.0).reshape(3, 4)
    ref = OneVsRestClassifier(liblinear(2.0)).fit(BOUNDS.to_unit(X), y)
    for k, est in enumerate(ref.estimators_):
        np.testing.assert_allclose(theta[k, :3], est.coef_[0], atol=1e-5)
        assert theta[k, 3] == pytest.approx(est.intercept_[0], abs=1e-5)


def test_estimator_eps_inf_one_owner_matches_sklearn(rng):
    X, y = data(rng, k=3)
    labels = np.array(["p", "q", "r"])[y]
    ours = LdpLogisticRegression(
        epsilon=INF, param_bound=100.0, C=1.0, n_owners=1, solver="local", bounds=BOUNDS, random_state=0
    ).fit(X, labels)
    ref = OneVsRestClassifier(liblinear(1.0)).fit(BOUNDS.to_unit(X), labels)
    np.testing.assert_allclose(ours.coef_, np.vstack([e.coef_ for e in ref.estimators_]), atol=1e-5)
    Xt, _ = data(rng, n=500, k=3)
    assert np.mean(ours.predict(Xt) == ref.predict(BOUNDS.to_unit(Xt))) > 0.99
    assert ours.score(X, labels) == pytest.approx(ref.score(BOUNDS.to_unit(X), labels), abs=0.01)


def test_estimator_many_owners_averages_local_models(rng):
    X, y = data(rng)
    est = LdpLogisticRegression(
        epsilon=INF, param_bound=50.0, n_owners=5, solver="local", bounds=BOUNDS, random_state=4
    ).fit(X, y)
    parts = np.array_split(np.random.Generator(np.random.PCG64(4)).permutation(len(y)), 5)
    mean = np.mean([fit_local_logistic(X[p], y[p], bounds=BOUNDS, n_classes=2) for p in parts], axis=0)
    np.testing.assert_allclose(est.coef_[0], mean[:3], atol=1e-9)
    assert est.intercept_[0] == pytest.approx(mean[3], abs=1e-9)
    assert est.decision_function(X).shape == (len(y),)


def test_finite_epsilon_is_seeded(rng):
    X, y = data(rng, n=2000)
    params = dict(epsilon=2.0, param_bound=2.0, n_owners=100, solver="local", bounds=BOUNDS)
    a = LdpLogisticRegression(**params, random_state=1).fit(X, y)
    b = LdpLogisticRegression(**params, random_state=1).fit(X, y)
    c = LdpLogisticRegression(**params, random_state=2).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.array_equal(a.coef_, c.coef_)
    assert a.score(X, y) > 0.6
    mech = make_mechanism("pm", epsilon=2.0, d=4)
    report = lr_share(np.ones(4) * 10.0, param_bound=2.0, mechanism=mech, rng=rng)
    lo, hi = mech.output_bounds
    assert report.shape == (4,) and np.all((report >= lo) & (report <= hi))


def test_single_class_owner(rng):
    X, _ = data(rng, n=50)
    theta = fit_local_logistic(X, np.zeros(50, int), bounds=BOUNDS, n_classes=2)
    assert np.all(np.isfinite(theta)) and theta[3] < 0
    model = LinearModel(theta[:3], theta[3:], BOUNDS)
    assert np.all(model.predict(X) == 0)
    theta3 = fit_local_logistic(X, np.ones(50, int), bounds=BOUNDS, n_classes=3).reshape(3, 4)
    assert np.all(np.isfinite(theta3)) and theta3[1, 3] > 0 > theta3[0, 3]
    # an owner with a single class inside a federation: the estimator still fits
    y = (np.arange(60) >= 30).astype(int)
    Xs = np.vstack([X[:30], X[:30] + 1.0])
    est = LdpLogisticRegression(epsilon=INF, n_owners=2, bounds=BOUNDS, random_state=0)
    est.fit(Xs[np.argsort(y, kind="stable")], np.sort(y))
    assert np.all(np.isfinite(est.coef_))


def test_sample_weight_zero_drops_rows(rng):
    X, y = data(rng, n=120)
    w = np.ones(120)
    w[:40] = 0.0
    np.testing.assert_allclose(
        fit_local_logistic(X, y, bounds=BOUNDS, n_classes=2, sample_weight=w, weight_bound=1.0),
        fit_local_logistic(X[40:], y[40:], bounds=BOUNDS, n_classes=2),
        atol=1e-7,
    )


def test_sample_weights_are_clipped_to_their_public_bound_which_they_need(rng):
    """Weights above ``weight_bound`` fit as the bound (the Newton steps are the bound's: a row's weight, which a
    coordinator's boosting history shapes, does not show in the work); weights without a bound are refused."""
    X, y = data(rng, n=60)
    heavy, at_bound = np.full(60, 1.0), np.full(60, 1.0)
    heavy[:10], at_bound[:10] = 2.0**500, 3.0
    np.testing.assert_array_equal(
        fit_local_logistic(X, y, bounds=BOUNDS, n_classes=2, sample_weight=heavy, weight_bound=3.0),
        fit_local_logistic(X, y, bounds=BOUNDS, n_classes=2, sample_weight=at_bound, weight_bound=3.0),
    )
    with pytest.raises(ConfigError, match="public bound"):
        fit_local_logistic(X, y, bounds=BOUNDS, n_classes=2, sample_weight=heavy)


def test_share_clips_and_scales(rng):
    theta = np.array([0.5, -3.0, 2.0, 0.1])
    np.testing.assert_array_equal(clip_parameters(theta, 1.0), [0.5, -1.0, 1.0, 0.1])
    report = lr_share(theta, param_bound=2.0, mechanism=make_mechanism("pm", epsilon=INF, d=4), rng=rng)
    np.testing.assert_allclose(report, [0.25, -1.0, 1.0, 0.05])
    with pytest.raises(ConfigError):
        lr_share(theta, param_bound=2.0, mechanism=make_mechanism("pm", epsilon=INF, d=5), rng=rng)
    with pytest.raises(ConfigError):
        clip_parameters(theta, 0.0)
    with pytest.raises(ConfigError):
        clip_parameters([np.nan], 1.0)


def test_aggregate_shapes_and_mean():
    reports = np.array([[0.5, -0.5, 0.0, 1.0], [0.0, 0.5, 1.0, -1.0]])
    model = lr_aggregate(reports, param_bound=2.0, n_classes=2, bounds=BOUNDS)
    np.testing.assert_allclose(model.coef_, [[0.5, 0.0, 1.0]])
    np.testing.assert_allclose(model.intercept_, [0.0])
    assert n_parameters(4, 3) == 16
    model4 = lr_aggregate(np.zeros((3, 16)), param_bound=1.0, n_classes=4, bounds=BOUNDS)
    assert model4.coef_.shape == (4, 3) and model4.intercept_.shape == (4,)
    with pytest.raises(ConfigError):
        lr_aggregate(np.zeros((3, 5)), param_bound=1.0, n_classes=2, bounds=BOUNDS)
    with pytest.raises(ConfigError):
        lr_aggregate(np.zeros((0, 4)), param_bound=1.0, n_classes=2, bounds=BOUNDS)


def test_linear_stage_in_unit_and_data_space(rng):
    model = LinearModel([[1.0, -2.0, 0.5], [0.0, 1.0, 1.0], [2.0, 0.0, -1.0]], [0.1, -0.2, 0.0], BOUNDS)
    X = rng.uniform(BOUNDS.lo, BOUNDS.hi, size=(100, 3))
    coef, intercept = model.linear_stage
    np.testing.assert_allclose(model.decision_function(X), BOUNDS.to_unit(X) @ coef.T + intercept)
    coef_x, intercept_x = model.data_linear_stage
    np.testing.assert_allclose(model.decision_function(X), X @ coef_x.T + intercept_x, atol=1e-12)
    restored = LinearModel.from_dict(json.loads(json.dumps(model.to_dict())))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    assert np.array_equal(np.argmax(model.decision_function(X), axis=1), model.predict(X))


def test_binary_predict_threshold_at_zero():
    model = LinearModel([[1.0, 0.0, 0.0]], [0.0], BOUNDS, classes=np.array(["neg", "pos"]))
    X = np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # t_0 = 0.2, -0.2, 0.0
    assert model.predict(X).tolist() == ["pos", "neg", "neg"]


def expected_failures(estimator):
    if math.isfinite(estimator.epsilon):
        return {
            "check_classifiers_train": "DP: LDP noise at eps = 1 on the check's ~100 rows keeps accuracy "
            "below the 0.83 the check demands"
        }
    if estimator.solver == "gd":
        return {
            "check_classifiers_train": "gradient descent from one row per owner takes at most one step per "
            "owner; the check's rows fill 1 % of the bounds, so the weights it needs are out of reach"
        }
    return {}


@parametrize_with_checks(
    [
        # local models: the check's rows fill 1 % of these bounds, so the unit-space weights it needs (~100)
        # are out of reach of gradient descent's few steps; the local solver fits them exactly
        LdpLogisticRegression(epsilon=INF, param_bound=100.0, solver="local", bounds=(-100.0, 100.0), random_state=0),
        LdpLogisticRegression(epsilon=INF, bounds=(-100.0, 100.0), random_state=0),
        LdpLogisticRegression(epsilon=1.0, param_bound=5.0, bounds=(-100.0, 100.0), random_state=0),
    ],
    expected_failed_checks=expected_failures,
)
def test_sklearn_estimator_contract(estimator, check):
    """scikit-learn's estimator checks (STYLE rule 6); scalar bounds fit every width the checks use."""
    check(estimator)


def test_bounds_missing_raises(rng):
    X, y = data(rng)
    with pytest.raises(ConfigError, match="bounds is required"):
        LdpLogisticRegression(epsilon=INF).fit(X, y)


@pytest.mark.parametrize(
    "params",
    [
        dict(epsilon=0.0),
        dict(mechanism="gauss"),
        dict(param_bound=0.0),
        dict(param_bound=INF),
        dict(C=-1.0),
        dict(n_owners=0),
        dict(bounds="wide"),
        dict(random_state=1.5),
    ],
)
def test_invalid_params_raise(rng, params):
    X, y = data(rng)
    params.setdefault("bounds", BOUNDS)
    with pytest.raises(InvalidParameterError):
        LdpLogisticRegression(**params).fit(X, y)


def test_invalid_fit_inputs(rng):
    X, y = data(rng, n=20)
    with pytest.raises(ConfigError):
        LdpLogisticRegression(epsilon=INF, n_owners=21, bounds=BOUNDS).fit(X, y)
    with pytest.raises(ConfigError):
        LdpLogisticRegression(epsilon=INF, bounds=BOUNDS).fit(X, np.zeros(20, int))
    for kwargs in (dict(n_classes=1), dict(n_classes=2, C=0.0), dict(n_classes=2, sample_weight=-np.ones(20))):
        with pytest.raises(ConfigError):
            fit_local_logistic(X, y, bounds=BOUNDS, **kwargs)
    with pytest.raises(ConfigError):
        fit_local_logistic(X, y + 1, bounds=BOUNDS, n_classes=2)
