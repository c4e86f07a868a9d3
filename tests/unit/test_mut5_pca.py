"""Mutation round 5 (common/feddpdr/pca.py): DP-PCA's own epsilon and delta, and the row scalings' edges.

``dp_pca`` passing ``2 epsilon`` or ``2 delta`` to :func:`noisy_covariance` (half the noise, twice the spend the
ledger records) passed every test: nothing compared the basis it releases with the noisy covariance at the
caller's parameters. It is now checked to be exactly the top-k eigenvectors of ``noisy_covariance`` at the same
``(epsilon, delta, neighbouring)`` and seed (whose noise ``test_dppca_release_stat.py`` checks against the
calibrated sigma), and ``owner_pca_release`` to be ``dp_pca`` of the scaled rows at ``epsilon1``.

The row scalings (SPEC §4, §7): ``normalise_rows`` was tested at ``lo = 0`` only, where ``x - lo`` and ``x + lo``
agree, and with one coordinate out of range, where clipping to ``[0, 1]`` or ``[0, 2]`` gives the same direction.
A value beyond the bounds by a million radii (finite, no overflow) must keep its row's direction (``a / ||a||``);
the clamp at :data:`SCALED_LIMIT` must keep the norm finite for rows of up to ``2^23`` features as its comment
says; a NaN (``inf * 0`` of a zero-width feature under ``box``) carries nothing. ``check_unit_rows`` must refuse
a NaN row (its norm is NaN, which no ``>`` catches) and a 1-D array; ``normalise_rows`` a row of the wrong width;
``top_k_eigenvectors`` must accept ``k = 1``.
"""

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.pca import (
    dp_pca,
    noisy_covariance,
    normalise_rows,
    owner_pca_release,
    scale_rows,
    scale_rows_to_unit_ball,
    scale_rows_to_unit_box,
    top_k_eigenvectors,
)


def _unit_rows(rng, n, d):
    X = rng.standard_normal((n, d)) * np.linspace(3.0, 0.5, d)
    return 0.95 * X / np.max(np.linalg.norm(X, axis=1))


@pytest.mark.parametrize(
    ("epsilon", "delta", "neighbouring"),
    [(0.5, 1e-5, "add-remove"), (2.0, 1e-6, "replace-one"), (8.0, 1e-3, "add-remove")],
)
def test_dp_pca_is_the_top_eigenvectors_of_the_noisy_covariance_at_its_own_parameters(epsilon, delta, neighbouring):
    X = _unit_rows(np.random.default_rng(5), 40, 6)
    for k in (1, 3):
        U = dp_pca(X, k, epsilon=epsilon, delta=delta, rng=np.random.default_rng(11), neighbouring=neighbouring)
        C = noisy_covariance(X, epsilon=epsilon, delta=delta, rng=np.random.default_rng(11), neighbouring=neighbouring)
        assert np.array_equal(U, top_k_eigenvectors(C, k)[0])
        # and not those of another noise level (the test can fail: the noise is on the grid of its sigma)
        C2 = noisy_covariance(
            X, epsilon=2 * epsilon, delta=delta, rng=np.random.default_rng(11), neighbouring=neighbouring
        )
        assert not np.allclose(C, C2)


@pytest.mark.parametrize("scaling", ["ball", "box", "normalise"])
def test_owner_pca_release_is_dp_pca_of_the_scaled_rows_at_epsilon1(scaling):
    rng = np.random.default_rng(2)
    bounds = Bounds(np.array([0.0, -5.0, 10.0, 1.0]), np.array([4.0, 5.0, 30.0, 2.0]))
    X = rng.uniform(bounds.lo, bounds.hi, (13, 4))
    U, n = owner_pca_release(X, bounds, 2, 0.7, 1e-5, np.random.default_rng(9), scaling=scaling)
    expected = dp_pca(scale_rows(X, bounds, scaling), 2, epsilon=0.7, delta=1e-5, rng=np.random.default_rng(9))
    assert n == 13 and np.array_equal(U, expected)


def test_top_k_accepts_k_one_and_returns_the_top_eigenvector():
    C = np.diag([1.0, 5.0, 3.0])
    U, values = top_k_eigenvectors(C, 1)
    assert U.shape == (3, 1) and np.allclose(np.abs(U[:, 0]), [0.0, 1.0, 0.0]) and np.allclose(values, [5.0])


def test_normalise_rows_is_the_closed_form_for_bounds_away_from_zero():
    bounds = Bounds(np.array([10.0, -4.0, 100.0]), np.array([20.0, 4.0, 300.0]))
    X = np.array(
        [
            [15.0, 0.0, 150.0],  # inside: u = (0.5, 0.5, 0.25)
            [12.0, -4.0, 300.0],  # (0.2, 0, 1)
            [25.0, 8.0, 200.0],  # two values above their bounds: u = (1, 1, 0.5) after the clip to [0, 1]
            [5.0, -9.0, 250.0],  # below: (0, 0, 0.75)
        ]
    )
    U = np.clip((X - bounds.lo) / (bounds.hi - bounds.lo), 0.0, 1.0)
    assert np.allclose(U[0], [0.5, 0.5, 0.25]) and np.allclose(U[2], [1.0, 1.0, 0.5])
    expected = U / np.linalg.norm(U, axis=1, keepdims=True)
    assert np.allclose(normalise_rows(X, bounds), expected, rtol=1e-14, atol=1e-15)
    assert np.allclose(normalise_rows(X[2:3], bounds), [[2 / 3, 2 / 3, 1 / 3]], rtol=1e-14)


def test_normalise_rows_refuses_rows_of_another_width():
    bounds = Bounds.of(0.0, 1.0, 4)
    for X in (np.zeros((3, 5)), np.zeros((3, 3)), np.zeros((2, 3, 4))):
        with pytest.raises(ConfigError, match="match the bounds"):
            normalise_rows(X, bounds)


@pytest.mark.parametrize("scale", [scale_rows_to_unit_ball, scale_rows_to_unit_box])
def test_a_row_far_outside_the_bounds_keeps_its_direction(scale):
    """Finite values a million radii out (nothing overflows): the row is ``a / ||a||`` of its own scaled values."""
    bounds = Bounds(np.array([0.0, -2.0]), np.array([4.0, 2.0]))  # centre (2, 0), half-widths (2, 2)
    X = np.array([[2.0 + 3e6, -4e6], [2.0 - 5e6, 1.2e7]])
    A = scale(X, bounds)
    assert np.allclose(A, [[0.6, -0.8], [-5 / 13, 12 / 13]], rtol=1e-12)


def test_the_clamp_keeps_the_norm_finite_for_rows_of_fewer_than_2_23_features():
    """SCALED_LIMIT's comment: the clamped values' squares sum to a finite norm over 2^22 features, so a row of
    huge finite values is scaled to its direction (every entry 2^-11), not zeroed by an infinite norm."""
    d = 2**22
    bounds = Bounds(np.zeros(d), np.ones(d))
    A = scale_rows_to_unit_ball(np.full((1, d), 1e300), bounds)
    assert np.all(A == 2.0**-11)


def test_a_nan_of_a_zero_width_feature_carries_nothing():
    lo, hi = np.array([0.0, 3.0]), np.array([2.0, 3.0])
    flat = object.__new__(Bounds)  # lo == hi, which Bounds refuses: box_scale's documented zero-width case
    object.__setattr__(flat, "lo", lo)
    object.__setattr__(flat, "hi", hi)
    with np.errstate(invalid="ignore"):
        A = scale_rows_to_unit_box(np.array([[1.5, np.inf], [0.5, -np.inf], [1.0, np.nan]]), flat)
    assert np.array_equal(A, [[0.5 / math.sqrt(2), 0.0], [-0.5 / math.sqrt(2), 0.0], [0.0, 0.0]])


def test_noisy_covariance_refuses_a_nan_row_and_a_one_dimensional_array():
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match="non-finite"):
        noisy_covariance(np.array([[0.1, np.nan], [0.2, 0.3]]), epsilon=1.0, delta=1e-5, rng=rng)
    with pytest.raises(ConfigError, match="2-D"):
        noisy_covariance(np.array([0.1, 0.2]), epsilon=1.0, delta=1e-5, rng=rng)
