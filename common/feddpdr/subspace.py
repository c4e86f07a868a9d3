"""Coordinator-side aggregation of FedDPDR-DPML: weights, subspaces, parameters (SPEC §9).

Seed paper 004 (Wang et al., CMC 2024), Algorithm 1 lines 4 and 8, weights ``w_i = n_i / sum_j n_j``
(§4.1). Two corrections to the seed, both from SPEC §9:

* The seed writes ``U_Global = (1/N) sum_i w_i U_i``: with normalised weights that divides by N twice.
  Here ``sum_i w_i theta_i``.
* An eigenbasis is only defined up to sign and rotation inside its span, so bases cannot be averaged
  entry-wise (two owners with bases ``u`` and ``-u`` would average to 0). The projectors are averaged
  instead, ``P = sum_i w_i U_i U_i^T``, and the global basis is the top-k eigenvectors of ``P``: it is
  orthonormal, independent of each owner's choice of basis, and minimises
  ``sum_i w_i ||U U^T - U_i U_i^T||_F^2`` over rank-k projectors. The k-th eigenvalue (at most 1)
  measures how much the owners agree.

Everything here is post-processing of DP releases, so it costs no privacy budget.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError


def owner_weights(ns: ArrayLike) -> np.ndarray:
    """``w_i = n_i / sum_j n_j`` (seed 004 §4.1). Every ``n_i`` must be a positive count."""
    counts = np.asarray(ns)
    if counts.ndim != 1 or counts.size == 0:
        raise ConfigError(f"ns must be a non-empty 1-D list of row counts, got shape {counts.shape}")
    if not np.issubdtype(counts.dtype, np.integer) or np.any(counts <= 0):
        raise ConfigError(f"row counts must be positive integers, got {counts.tolist()}")
    return counts.astype(np.float64) / float(counts.sum())


def _normalised(weights: ArrayLike, count: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (count,):
        raise ConfigError(f"need one weight per owner ({count}), got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise ConfigError(f"weights must be finite, non-negative and not all zero, got {w.tolist()}")
    return w / w.sum()


def weighted_average(params: Sequence[np.ndarray], weights: ArrayLike) -> np.ndarray:
    """``sum_i w_i theta_i`` over same-shaped arrays (seed 004 Alg. 1 line 8; SPEC §9).

    Weights are relative: they are divided by their sum (so raw counts work too).
    """
    if len(params) == 0:
        raise ConfigError("weighted_average needs at least one parameter array")
    arrays = [np.asarray(p, dtype=np.float64) for p in params]
    if any(a.shape != arrays[0].shape for a in arrays):
        raise ConfigError(f"parameters must share one shape, got {[a.shape for a in arrays]}")
    stacked = np.stack(arrays)
    w = _normalised(weights, len(params))
    return np.tensordot(w, stacked, axes=1)


def _canonical_signs(U: np.ndarray) -> np.ndarray:
    """Flip each column so its largest-magnitude entry is positive (a reproducible orientation)."""
    idx = np.argmax(np.abs(U), axis=0)
    signs = np.sign(U[idx, np.arange(U.shape[1])])
    signs[signs == 0] = 1.0
    return U * signs


def aggregate_subspaces(Us: Sequence[np.ndarray], weights: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Weighted projector average of k-dimensional subspaces (SPEC §9; seed 004 Alg. 1 line 4).

    ``P = sum_i w_i U_i U_i^T`` is never formed: with ``M = [sqrt(w_1) U_1, ..., sqrt(w_N) U_N]``
    (d x Nk), ``P = M M^T``, so the top-k left singular vectors of ``M`` are the top-k eigenvectors of
    ``P`` and the squared singular values are its non-zero eigenvalues. Cost O(d (Nk)^2) instead of
    O(d^3).

    Parameters
    ----------
    Us : list of ndarray (d, k), each with orthonormal columns.
    weights : array_like (N,), relative weights (e.g. :func:`owner_weights`).

    Returns
    -------
    U_global : ndarray (d, k), orthonormal; each column oriented so its largest entry is positive.
    eigenvalues : ndarray (min(d, N k),), the eigenvalues of ``P`` in decreasing order (the rest of the
        spectrum is exactly 0); the first k go with the columns of ``U_global``.

    Raises
    ------
    ConfigError
        Empty input, mismatched shapes, or a basis whose columns are not orthonormal.
    """
    if len(Us) == 0:
        raise ConfigError("aggregate_subspaces needs at least one subspace")
    Us = [np.asarray(U, dtype=np.float64) for U in Us]
    d, k = Us[0].shape
    for i, U in enumerate(Us):
        if U.shape != (d, k):
            raise ConfigError(f"subspace {i} has shape {U.shape}, expected {(d, k)} like subspace 0")
        if not np.allclose(U.T @ U, np.eye(k), atol=1e-8):
            raise ConfigError(f"subspace {i} does not have orthonormal columns")
    w = _normalised(weights, len(Us))
    M = np.hstack([np.sqrt(wi) * U for wi, U in zip(w, Us)])
    left, singular, _ = np.linalg.svd(M, full_matrices=False)
    return _canonical_signs(left[:, :k]), singular**2
