"""Decision stumps from weighted cross tables (seed paper 002, §3.5.3 eq. 5; SPEC §6): the learner.

Numeric attributes are binarised at *data-independent* thresholds
``theta_{j,b} = lo_j + b (hi_j - lo_j) / B``, ``b = 1..B-1`` (SPEC §6), giving
``A = d (B - 1)`` binary attributes ``a = j (B - 1) + (b - 1)`` with value ``1[x_j >= theta_{j,b}]``.

:func:`cross_tables` sums the weights ``W[a, side, k]`` of the rows with attribute value ``side``
and class ``k``; :func:`select_stump` picks the attribute with minimal misclassification error from
(exact or aggregated) tables and reads the leaves off the same tables (post-processing: the paper's
extra round where owners report branch majorities is not needed). How owners release their tables
under LDP, and how the coordinator aggregates them, is :mod:`privfed.common.learners.stump_encodings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.validation import check_int


def thresholds(bounds: Bounds, n_bins: int, split_points: Any = None) -> np.ndarray:
    """The stumps' thresholds ``theta[j, b-1]``, b = 1..B-1: ``split_points`` when given, else the
    data-independent ``lo_j + b (hi_j - lo_j) / B`` (SPEC §6).

    ``split_points`` (d, B - 1) are public thresholds chosen before the run, e.g. LDP quantiles
    (:mod:`privfed.common.learners.split_points`); each row must be finite and inside the bounds.

    Returns
    -------
    ndarray (d, B - 1)
    """
    n_bins = check_int(n_bins, name="n_bins", minimum=2)
    if split_points is not None:
        return check_split_points(split_points, bounds, n_bins)
    b = np.arange(1, n_bins)
    return bounds.lo[:, None] + b[None, :] * (bounds.hi - bounds.lo)[:, None] / n_bins


def check_split_points(split_points: Any, bounds: Bounds, n_bins: int) -> np.ndarray:
    """``split_points`` as a (d, B - 1) float array of finite thresholds inside the bounds, or ConfigError."""
    sp = np.asarray(split_points, dtype=np.float64)
    if sp.shape != (bounds.d, n_bins - 1) or not np.all(np.isfinite(sp)):
        raise ConfigError(f"split points must be ({bounds.d}, {n_bins - 1}) finite thresholds, got shape {sp.shape}")
    if np.any(sp < bounds.lo[:, None]) or np.any(sp > bounds.hi[:, None]):
        raise ConfigError("split points must lie inside the public bounds of their features")
    return sp


def binarize(X: Any, bounds: Bounds, n_bins: int, split_points: Any = None) -> np.ndarray:
    """Binary attributes ``1[x_j >= theta_{j,b}]``, column ``a = j (B - 1) + (b - 1)`` (:func:`thresholds`).

    Returns
    -------
    ndarray (n, d (B - 1)) of bool
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    if X.shape[1] != bounds.d:
        raise ConfigError(f"rows have {X.shape[1]} features but the bounds describe {bounds.d}")
    return (X[:, :, None] >= thresholds(bounds, n_bins, split_points)[None, :, :]).reshape(X.shape[0], -1)


def check_rows(y: Any, w: Any, n: int, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """``y`` as n class indices in ``0..K-1`` and ``w`` as n finite non-negative weights, or ConfigError."""
    y = np.asarray(y)
    w = np.asarray(w, dtype=np.float64)
    if y.shape != (n,) or (n and (not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= n_classes)):
        raise ConfigError(f"y must be {n} integer class indices in 0..{n_classes - 1}")
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError(f"w must be {n} finite non-negative weights")
    return y, w


def cross_tables(Xbin: Any, y: Any, w: Any, n_classes: int) -> np.ndarray:
    """Weighted cross tables ``W[a, v, k] = sum_{i: Xbin[i, a] = v, y_i = k} w_i`` (SPEC §6).

    Returns
    -------
    ndarray (A, 2, K)
    """
    n_classes = check_int(n_classes, name="n_classes", minimum=2)
    Xbin = np.atleast_2d(np.asarray(Xbin, dtype=bool))
    n = Xbin.shape[0]
    y, w = check_rows(y, w, n, n_classes)
    per_class = np.zeros((n, n_classes))
    per_class[np.arange(n), y] = w
    ones = Xbin.T.astype(np.float64) @ per_class  # (A, K): side 1
    return np.stack([per_class.sum(axis=0)[None, :] - ones, ones], axis=1)


@dataclass(frozen=True)
class Stump:
    """A decision stump: ``leaves[1]`` if ``x[attribute] >= threshold`` else ``leaves[0]``.

    Attributes
    ----------
    attribute : int
        Feature index j.
    threshold_index : int
        b in 1..B-1; ``threshold = lo_j + b (hi_j - lo_j) / B``.
    threshold : float
    leaves : tuple of two ints
        Class index for side 0 (``x < threshold``) and side 1.
    error : float
        Weighted misclassification error read off the (aggregated) tables; ``nan`` when the
        estimated total weight is not positive.
    """

    attribute: int
    threshold_index: int
    threshold: float
    leaves: tuple[int, int]
    error: float

    kind = "stump"

    def predict(self, X: Any) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        if not 0 <= self.attribute < X.shape[1]:
            raise ConfigError(f"stump splits feature {self.attribute} but the rows have {X.shape[1]} features")
        return np.asarray(self.leaves, dtype=np.int64)[(X[:, self.attribute] >= self.threshold).astype(np.int64)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "attribute": self.attribute,
            "threshold_index": self.threshold_index,
            "threshold": self.threshold,
            "leaves": list(self.leaves),
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stump:
        if data.get("kind") != cls.kind:
            raise ConfigError(f"not a {cls.kind} model: kind={data.get('kind')!r}")
        return cls(
            int(data["attribute"]),
            int(data["threshold_index"]),
            float(data["threshold"]),
            (int(data["leaves"][0]), int(data["leaves"][1])),
            float(data["error"]),
        )


def table_errors(tables: Any) -> np.ndarray:
    """Misclassification error of every attribute: ``1 - sum_v max_k W[a, v, k] / total`` (SPEC §6).

    ``total`` is the mean over attributes of ``sum_{v,k} W[a, v, k]``. With exact tables every
    attribute has the same total, so this is SPEC §6's per-attribute formula. With perturbed
    tables the per-attribute totals differ only by noise; a common denominator keeps that
    noise out of the ranking (argmin error = argmax of ``sum_v max_k W``, the paper's "mean
    estimation" rule) and is post-processing. ``nan`` when ``total <= 0``.
    """
    tables = np.asarray(tables, dtype=np.float64)
    if tables.ndim != 3 or tables.shape[1] != 2 or tables.shape[0] < 1:
        raise ConfigError(f"tables must have shape (A >= 1, 2, K), got {tables.shape}")
    total = tables.sum(axis=(1, 2)).mean()
    correct = tables.max(axis=2).sum(axis=1)
    return 1.0 - correct / total if total > 0 else np.full(tables.shape[0], np.nan)


def select_stump(tables: Any, *, bounds: Bounds, n_bins: int, split_points: Any = None) -> Stump:
    """Coordinator side: the stump with minimal misclassification error (SPEC §6).

    Ties go to the lowest attribute, then the lowest threshold (the lowest flat index
    ``a = j (B - 1) + (b - 1)``). Leaves are ``argmax_k W[a, v, k]`` (ties: lowest class) from
    the same tables, applied to the estimates as they are, negative entries included.

    Parameters
    ----------
    tables : array (d (B - 1), 2, K)
        Summed cross tables (exact, or :func:`stump_aggregate` output).
    bounds : Bounds
    n_bins : int >= 2
    split_points : array (d, B - 1), optional
        Public thresholds (:func:`thresholds`); default the equal-width ones.
    """
    tables = np.asarray(tables, dtype=np.float64)
    n_bins = check_int(n_bins, name="n_bins", minimum=2)
    if tables.ndim != 3 or tables.shape[0] != bounds.d * (n_bins - 1):
        raise ConfigError(
            f"tables must have shape ({bounds.d * (n_bins - 1)}, 2, K) for {bounds.d} features "
            f"and n_bins={n_bins}, got {tables.shape}"
        )
    errors = table_errors(tables)
    a = int(np.argmax(tables.max(axis=2).sum(axis=1)))  # = argmin of errors; first index on ties
    j, b = divmod(a, n_bins - 1)
    leaves = np.argmax(tables[a], axis=1)
    return Stump(
        attribute=j,
        threshold_index=b + 1,
        threshold=float(thresholds(bounds, n_bins, split_points)[j, b]),
        leaves=(int(leaves[0]), int(leaves[1])),
        error=float(errors[a]),
    )
