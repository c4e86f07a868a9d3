"""The owner's releases that pad their rows before the per-row steps (pad first, then mask: common/work_rows.py's
``zero_padding``) give, for a fixed seed, bit for bit what the same steps on the ``n`` rows alone give: the release's
distribution is unchanged, not only its support (audit 12). Each reference below is the release as it ran before
the padding moved up: the per-row steps on the owner's own rows, then the fit (which pads internally)."""

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.feddpdr.centroid import dp_class_sums
from privfed.common.feddpdr.model import add_bias_feature, project
from privfed.common.feddpdr.multiclass import fit_dp_multiclass
from privfed.common.feddpdr.pca import dp_pca, owner_pca_release, scale_rows
from privfed.common.feddpdr.release import owner_svm_release
from privfed.common.feddpdr.svm import fit_dp_svm_ovr

D, K = 4, 3
BOUNDS = Bounds.of(0.0, 1.0, D)
SUBSPACE = np.linalg.qr(np.random.default_rng(9).normal(size=(D, 2)))[0]
COUNTS = (0, 1, 5, 37, 64)  # no rows, one, inside a cell, at a cell's top
SVM_ROWS = 30  # ovr-huber's public row count (the task's)


def rows(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    return rng.uniform(-0.3, 1.3, (n, D)), rng.integers(0, K, n)  # some rows outside the box: clipped


def unpadded_svm_release(X, y, U, model, scaling, epsilon, delta):
    Z = project(scale_rows(X, BOUNDS, scaling), U)
    rng = np.random.default_rng(7)
    if model == "ovr-huber":
        return fit_dp_svm_ovr(Z, y, K, epsilon=epsilon, lam=0.01, rng=rng, rows=SVM_ROWS)[0]
    if model == "centroid":
        return dp_class_sums(Z, y, K, epsilon=epsilon, delta=delta, rng=rng)
    return fit_dp_multiclass(add_bias_feature(Z), y, K, loss=model, epsilon=epsilon, delta=delta, rng=rng)[0]


@pytest.mark.parametrize("model", ["centroid", "mc-huber", "softmax", "ovr-huber"])
@pytest.mark.parametrize("scaling", ["ball", "normalise"])
@pytest.mark.parametrize("reduced", [False, True])
def test_the_svm_release_is_the_unpadded_one(model, scaling, reduced):
    U = SUBSPACE if reduced else None
    for n in COUNTS:
        X, y = rows(n)
        for epsilon in (1.0, np.inf):
            delta = 0.0 if model == "ovr-huber" or np.isinf(epsilon) else 1e-5
            W, count, _ = owner_svm_release(
                X,
                y,
                BOUNDS,
                U,
                K,
                epsilon,
                0.01,
                np.random.default_rng(7),
                delta=delta,
                model=model,
                scaling=scaling,
                rows=SVM_ROWS,
            )
            assert count == n
            np.testing.assert_array_equal(W, unpadded_svm_release(X, y, U, model, scaling, epsilon, delta))


@pytest.mark.parametrize("scaling", ["ball", "normalise"])
def test_the_pca_release_is_the_unpadded_one(scaling):
    for n in COUNTS:
        X, _ = rows(n)
        U, count = owner_pca_release(X, BOUNDS, 2, 1.0, 1e-5, np.random.default_rng(7), scaling=scaling)
        expected = dp_pca(scale_rows(X, BOUNDS, scaling), 2, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(7))
        assert count == n
        np.testing.assert_array_equal(U, expected)
