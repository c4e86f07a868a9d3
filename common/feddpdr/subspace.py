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


def _checked_weights(weights: ArrayLike, count: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (count,):
        raise ConfigError(f"need one weight per owner ({count}), got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError(f"weights must be finite and non-negative, got {w.tolist()}")
    return w


class WeightedSum:
    """``sum_i w_i theta_i`` and ``sum_i w_i`` over same-shaped arrays added batch by batch; their
    ratio is :func:`weighted_average` (the coordinator folds the owners' releases as they come,
    issue 27)."""

    def __init__(self) -> None:
        self.total: np.ndarray | None = None
        self.weight = 0.0

    def add(self, params: Sequence[np.ndarray], weights: ArrayLike) -> None:
        arrays = [np.asarray(p, dtype=np.float64) for p in params]
        shape = arrays[0].shape if self.total is None else self.total.shape
        if any(a.shape != shape for a in arrays):
            raise ConfigError(f"parameters must share one shape, got {[a.shape for a in arrays]}")
        w = _checked_weights(weights, len(arrays))
        part = np.tensordot(w, np.stack(arrays), axes=1)
        self.total = part if self.total is None else self.total + part
        self.weight += float(w.sum())

    def mean(self) -> np.ndarray:
        if self.total is None:
            raise ConfigError("weighted_average needs at least one parameter array")
        if not self.weight > 0:
            raise ConfigError("weights must not be all zero")
        return self.total / self.weight


def weighted_average(params: Sequence[np.ndarray], weights: ArrayLike) -> np.ndarray:
    """``sum_i w_i theta_i`` over same-shaped arrays (seed 004 Alg. 1 line 8; SPEC §9).

    Weights are relative: they are divided by their sum (so raw counts work too).
    """
    if len(params) == 0:
        raise ConfigError("weighted_average needs at least one parameter array")
    total = WeightedSum()
    total.add(params, weights)
    return total.mean()


def _canonical_signs(U: np.ndarray) -> np.ndarray:
    """Flip each column so its largest-magnitude entry is positive (a reproducible orientation)."""
    idx = np.argmax(np.abs(U), axis=0)
    signs = np.sign(U[idx, np.arange(U.shape[1])])
    signs[signs == 0] = 1.0
    return U * signs


class ProjectorSum:
    """``G = sum_i w_i U_i U_i^T`` and ``sum_i w_i`` of (d, k) subspaces added batch by batch, so the
    coordinator folds the owners' DP-PCA releases as they come (issue 27). ``P = G / sum_i w_i`` is
    the weighted projector average (module docstring); :meth:`result` gives its top-k eigenvectors.

    A batch costs O(d^2 b k) (``G += M M^T`` with ``M = [sqrt(w_1) U_1, ..., sqrt(w_b) U_b]``) and the
    result O(d^3), whatever the number of owners.
    """

    def __init__(self, d: int, k: int) -> None:
        self.d, self.k = d, k
        self.gram = np.zeros((d, d))
        self.weight = 0.0
        self.count = 0

    def add(self, Us: Sequence[np.ndarray], weights: ArrayLike) -> None:
        """Add subspaces ``Us`` (each (d, k), orthonormal columns) with relative weights ``weights``."""
        Us = [np.asarray(U, dtype=np.float64) for U in Us]
        for i, U in enumerate(Us):
            if U.shape != (self.d, self.k):
                raise ConfigError(f"subspace {i} has shape {U.shape}, expected {(self.d, self.k)}")
            if not np.allclose(U.T @ U, np.eye(self.k), atol=1e-8):
                raise ConfigError(f"subspace {i} does not have orthonormal columns")
        w = _checked_weights(weights, len(Us))
        if not Us:
            return
        M = np.hstack([np.sqrt(wi) * U for wi, U in zip(w, Us)])
        self.gram += M @ M.T
        self.weight += float(w.sum())
        self.count += len(Us)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(U_global, eigenvalues) as :func:`aggregate_subspaces` returns them."""
        if not self.count:
            raise ConfigError("aggregate_subspaces needs at least one subspace")
        if not self.weight > 0:
            raise ConfigError("weights must not be all zero")
        values, vectors = np.linalg.eigh(self.gram / self.weight)  # ascending
        rank = min(self.d, self.count * self.k)
        return _canonical_signs(vectors[:, ::-1][:, : self.k]), np.clip(values[::-1][:rank], 0.0, None)


def aggregate_subspaces(Us: Sequence[np.ndarray], weights: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Weighted projector average of k-dimensional subspaces (SPEC §9; seed 004 Alg. 1 line 4).

    ``P = sum_i w_i U_i U_i^T`` (:class:`ProjectorSum`, which the coordinator fills as the releases
    come); the global basis is its top-k eigenvectors.

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
    d, k = np.shape(Us[0])
    total = ProjectorSum(d, k)
    total.add(Us, weights)
    return total.result()
