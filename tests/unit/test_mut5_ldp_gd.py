"""Mutation round 5 (common/learners/ldp_gd.py): the owner's K-class gradient, the report the Piecewise mechanism
perturbs.

Only the two-class gradient had a closed-form test. The K-class one, ``(softmax_k(Θ t̃) - [y = k]) t̃``, was checked
for its range only: shifting the scores by their column maxima (``axis=0``: a different softmax), or adding the row
maximum, or subtracting the row minimum (the same softmax in exact arithmetic, but ``exp`` of scores hundreds
apart overflows to inf and the report becomes NaN) all passed. Now the gradient is compared with SciPy's softmax
at moderate and at extreme models (scores thousands apart, any model a coordinator may send), and must stay
finite and in ``[-1, 1]``. ``n_outputs`` must refuse one class.

``gd_mechanism`` built Duchi's and Laplace's mechanisms at ``2 epsilon`` (half the noise) and built PM for both
(``!=`` in the hm-to-pm mapping) without a failing test; each is now checked to be the mechanism named, at the
report's whole epsilon (the mechanisms' own epsilon-LDP tests then apply).
"""

import numpy as np
import pytest
from scipy.special import softmax

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.ldp_gd import (
    LdpGradientDescent,
    gd_mechanism,
    gradient_shares,
    logistic_gradients,
    n_outputs,
)
from privfed.common.mechanisms.duchi import DuchiMultidim
from privfed.common.mechanisms.laplace import LaplaceMechanism
from privfed.common.mechanisms.piecewise_multidim import PiecewiseMultidim


@pytest.mark.parametrize("scale", [0.7, 40.0, 2000.0])
def test_a_k_class_gradient_is_the_softmax_residual_times_the_row(scale):
    rng = np.random.default_rng(21)
    k, d, n = 4, 3, 200
    t = rng.uniform(-1.0, 1.0, (n, d))
    y = rng.integers(0, k, n)
    theta = rng.normal(scale=scale, size=(k, d + 1))
    t1 = np.hstack([t, np.ones((n, 1))])
    residual = softmax(t1 @ theta.T, axis=1) - np.eye(k)[y]
    expected = (residual[:, :, None] * t1[:, None, :]).reshape(n, -1)
    g = logistic_gradients(theta, t, y, k)
    assert np.all(np.isfinite(g)) and np.all(np.abs(g) <= 1.0)
    np.testing.assert_allclose(g, expected, rtol=1e-9, atol=1e-12)


def test_one_class_has_no_gradient_model():
    assert n_outputs(2) == 1 and n_outputs(5) == 5
    with pytest.raises(ConfigError, match="n_classes"):
        n_outputs(1)


def test_the_gradient_mechanism_is_the_one_named():
    """Duchi's and Laplace's mechanisms are built when named (``!=`` for ``==`` in the hm-to-pm mapping built PM
    for both): Duchi's reports lie on its two values ``+-B`` per coordinate."""
    duchi = gd_mechanism("duchi", epsilon=1.0, p=4)
    assert isinstance(duchi, DuchiMultidim) and duchi.epsilon == 1.0 and duchi.d == 4  # the whole epsilon, once
    reports = duchi.privatize(np.zeros((500, 4)), np.random.default_rng(1))
    lo, hi = duchi.output_bounds
    assert np.all(np.isin(reports, [lo, hi]))
    laplace = gd_mechanism("laplace", epsilon=1.0, p=4)
    assert isinstance(laplace, LaplaceMechanism) and laplace.epsilon == 1.0 and laplace.d == 4
    pm = gd_mechanism("pm", epsilon=1.0, p=4)
    assert isinstance(pm, PiecewiseMultidim) and pm.base == "pm"
    assert isinstance(gd_mechanism("hm", epsilon=1.0, p=4), PiecewiseMultidim)


@pytest.mark.parametrize(("k", "labels"), [(2, [0, 1, -1]), (2, [2, 0, 1]), (3, [-1, 2, 0]), (3, [0, 1, 3])])
def test_one_label_outside_the_classes_among_good_ones_is_refused(k, labels):
    """A label ``-1`` would be read as class K-1 (``np.eye(K)[-1]``) or as "not class 1": a gradient of a row the
    owner does not hold. The check with min and max swapped, ``and`` for ``or`` or ``>`` for ``>=`` let one through."""
    bounds = Bounds.of(0.0, 1.0, 2)
    mech = gd_mechanism("pm", epsilon=1.0, p=n_outputs(k) * 3)
    X = np.full((3, 1, 2), 0.5)
    with pytest.raises(ConfigError, match="class indices"):
        gradient_shares(np.zeros((n_outputs(k), 3)), X, np.array(labels)[:, None], bounds=bounds, n_classes=k,
                        mechanism=mech, rng=np.random.default_rng(0))  # fmt: skip


@pytest.mark.parametrize(("shape", "y_shape"), [((3, 1, 3), (3, 1)), ((3, 2, 2), (3, 1)), ((3, 2), (3, 1))])
def test_rows_of_another_width_or_labels_of_another_shape_are_refused(shape, y_shape):
    bounds = Bounds.of(0.0, 1.0, 2)
    mech = gd_mechanism("pm", epsilon=1.0, p=3)
    with pytest.raises(ConfigError, match="X must be"):
        gradient_shares(np.zeros((1, 3)), np.full(shape, 0.5), np.zeros(y_shape, dtype=int), bounds=bounds,
                        n_classes=2, mechanism=mech, rng=np.random.default_rng(0))  # fmt: skip


def test_a_one_row_owner_reports_its_rows_gradient_itself():
    """One row per owner is the target setting: the mean over one own row is that row's gradient (divided by 1),
    with or without padding rows; the test above had owners of 5, 2 and 0 rows, so ``max(own, 2)`` (half of every
    one-row owner's gradient) passed. At ε = ∞ the report is the gradient exactly."""
    bounds = Bounds(np.array([0.0, -5.0]), np.array([10.0, 5.0]))
    rng = np.random.default_rng(8)
    theta = rng.uniform(-2.0, 2.0, (1, 3))
    X, y = rng.uniform(bounds.lo, bounds.hi, (4, 1, 2)), np.array([[0], [1], [1], [0]])
    mech = gd_mechanism("pm", epsilon=np.inf, p=3)
    want = logistic_gradients(theta, bounds.to_unit(X[:, 0]), y[:, 0], 2)
    out = gradient_shares(theta, X, y, bounds=bounds, n_classes=2, mechanism=mech, rng=rng)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-15)
    padded = np.concatenate([X, np.zeros((4, 2, 2))], axis=1)  # two padding rows each, masked out by counts
    y_padded = np.concatenate([y, np.zeros((4, 2), dtype=int)], axis=1)
    out = gradient_shares(theta, padded, y_padded, bounds=bounds, n_classes=2, mechanism=mech, rng=rng, counts=[1] * 4)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-15)


def test_the_descent_accepts_the_edges_of_its_documented_parameters():
    """``n_iterations >= 1``, ``min_group >= 1``, ``0 <= l2 < inf`` (class docstring): one iteration, groups of one
    and no L2 weight are valid plans (all refused by mutants that passed), an infinite weight is not."""
    bounds = Bounds.of(0.0, 1.0, 2)
    gd = LdpGradientDescent(epsilon=1.0, n_classes=2, bounds=bounds, n_iterations=1, min_group=1, l2=0.0)
    assert gd.iterations(10) == 1 and gd.l2 == 0.0
    assert LdpGradientDescent(epsilon=1.0, n_classes=2, bounds=bounds, min_group=1).iterations(5) == 5
    with pytest.raises(ConfigError, match="l2"):
        LdpGradientDescent(epsilon=1.0, n_classes=2, bounds=bounds, l2=float("inf"))
