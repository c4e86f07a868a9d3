"""Mutation round 5 (common/feddpdr/svm.py): the Huber width's curvature in the calibration, and the public count.

``_fit_huber`` gives the mechanism ``c = 1/(2h)``, the bound on the Huber hinge's second derivative (Chaudhuri et
al. 2011, Thm 9: the Jacobian term ``log(1 + c / (m reg))`` of the privacy loss). Every test ran at the default
``h = 1/2``, where ``1/(2h) = 2h = 1``, so ``curvature = 2h`` passed: at ``h = 1/4`` that calibrates for ``c = 1/2``
while the loss curves by 2. Now the releases at ``h = 1/4`` are checked against the exact output density of the
minimiser with ``(rate, Delta)`` of :func:`privacy_adjustment` at ``c = 1/(2h)`` (as
``test_objective_perturbation_ratio_stat.py`` does at ``h = 1/2``), and that density's log-ratio between
neighbours is within the objective's share of epsilon, while the density calibrated for ``c = 2h`` exceeds it
(the check can fail).

``public_rows`` (the objective's ``m`` when no public count is given) had no test of ``n`` itself: ``max(n, 2)``
and ``n`` unfloored (an owner with no rows: ``m = 0``) passed. Now ``m = n`` for ``n >= 1``, 1 for no rows, a
release from no rows without a count, and ``rows = 0`` refused.
"""

import math

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.feddpdr.svm import _fit_huber, fit_dp_svm, huber_hinge_derivative, public_rows
from privfed.common.mechanisms.amp import AMP_FRACTION
from privfed.common.mechanisms.objective import privacy_adjustment

pytestmark = pytest.mark.slow

Z = 5.0
P = 60_000
H = 0.25
C = 1.0 / (2.0 * H)  # the Huber hinge's |l''| bound at width h
X0, Y0 = np.array([[0.2], [-0.9], [0.6]]), np.array([1.0, 1.0, -1.0])
X1, Y1 = np.vstack([X0, [[1.0]]]), np.append(Y0, 1.0)
ROWS = 4
GRID = np.concatenate([np.linspace(-60.0, 60.0, 240_001), 0.75 + np.array([1e-9, 1e-7, 1e-5])])
GRID.sort()
CASES = [(2.0, 0.3), (0.5, 0.05)]


def log_density(f, X, Y, rate, reg, c=C):
    """``log p_D(f)`` of the exact minimiser of ``(1/m) sum l_h + (reg/2) f^2 + b f / m``, ``b ~ exp(-rate |b|)``:
    ``b = -sum l'(z_i) y_i x_i - m reg f`` and the Jacobian ``m reg + sum l''(z_i) x_i^2`` (``l'' = c`` inside
    ``|1 - z| < h``)."""
    z = Y[None, :] * f[:, None] * X[None, :, 0]
    b = -(huber_hinge_derivative(z, H) * Y * X[:, 0]).sum(axis=1) - ROWS * reg * f
    jac = ROWS * reg + (np.where(np.abs(1.0 - z) < H, c, 0.0) * X[:, 0] ** 2).sum(axis=1)
    return math.log(rate / 2.0) - rate * np.abs(b) + np.log(jac)


def calibration(epsilon, lam, c=C):
    rate, Delta = privacy_adjustment((1.0 - AMP_FRACTION) * epsilon, ROWS, lam, c)
    return rate, lam + Delta


@pytest.mark.parametrize("epsilon, lam", CASES)
def test_releases_at_another_huber_width_follow_the_density_calibrated_for_its_curvature(epsilon, lam, rng):
    rate, reg = calibration(epsilon, lam)
    dens = np.exp(log_density(GRID, X1, Y1, rate, reg))
    cdf = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(GRID))])
    assert cdf[-1] == pytest.approx(1.0, abs=1e-4)
    f = _fit_huber(X1, np.tile(Y1, (P, 1)), epsilon, lam, rng, H, ROWS)[:, 0]
    edges = np.quantile(f, np.linspace(0, 1, 41)[1:-1])
    probs = np.diff(np.concatenate([[0.0], np.interp(edges, GRID, cdf), [cdf[-1]]])) / cdf[-1]
    counts = np.bincount(np.searchsorted(edges, f), minlength=40)
    z = (counts - P * probs) / np.sqrt(P * probs * (1 - probs))
    assert np.max(np.abs(z)) <= Z, np.round(z, 1)
    # the one release fit_dp_svm makes at this width is _fit_huber's first problem on the same stream
    seed = int(rng.integers(2**31))
    one = fit_dp_svm(X1, Y1, epsilon=epsilon, lam=lam, rng=np.random.default_rng(seed), h=H, rows=ROWS)
    assert np.array_equal(one, _fit_huber(X1, Y1[None, :], epsilon, lam, np.random.default_rng(seed), H, ROWS)[0])


@pytest.mark.parametrize("epsilon, lam", CASES)
def test_that_density_is_within_the_objectives_share_and_a_calibration_for_2h_is_not(epsilon, lam):
    share = (1.0 - AMP_FRACTION) * epsilon
    rate, reg = calibration(epsilon, lam)
    gap = np.abs(log_density(GRID, X1, Y1, rate, reg) - log_density(GRID, X0, Y0, rate, reg))
    assert share - 1e-6 <= gap.max() <= share + 1e-9, (gap.max(), share)
    rate, reg = calibration(epsilon, lam, c=2.0 * H)  # the mechanism told c = 2h, the loss curving by 1/(2h)
    gap = np.abs(log_density(GRID, X1, Y1, rate, reg) - log_density(GRID, X0, Y0, rate, reg))
    assert gap.max() > share + 0.2, (gap.max(), share)


def test_public_rows_is_the_real_count_at_least_one_or_the_public_count():
    assert [public_rows(None, n) for n in (0, 1, 2, 7, 1000)] == [1, 1, 2, 7, 1000]
    assert public_rows(5, 0) == 5 and public_rows(1, 1000) == 1
    for bad in (0, -3):
        with pytest.raises(ConfigError):
            public_rows(bad, 10)


def test_without_a_public_count_the_release_uses_the_rows_own_count_and_no_rows_release():
    rng = np.random.default_rng(4)
    X = rng.uniform(-0.5, 0.5, (1, 3))
    y = np.array([1.0])
    got = fit_dp_svm(X, y, epsilon=1.0, lam=0.1, rng=np.random.default_rng(8))
    assert np.array_equal(got, fit_dp_svm(X, y, epsilon=1.0, lam=0.1, rng=np.random.default_rng(8), rows=1))
    empty = fit_dp_svm(X[:0], y[:0], epsilon=1.0, lam=0.1, rng=np.random.default_rng(8))
    assert empty.shape == (3,) and np.all(np.isfinite(empty))
    assert np.array_equal(empty, fit_dp_svm(X[:0], y[:0], epsilon=1.0, lam=0.1, rng=np.random.default_rng(8), rows=1))
