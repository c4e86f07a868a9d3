"""The epsilon ratio of the objective-perturbed Huber SVM (Chaudhuri, Monteleoni, Sarwate 2011, Alg. 2 under
add/remove-one with a public row count; SPEC §8; common/mechanisms/objective.py), from its exact output density.

For one parameter (d = 1) the exact minimiser ``f`` of ``J(f) = (1/m) sum l(y_i f x_i) + (reg/2) f^2 + b f / m``
is a bijection of the noise: ``b = B_D(f) = -sum l'(y_i f x_i) y_i x_i - m reg f``, so with ``b`` of density
``(rate/2) exp(-rate |b|)`` the release has density ``p_D(f) = (rate/2) exp(-rate |B_D(f)|) J_D(f)``,
``J_D(f) = m reg + sum l''(y_i f x_i) x_i^2``, computed here from the mechanism's own ``(rate, Delta)``.

* The learner's releases (``_fit_huber``, the path ``fit_dp_svm`` takes, many problems at once) follow ``p_D``
  bin by bin (5 s.e.), and ``p_D`` integrates to 1: the density is the implementation's.
* Adding a row moves ``log p`` by at most the objective's share ``(1 - AMP_FRACTION) eps`` at every ``f``, and
  the bound is attained (the added row at ``l' = -1`` and ``l'' = c`` near ``y f x = 1 - h``); AMP's output noise
  (``AMP_FRACTION eps``, tested in test_dpsvm_stat.py) composes on top.
* The same density with the Jacobian term left out of the calibration (``Delta = 0`` where it must be positive)
  exceeds that share: the check can fail.

The unit tests check the calibration's arithmetic (``rate + log(1 + c/(m reg)) = eps``) and the noise's
variance; this checks the privacy claim itself on the real loss.
"""

import math

import numpy as np
import pytest

from privfed.common.feddpdr.svm import HUBER_H, _fit_huber, huber_hinge_derivative
from privfed.common.mechanisms.amp import AMP_FRACTION
from privfed.common.mechanisms.objective import ObjectivePerturbation

pytestmark = pytest.mark.slow

Z = 5.0
P = 60_000  # releases (independent problems of one call)
C = 1.0 / (2.0 * HUBER_H)
# Three rows whose margins at f = 0.5 are outside Huber's quadratic zone; the added row (1, +1) enters it there.
X0, Y0 = np.array([[0.2], [-0.9], [0.6]]), np.array([1.0, 1.0, -1.0])
X1, Y1 = np.vstack([X0, [[1.0]]]), np.append(Y0, 1.0)
ROWS = 4  # the public m
GRID = np.concatenate([np.linspace(-60.0, 60.0, 240_001), 0.5 + np.array([1e-9, 1e-7, 1e-5])])
GRID.sort()


def second_derivative(z):
    return np.where(np.abs(1.0 - z) < HUBER_H, C, 0.0)


def log_density(f, X, Y, rate, reg):
    """``log p_D(f)`` of the exact minimiser (module docstring)."""
    z = Y[None, :] * f[:, None] * X[None, :, 0]
    b = -(huber_hinge_derivative(z) * Y * X[:, 0]).sum(axis=1) - ROWS * reg * f
    jac = ROWS * reg + (second_derivative(z) * X[:, 0] ** 2).sum(axis=1)
    return math.log(rate / 2.0) - rate * np.abs(b) + np.log(jac)


CASES = [(2.0, 0.3), (0.5, 0.05)]  # Delta = 0, and Delta > 0 (the Jacobian needs extra regularisation)


@pytest.mark.parametrize("epsilon, lam", CASES)
def test_releases_follow_the_exact_density(epsilon, lam, rng):
    mech = ObjectivePerturbation(epsilon=epsilon, lam=lam, curvature=C, d=1, rows=ROWS)
    rate, _ = mech.adjustment
    logp = log_density(GRID, X1, Y1, rate, mech.reg)
    dens = np.exp(logp)
    cdf = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(GRID))])
    assert cdf[-1] == pytest.approx(1.0, abs=1e-4)  # the change of variables is a bijection onto the noise
    f = _fit_huber(X1, np.tile(Y1, (P, 1)), epsilon, lam, rng, HUBER_H, ROWS)[:, 0]
    edges = np.quantile(f, np.linspace(0, 1, 41)[1:-1])  # 40 bins of about equal mass
    probs = np.diff(np.concatenate([[0.0], np.interp(edges, GRID, cdf), [cdf[-1]]])) / cdf[-1]
    counts = np.bincount(np.searchsorted(edges, f), minlength=40)
    z = (counts - P * probs) / np.sqrt(P * probs * (1 - probs))
    assert np.max(np.abs(z)) <= Z, np.round(z, 1)


@pytest.mark.parametrize("epsilon, lam", CASES)
def test_adding_a_row_moves_the_log_density_by_at_most_the_objectives_epsilon(epsilon, lam):
    mech = ObjectivePerturbation(epsilon=epsilon, lam=lam, curvature=C, d=1, rows=ROWS)
    rate, Delta = mech.adjustment
    assert (Delta > 0) == (lam == 0.05)
    share = (1.0 - AMP_FRACTION) * epsilon
    gap = np.abs(log_density(GRID, X1, Y1, rate, mech.reg) - log_density(GRID, X0, Y0, rate, mech.reg))
    assert gap.max() <= share + 1e-9, (gap.max(), share)
    assert gap.max() >= share - 1e-6, (gap.max(), share)  # attained just above f = 0.5


def test_the_check_catches_a_calibration_without_the_jacobian_term():
    epsilon, lam = CASES[1]
    mech = ObjectivePerturbation(epsilon=epsilon, lam=lam, curvature=C, d=1, rows=ROWS)
    share = (1.0 - AMP_FRACTION) * epsilon
    rate, _ = mech.adjustment
    gap = np.abs(log_density(GRID, X1, Y1, rate, lam) - log_density(GRID, X0, Y0, rate, lam))  # Delta left out
    assert gap.max() > share + 1.0
