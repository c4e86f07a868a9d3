"""Weighted aggregation of subspaces and parameters (SPEC §9; seed 004 Alg. 1)."""

import math

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.feddpdr.pca import dp_pca
from privfed.common.feddpdr.subspace import aggregate_subspaces, owner_weights, weighted_average


def _angle_deg(u):
    return math.degrees(math.atan2(u[1], u[0])) % 180.0


def _two_lines():
    a = math.radians(60)
    return np.array([[1.0], [0.0]]), -np.array([[math.cos(a)], [math.sin(a)]])


def test_projector_average_of_two_lines_is_the_bisector():
    U1, U2 = _two_lines()
    U, eigenvalues = aggregate_subspaces([U1, U2], [0.5, 0.5])
    assert _angle_deg(U[:, 0]) == pytest.approx(30.0, abs=1e-9)
    assert np.allclose(eigenvalues, [0.75, 0.25])
    naive = (U1 + U2)[:, 0] / 2  # entry-wise average of the bases: -60 degrees, the wrong answer
    assert math.degrees(math.atan2(naive[1], naive[0])) == pytest.approx(-60.0)


def test_weighted_projector_average_angle():
    U, _ = aggregate_subspaces(list(_two_lines()), [0.25, 0.75])
    assert _angle_deg(U[:, 0]) == pytest.approx(50.446697, abs=1e-6)


def test_rotations_of_one_subspace_are_recovered_exactly(rng):
    basis, _ = np.linalg.qr(rng.standard_normal((5, 2)))
    Us = []
    for _ in range(3):
        R, _ = np.linalg.qr(rng.standard_normal((2, 2)))  # rotation or reflection inside the span
        Us.append(basis @ R)
    U, eigenvalues = aggregate_subspaces(Us, [0.2, 0.3, 0.5])
    assert np.allclose(U @ U.T, basis @ basis.T, atol=1e-12)
    assert np.allclose(U.T @ U, np.eye(2))
    assert np.allclose(eigenvalues[:2], 1.0) and np.allclose(eigenvalues[2:], 0.0, atol=1e-12)


def test_result_does_not_depend_on_each_owners_basis_choice(rng):
    Us = [np.linalg.qr(rng.standard_normal((6, 3)))[0] for _ in range(4)]
    flipped = [U @ np.linalg.qr(rng.standard_normal((3, 3)))[0] for U in Us]
    w = [1, 2, 3, 4]
    A, ea = aggregate_subspaces(Us, w)
    B, eb = aggregate_subspaces(flipped, w)
    assert np.allclose(A, B, atol=1e-10) and np.allclose(ea, eb)


def test_noiseless_owners_recover_a_known_subspace(rng):
    basis, _ = np.linalg.qr(rng.standard_normal((8, 3)))
    Us, ns = [], [40, 100, 250]
    for n in ns:
        X = (rng.standard_normal((n, 3)) * [4.0, 2.0, 1.0]) @ basis.T
        X /= 1.01 * np.max(np.linalg.norm(X, axis=1))
        Us.append(dp_pca(X, 3, epsilon=math.inf, delta=1e-5, rng=rng))
    U, _ = aggregate_subspaces(Us, owner_weights(ns))
    assert np.allclose(U @ U.T, basis @ basis.T, atol=1e-10)


def test_owner_weights():
    assert np.allclose(owner_weights([1, 3]), [0.25, 0.75])
    assert owner_weights(np.array([5, 5, 10])).sum() == pytest.approx(1.0)
    for bad in ([0, 3], [-1, 2], [1.5, 2.0], []):
        with pytest.raises(ConfigError):
            owner_weights(bad)


def test_weighted_average_divides_once():
    params = [np.array([[1.0, 2.0]]), np.array([[3.0, 6.0]])]
    assert np.allclose(weighted_average(params, [0.25, 0.75]), [[2.5, 5.0]])
    assert np.allclose(weighted_average(params, [1, 3]), [[2.5, 5.0]])  # relative weights
    with pytest.raises(ConfigError):
        weighted_average(params, [1.0])
    with pytest.raises(ConfigError):
        weighted_average(params, [-1.0, 2.0])
    with pytest.raises(ConfigError):
        weighted_average([np.zeros(2), np.zeros(3)], [1, 1])
    with pytest.raises(ConfigError):
        weighted_average([], [])


def test_aggregate_validates_inputs():
    with pytest.raises(ConfigError):
        aggregate_subspaces([], [])
    with pytest.raises(ConfigError, match="orthonormal"):
        aggregate_subspaces([np.array([[2.0], [0.0]])], [1.0])
    with pytest.raises(ConfigError, match="shape"):
        aggregate_subspaces([np.eye(3)[:, :1], np.eye(3)[:, :2]], [1, 1])
