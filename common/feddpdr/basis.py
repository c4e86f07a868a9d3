"""Where FedDPDR-DPML's phase 2 projects the rows: the paper's DP-PCA subspace or a public basis.

Seed paper 004 (Wang et al., CMC 2024) reduces the dimension with DP-PCA (Algorithm 2,
:mod:`privfed.common.feddpdr.pca`), paid for with ``epsilon1``. Issue 13 measured that at the paper's
``n * epsilon`` (800 MNIST-5k rows per party at ``epsilon = 1.25``) the Analyze-Gauss noise on the
784 x 784 second-moment matrix (spectral norm about ``2 sigma sqrt(d)``) swamps all but the first
eigenvalue of 800 rows, so the DP-PCA subspace is close to random and the classifier learns little
(0.2-0.36 test accuracy with the class-sums classifier, :mod:`privfed.common.feddpdr.centroid`).

A **public** basis reads no row, so it costs no privacy budget (post-processing of nothing) and the
whole ``(epsilon, delta)`` goes to the classifier:

* ``"dct"``: the ``k`` lowest-frequency vectors of the orthonormal 2-D DCT-II basis of a square image
  (``d = side^2``; Ahmed, Natarajan, Rao 1974), ordered by ``u + v`` then ``max(u, v)``. Natural images
  concentrate their energy there (the reason JPEG keeps them), so for MNIST they play the part of
  the top principal components without looking at anyone's data.
* ``"identity"``: no reduction (``k = d``), the DPML setting of the paper's Fig. 2.

``"dp-pca"`` is the paper's algorithm and the federation's default (:data:`BASES`).

References
----------
N. Ahmed, T. Natarajan, K. R. Rao, "Discrete cosine transform", IEEE Trans. Computers C-23, 1974.
T. Wang et al., CMC 78(3), 2024 (seed 004: Algorithms 1-2).
"""

from __future__ import annotations

import math

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.validation import check_choice, check_int

BASES = ("dp-pca", "dct", "identity")
"""Phase-1 choices: the paper's DP-PCA (spends ``epsilon1``), or a public basis that spends nothing."""
PUBLIC_BASES = ("dct", "identity")


def image_side(d: int) -> int:
    """``side`` with ``side^2 = d``; a DCT basis needs square images (MNIST 28, digits 8)."""
    side = math.isqrt(d)
    if side * side != d:
        raise ConfigError(f"the DCT basis needs square images (d = side^2), got d = {d}; use basis='identity'")
    return side


def dct_basis(d: int, k: int) -> np.ndarray:
    """The ``k`` lowest-frequency orthonormal 2-D DCT-II vectors of a ``side x side`` image, (d, k).

    ``C[n, u] = a(u) cos(pi (2n + 1) u / (2 side))`` with ``a(0) = sqrt(1/side)``, ``a(u) = sqrt(2/side)``
    is orthonormal, so the outer products ``C[:, u] C[:, v]^T`` (row-major, as images are flattened)
    are an orthonormal basis of R^d. Column ``j`` is the pair ``(u, v)`` of rank ``j`` by
    ``(u + v, max(u, v), u)``; column 0 is the constant image.
    """
    d = check_int(d, name="d", minimum=1)
    side = image_side(d)
    k = check_int(k, name="k", minimum=1, maximum=d, fix="the target dimension is at most the number of features")
    n = np.arange(side)
    C = np.cos(np.pi * (2 * n[:, None] + 1) * n[None, :] / (2 * side)) * math.sqrt(2.0 / side)
    C[:, 0] = math.sqrt(1.0 / side)
    pairs = sorted(((u, v) for u in range(side) for v in range(side)), key=lambda p: (p[0] + p[1], max(p), p[0]))
    return np.stack([np.outer(C[:, u], C[:, v]).ravel() for u, v in pairs[:k]], axis=1)


def public_basis(basis: str, d: int, k: int) -> np.ndarray | None:
    """The public projection of ``basis`` (:data:`PUBLIC_BASES`): (d, k) columns, or ``None`` for identity.

    ``"identity"`` needs ``k = d`` (no reduction); the caller reads ``None`` as "do not project".
    """
    check_choice(basis, name="basis", allowed=PUBLIC_BASES)
    if basis == "identity":
        if k != d:
            raise ConfigError(f"basis='identity' keeps all d = {d} features: pass k = {d}, got k = {k}")
        return None
    return dct_basis(d, k)


__all__ = ["BASES", "PUBLIC_BASES", "dct_basis", "image_side", "public_basis"]
