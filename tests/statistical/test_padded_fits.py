"""Padding a fit's rows to the public grid cell (common/work_rows.py) leaves the release as it was.

For each padded fit, the same rows and the same seed, with the padding (now) and without it (the fits'
``work_rows`` made the identity, as before): the LR fit and the class sums agree to rounding, the DP-PCA
release to its output grid, and the objective-perturbed SVM releases to within AMP's public radius (the two
solver points lie within ``r`` of one exact minimiser, and the noise draws are the same), over varied row
counts, class counts and seeds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.feddpdr import centroid, multiclass, pca, svm
from privfed.common.feddpdr.release import owner_svm_release
from privfed.common.learners import newton
from privfed.common.learners.logistic import fit_local_logistic
from privfed.common.mechanisms.amp import AMP_FRACTION, AMP_RADIUS, AmpOutputNoise

D = 5
BOUNDS = Bounds.of(-3.0, 3.0, D)
COUNTS = (1, 3, 37, 300)


def _rows(n: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.Generator(np.random.PCG64(seed))
    y = rng.integers(0, K, n)
    return np.clip(rng.normal(size=(n, D)) + y[:, None] * 0.7, -3, 3), y


def _both(monkeypatch, release: Callable[[], Any]) -> tuple[Any, Any]:
    """``release()`` padded, then as before the padding."""
    padded = release()
    with monkeypatch.context() as m:
        for module in (newton, svm, multiclass, centroid, pca):
            m.setattr(module, "work_rows", lambda n: max(int(n), 1))
        old = release()
    return padded, old


@pytest.mark.parametrize("n", COUNTS)
@pytest.mark.parametrize("K", [2, 3])
def test_lr_fit_is_unchanged(monkeypatch, n, K):
    X, y = _rows(n, K, n)
    new, old = _both(monkeypatch, lambda: fit_local_logistic(X, y, bounds=BOUNDS, n_classes=K, C=1.0))
    np.testing.assert_allclose(new, old, rtol=0, atol=1e-9)


@pytest.mark.parametrize("n", COUNTS)
def test_pca_release_is_unchanged(monkeypatch, n):
    X, _ = _rows(n, 2, n)

    def release() -> np.ndarray:
        return pca.owner_pca_release(X, BOUNDS, 2, 1.0, 1e-5, np.random.Generator(np.random.PCG64(9)))[0]

    new, old = _both(monkeypatch, release)
    np.testing.assert_allclose(np.abs(new), np.abs(old), rtol=0, atol=1e-9)  # eigenvectors up to sign


@pytest.mark.parametrize("n", COUNTS)
@pytest.mark.parametrize("model", ["centroid", "ovr-huber", "mc-huber", "softmax"])
def test_svm_release_is_unchanged_within_the_public_radius(monkeypatch, n, model):
    K = 3
    X, y = _rows(n, K, 100 + n)
    delta = 0.0 if model == "ovr-huber" else 1e-5
    U = np.eye(D)[:, :3]

    def release() -> np.ndarray:
        rng = np.random.Generator(np.random.PCG64(4))
        return owner_svm_release(X, y, BOUNDS, U, K, 1.0, 1e-3, rng, delta=delta, model=model)[0]

    new, old = _both(monkeypatch, release)
    if model == "centroid":
        np.testing.assert_allclose(new, old, rtol=0, atol=1e-9)
        return
    # two solver points within r of one minimiser, the same AMP noise, each rounded to the output grid
    cell = AmpOutputNoise(epsilon=AMP_FRACTION / K, radius=AMP_RADIUS, d=4).output_grid.grid
    assert np.max(np.abs(new - old)) <= 2 * AMP_RADIUS + 2 * cell
