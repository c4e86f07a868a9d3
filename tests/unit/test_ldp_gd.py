"""LDP gradient descent for logistic regression (issue 22 item 4; Wang et al. ICDE 2019 §V)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.ldp_gd import LdpGradientDescent, gd_mechanism, gradient_shares, logistic_gradients

BOUNDS = Bounds(np.array([0.0, -5.0, 0.0]), np.array([10.0, 5.0, 1000.0]))


def data(rng, n=3000, k=2):
    y = rng.integers(0, k, n)
    centres = np.array([[3.0, -1.0, 300.0], [7.0, 1.0, 700.0], [5.0, 3.0, 200.0]])[:k]
    X = np.clip(centres[y] + rng.normal(scale=[1.5, 1.5, 150.0], size=(n, 3)), BOUNDS.lo, BOUNDS.hi)
    return X, y


@pytest.mark.parametrize("k", [2, 3])
def test_every_gradient_coordinate_lies_in_the_mechanism_domain_whatever_the_model(rng, k):
    X, y = data(rng, n=500, k=k)
    theta = rng.normal(scale=50.0, size=(1 if k == 2 else k, 4))  # any public model a coordinator sends
    g = logistic_gradients(theta, BOUNDS.to_unit(X), y, k)
    assert g.shape == (500, theta.size) and np.all(np.abs(g) <= 1.0)


def test_a_two_class_gradient_is_the_residual_times_the_row():
    t = np.array([[0.5, -1.0, 0.25]])
    theta = np.array([[1.0, 2.0, -4.0, 0.5]])
    z = 0.5 * 1.0 - 2.0 - 4.0 * 0.25 + 0.5
    expected = (1.0 / (1.0 + math.exp(-z)) - 1.0) * np.array([0.5, -1.0, 0.25, 1.0])
    np.testing.assert_allclose(logistic_gradients(theta, t, np.array([1]), 2)[0], expected, rtol=1e-12)


def test_a_gradient_report_spends_its_epsilon_on_one_coordinate_with_less_noise_than_the_papers_rule(rng):
    X, y = data(rng, n=20000, k=3)
    g = logistic_gradients(np.zeros((3, 4)), BOUNDS.to_unit(X), y, 3)  # the first step's gradients, |g_j| <= 2/3
    ours, paper = gd_mechanism("pm", epsilon=5.0, p=12), gd_mechanism("pm", epsilon=5.0, p=12, attributes=None)
    assert (ours.k, ours.attribute_epsilon, paper.k) == (1, 5.0, 2)
    squared = []
    for mech in (ours, paper):
        reports = mech.privatize(g, rng)
        assert np.count_nonzero(reports, axis=1).max() <= mech.k
        err = reports - g
        se = err.std(axis=0, ddof=1) / math.sqrt(len(g))
        assert np.all(np.abs(err.mean(axis=0)) < 5.0 * se)  # unbiased
        squared.append((err**2).mean())
        np.testing.assert_allclose(squared[-1], mech.variance(g).mean(), rtol=0.05)  # the closed form
    assert squared[0] < 0.6 * squared[1]


def test_noisier_reports_take_smaller_steps_unless_the_step_is_given():
    reports, theta = np.ones((4, 4)), np.zeros((1, 4))  # the same mean gradient 1 at every budget
    moves = [
        -LdpGradientDescent(epsilon=eps, n_classes=2, bounds=BOUNDS, param_bound=100.0).step(theta, reports, 0)[0, 0]
        for eps in (0.5, 1.0, 3.0, 5.0, 8.0, 20.0)
    ]
    assert moves == sorted(moves) and moves[0] < moves[-1] and moves[-1] == moves[-2]  # grows with eps, then capped
    fixed = LdpGradientDescent(epsilon=1.0, n_classes=2, bounds=BOUNDS, param_bound=100.0, learning_rate=5.0)
    assert fixed.step(theta, reports, 0)[0, 0] == pytest.approx(-5.0)
    noiseless = LdpGradientDescent(epsilon=math.inf, n_classes=2, bounds=BOUNDS, param_bound=100.0)
    assert 0 < -noiseless.step(theta, reports, 0)[0, 0] < moves[-1]


def test_noiseless_descent_from_one_row_per_owner_matches_logistic_regression(rng):
    X, y = data(rng)
    model = LdpGradientDescent(epsilon=math.inf, n_classes=2, bounds=BOUNDS).fit(X, y, rng=rng)
    Xt, yt = data(rng, n=2000)
    ref = LogisticRegression().fit(BOUNDS.to_unit(X), y).score(BOUNDS.to_unit(Xt), yt)
    assert model.score(Xt, yt) > ref - 0.02


def test_private_descent_learns_with_one_row_per_owner_and_is_seeded(rng):
    X, y = data(rng, n=4000, k=3)
    gd = LdpGradientDescent(epsilon=4.0, n_classes=3, bounds=BOUNDS)
    a = gd.fit(X, y, rng=np.random.default_rng(1))
    b = gd.fit(X, y, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert gd.iterations(4000) == 8 and len(gd.plan(4000, rng)) == 8
    Xt, yt = data(rng, n=2000, k=3)
    assert a.score(Xt, yt) > 0.6  # chance 1/3


def test_owners_of_several_rows_report_their_mean_gradient_once(rng):
    X, y = data(rng, n=600)
    owners = np.array_split(rng.permutation(600), 60)
    gd = LdpGradientDescent(epsilon=math.inf, n_classes=2, bounds=BOUNDS, n_iterations=3)
    model = gd.fit(X, y, owners=owners, rng=np.random.default_rng(0))
    assert np.all(np.isfinite(model.coef_)) and model.score(X, y) > 0.8
    assert sum(len(g) for g in gd.plan(60, rng)) == 60  # every owner in exactly one iteration


def test_padded_rows_are_masked_out_of_each_owners_mean(rng):
    """``counts``: owners of 5 and 2 rows padded to 8 report the mean of their own rows, and an owner of no own row
    the gradient 0; counts outside ``[0, n]`` are refused."""
    theta = rng.uniform(-1, 1, (1, BOUNDS.d + 1))
    X, y = data(rng, n=8)
    mech = gd_mechanism("pm", epsilon=math.inf, p=BOUNDS.d + 1)
    Xs, ys = np.stack([X, X, X]), np.stack([y, y, y])
    out = gradient_shares(theta, Xs, ys, bounds=BOUNDS, n_classes=2, mechanism=mech, rng=rng, counts=[5, 2, 0])
    for report, n in zip(out, (5, 2), strict=False):
        want = logistic_gradients(theta, BOUNDS.to_unit(X[:n]), y[:n], 2).mean(axis=0)
        np.testing.assert_allclose(report, np.clip(want, -1, 1), atol=1e-12)
    np.testing.assert_array_equal(out[2], 0.0)
    for bad in ([9, 0, 0], [-1, 0, 0], [1, 1]):
        with pytest.raises(ConfigError, match="counts"):
            gradient_shares(theta, Xs, ys, bounds=BOUNDS, n_classes=2, mechanism=mech, rng=rng, counts=bad)


@pytest.mark.parametrize(
    "params",
    [dict(epsilon=0.0), dict(mechanism="gauss"), dict(n_iterations=0), dict(learning_rate=-1.0), dict(l2=-1.0),
     dict(param_bound=0.0), dict(bounds=(0.0, 1.0)), dict(min_group=0), dict(attributes=0)],
)  # fmt: skip
def test_invalid_parameters_are_refused(params):
    with pytest.raises(ConfigError):
        LdpGradientDescent(**(dict(epsilon=1.0, n_classes=2, bounds=BOUNDS) | params))
