"""LDP gradient descent's coordinator side (common/learners/ldp_gd.py L261-347): behaviours the mutation round 6
found untested.

- ``report_mechanism`` (the one every owner's report goes through in :meth:`LdpGradientDescent.fit`) is built at the
  learner's own ε: a mechanism at 2ε passed (each report spending twice the owner's budget).
- ``step_size``'s default ``η = min(ε, MAX_LEARNING_RATE)`` (``NOISELESS_LEARNING_RATE`` at ε = ∞): the first step
  from θ = 0 moves by exactly η times the mean report; ``min(2ε, 8)`` passed (every test at ε >= 8 or a given η).
- ``iterations`` plans a descent for a single owner (refused by a mutant) and refuses zero owners; its default
  plan (``min(MAX_ITERATIONS, max(1, n // min_group))`` groups, never more than the owners) keeps at least
  ``min_group`` owners in every group when there are that many and no group empty (mutants planned 0 groups below
  ``min_group`` owners, 2 groups below ``2 min_group``, a float T, or more groups than owners).
- ``step`` refuses an empty group's reports and reports of another width as a ConfigError (a NaN model or a
  reshape crash otherwise), and clips every parameter to ``±param_bound`` (dropping the clip passed).
- ``descend``/``model``: the model is the average of the iterates after the first step (every averaging mutant
  passed), a group without a report leaves θ where it was (a mutant stepped on its empty reports), and a descent
  in which no group reported raises RoundFailed (mutants returned the zero model).
"""

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RoundFailed
from privfed.common.learners.ldp_gd import (
    GD_MECHANISMS,
    MAX_ITERATIONS,
    MAX_LEARNING_RATE,
    MIN_GROUP,
    NOISELESS_ITERATIONS,
    NOISELESS_LEARNING_RATE,
    LdpGradientDescent,
    gd_mechanism,
)

BOUNDS = Bounds.of(0.0, 1.0, 3)


@pytest.mark.parametrize("name", GD_MECHANISMS)
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_the_report_mechanism_spends_the_learners_own_epsilon(name, epsilon):
    """Same seed, same reports as :func:`gd_mechanism` at the learner's ε (whose mechanisms are tested at their ε)."""
    gd = LdpGradientDescent(epsilon=epsilon, n_classes=3, bounds=BOUNDS, mechanism=name)
    mech = gd.report_mechanism()
    assert mech.epsilon == epsilon
    want = gd_mechanism(name, epsilon=epsilon, p=gd.p, attributes=gd.attributes)
    gradients = np.random.default_rng(1).uniform(-1.0, 1.0, size=(200, gd.p))
    got = mech.privatize(gradients, np.random.default_rng(2))
    np.testing.assert_array_equal(got, want.privatize(gradients, np.random.default_rng(2)))


@pytest.mark.parametrize(
    "epsilon, eta",
    [(0.5, 0.5), (3.0, 3.0), (20.0, MAX_LEARNING_RATE), (math.inf, NOISELESS_LEARNING_RATE)],
)
def test_the_first_step_moves_by_the_default_learning_rate(epsilon, eta):
    """θ_1 = Π(0 - η/sqrt(1) · mean(reports)) with λθ_0 = 0 and a report small enough not to reach the clip."""
    gd = LdpGradientDescent(epsilon=epsilon, n_classes=2, bounds=BOUNDS)
    assert gd.step_size() == eta
    reports = np.random.default_rng(3).uniform(-0.05, 0.05, size=(5, gd.p))
    theta = gd.step(gd.initial(), reports, 0)
    np.testing.assert_allclose(theta, -eta * reports.mean(axis=0).reshape(theta.shape), rtol=1e-12)
    # the second step (t = 1) is scaled by 1/sqrt(2) and adds the L2 pull λθ_1
    theta2 = gd.step(theta, reports, 1)
    grad = reports.mean(axis=0).reshape(theta.shape) + gd.l2 * theta
    np.testing.assert_allclose(theta2, theta - eta / math.sqrt(2.0) * grad, rtol=1e-12)


def test_a_single_owner_gets_a_one_iteration_plan_and_zero_owners_are_refused():
    """One owner: one iteration, one report. At ε = ∞ the model is the first step itself, θ_1 = -η g with g the
    row's logistic gradient at θ = 0, ``(σ(0) - y) (t, 1)``."""
    for epsilon in (1.0, math.inf):
        gd = LdpGradientDescent(epsilon=epsilon, n_classes=2, bounds=BOUNDS)
        assert gd.iterations(1) == 1
        plan = gd.plan(1, np.random.default_rng(4))
        assert len(plan) == 1 and plan[0].tolist() == [0]
        with pytest.raises(ConfigError, match="n_owners"):
            gd.iterations(0)
    x = np.array([[0.2, 0.5, 0.9]])
    model = gd.fit(x, np.array([1]), rng=np.random.default_rng(5))
    t = BOUNDS.to_unit(x)[0]
    step = NOISELESS_LEARNING_RATE * 0.5  # -η (σ(0) - 1)
    np.testing.assert_allclose(model.coef_[0], step * t, rtol=1e-12)
    np.testing.assert_allclose(model.intercept_, [step], rtol=1e-12)


@pytest.mark.parametrize("n_owners", [1, 7, 24, 25, 49, 50, 60, 99, 130, 199, 200, 201, 1000])
def test_the_default_plan_keeps_min_group_owners_per_group(n_owners):
    gd = LdpGradientDescent(epsilon=2.0, n_classes=2, bounds=BOUNDS)
    t = gd.iterations(n_owners)
    assert isinstance(t, int) and t == min(MAX_ITERATIONS, max(1, n_owners // MIN_GROUP))
    plan = gd.plan(n_owners, np.random.default_rng(6))
    assert len(plan) == t
    np.testing.assert_array_equal(np.sort(np.concatenate(plan)), np.arange(n_owners))  # every owner once
    sizes = [len(g) for g in plan]
    assert min(sizes) >= min(MIN_GROUP, n_owners)
    if t < MAX_ITERATIONS:  # more groups would have been planned if each could keep min_group owners
        assert n_owners < (t + 1) * MIN_GROUP


@pytest.mark.parametrize(
    "epsilon, n_iterations, n_owners, want",
    [(1.0, 5, 3, 3), (1.0, 3, 10, 3), (math.inf, None, 10, 10), (math.inf, None, 500, NOISELESS_ITERATIONS)],
)
def test_a_plan_never_has_more_groups_than_owners(epsilon, n_iterations, n_owners, want):
    gd = LdpGradientDescent(epsilon=epsilon, n_classes=2, bounds=BOUNDS, n_iterations=n_iterations)
    assert gd.iterations(n_owners) == want
    plan = gd.plan(n_owners, np.random.default_rng(7))
    assert len(plan) == want and all(len(g) >= 1 for g in plan)


def test_a_step_refuses_an_empty_group_and_reports_of_another_width():
    gd = LdpGradientDescent(epsilon=1.0, n_classes=2, bounds=BOUNDS)
    theta = gd.initial()
    for bad in (np.zeros((0, gd.p)), np.zeros((3, gd.p + 1)), np.zeros((1, gd.p - 1))):
        with pytest.raises(ConfigError, match="reports must have shape"):
            gd.step(theta, bad, 0)
    assert np.all(gd.step(theta, np.zeros((1, gd.p)), 0) == 0.0)


@pytest.mark.parametrize("param_bound", [4.0, 0.5])
def test_a_step_clips_every_parameter_to_the_public_box(param_bound):
    gd = LdpGradientDescent(epsilon=8.0, n_classes=3, bounds=BOUNDS, param_bound=param_bound, l2=0.0)
    reports = np.tile(np.linspace(-1.0, 1.0, gd.p), (4, 1))  # η = 8: raw steps up to 8 in size
    theta = gd.step(gd.initial(), reports, 0)
    want = np.clip(-8.0 * reports[0], -param_bound, param_bound).reshape(theta.shape)
    np.testing.assert_allclose(theta, want, rtol=1e-12)
    assert np.max(np.abs(theta)) == param_bound


def test_the_descent_averages_the_iterates_after_the_first_and_skips_a_silent_group():
    """Three groups; group 1 sends no report. θ_1 = -η r0, θ_2 = θ_1, θ_3 = θ_2 - η/sqrt(3) (r2 + λθ_2); the model is
    (θ_2 + θ_3) / 2, as (coef_, intercept_) = (θ[:, :-1], θ[:, -1])."""
    gd = LdpGradientDescent(epsilon=1.0, n_classes=3, bounds=BOUNDS, n_iterations=3, learning_rate=0.5, l2=0.1)
    rng = np.random.default_rng(8)
    r0, r2 = rng.uniform(-1.0, 1.0, size=(2, gd.p)), rng.uniform(-1.0, 1.0, size=(1, gd.p))
    seen = []

    def gradients(t, theta, group):
        seen.append((t, theta.copy(), len(group)))
        return {0: r0, 1: np.zeros((0, gd.p)), 2: r2}[t]

    model = gd.descend(3, gradients, np.random.default_rng(9))
    shape = gd.initial().shape
    th1 = np.clip(-0.5 * r0.mean(axis=0).reshape(shape), -4.0, 4.0)
    th3 = np.clip(th1 - 0.5 / math.sqrt(3.0) * (r2[0].reshape(shape) + 0.1 * th1), -4.0, 4.0)
    assert [t for t, _, _ in seen] == [0, 1, 2] and all(n == 1 for _, _, n in seen)
    np.testing.assert_allclose(seen[1][1], th1, rtol=1e-12)
    np.testing.assert_allclose(seen[2][1], th1, rtol=1e-12)  # the silent group left θ where it was
    want = (th1 + th3) / 2.0
    np.testing.assert_allclose(model.coef_, want[:, :-1], rtol=1e-12)
    np.testing.assert_allclose(model.intercept_, want[:, -1], rtol=1e-12)


def test_a_descent_without_a_single_report_fails():
    gd = LdpGradientDescent(epsilon=1.0, n_classes=2, bounds=BOUNDS, n_iterations=2)
    with pytest.raises(RoundFailed, match="no owner released a gradient"):
        gd.descend(4, lambda t, theta, group: np.zeros((0, gd.p)), np.random.default_rng(10))


def test_a_two_step_descent_returns_its_second_iterate():
    """Two iterations: the average of the iterates after the first is θ_2 alone."""
    gd = LdpGradientDescent(epsilon=1.0, n_classes=2, bounds=BOUNDS, n_iterations=2, learning_rate=1.0, l2=0.0)
    r = np.random.default_rng(11).uniform(-0.5, 0.5, size=(2, gd.p))
    model = gd.descend(2, lambda t, theta, group: r[t : t + 1], np.random.default_rng(12))
    th2 = -r[0] - r[1] / math.sqrt(2.0)
    np.testing.assert_allclose(model.coef_[0], th2[:-1], rtol=1e-12)
    np.testing.assert_allclose(model.intercept_, th2[-1:], rtol=1e-12)
