"""Decision stumps from perturbed weighted cross tables (seed paper 002, §3.5.3 eq. 5; SPEC §6).

Numeric attributes are binarised at *data-independent* thresholds
``theta_{j,b} = lo_j + b (hi_j - lo_j) / B``, ``b = 1..B-1`` (SPEC §6), giving
``A = d (B - 1)`` binary attributes ``a = j (B - 1) + (b - 1)`` with value ``1[x_j >= theta_{j,b}]``.

Owner side, :func:`stump_share`: the owner's weighted cross tables ``W[a, side, k]`` (sum of the
weights of its rows with attribute value ``side`` and class ``k``) are divided by a public bound
on the owner's total weight, mapped to ``[-1, 1]``, flattened into one vector of length
``A * 2 * K`` and perturbed once. Coordinator side: :func:`stump_aggregate` sums the unbiased
per-owner table estimates, :func:`select_stump` picks the attribute with minimal
misclassification error and reads the leaves off the same tables (post-processing; the paper's
extra round where owners report branch majorities is not needed).

Privacy. An owner's whole table vector goes through one ε-LDP mechanism that accepts any point
of ``[-1, 1]^p``, so the owner's data set (features, labels and weights) is protected at ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def thresholds(bounds: Bounds, n_bins: int) -> np.ndarray:
    """Data-independent thresholds ``theta[j, b-1] = lo_j + b (hi_j - lo_j) / B``, b = 1..B-1 (SPEC §6).

    Returns
    -------
    ndarray (d, B - 1)
    """
    n_bins = _check_int("n_bins", n_bins, 2)
    b = np.arange(1, n_bins)
    return bounds.lo[:, None] + b[None, :] * (bounds.hi - bounds.lo)[:, None] / n_bins


def binarize(X, bounds: Bounds, n_bins: int) -> np.ndarray:
    """Binary attributes ``1[x_j >= theta_{j,b}]``, column ``a = j (B - 1) + (b - 1)``.

    Returns
    -------
    ndarray (n, d (B - 1)) of bool
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    if X.shape[1] != bounds.d:
        raise ConfigError(f"rows have {X.shape[1]} features but the bounds describe {bounds.d}")
    return (X[:, :, None] >= thresholds(bounds, n_bins)[None, :, :]).reshape(X.shape[0], -1)


def cross_tables(Xbin, y, w, n_classes: int) -> np.ndarray:
    """Weighted cross tables ``W[a, v, k] = sum_{i: Xbin[i, a] = v, y_i = k} w_i`` (SPEC §6).

    Returns
    -------
    ndarray (A, 2, K)
    """
    n_classes = _check_int("n_classes", n_classes, 2)
    Xbin = np.atleast_2d(np.asarray(Xbin, dtype=bool))
    n = Xbin.shape[0]
    y = np.asarray(y)
    w = np.asarray(w, dtype=np.float64)
    if y.shape != (n,) or (n and (not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= n_classes)):
        raise ConfigError(f"y must be {n} integer class indices in 0..{n_classes - 1}")
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError(f"w must be {n} finite non-negative weights")
    per_class = np.zeros((n, n_classes))
    per_class[np.arange(n), y] = w
    ones = Xbin.T.astype(np.float64) @ per_class  # (A, K): side 1
    return np.stack([per_class.sum(axis=0)[None, :] - ones, ones], axis=1)


def stump_share(
    X, y, w, *, bounds: Bounds, n_bins: int, n_classes: int, weight_bound: float, mechanism, rng: np.random.Generator
) -> np.ndarray:
    """Owner side: perturb the owner's cross tables once (seed 002 §3.5.3).

    Every table entry lies in ``[0, sum(w)]``. The public ``weight_bound`` bounds an owner's
    total weight: if ``sum(w)`` exceeds it, the owner scales its weights down to meet it (a
    clip: still ε-LDP, but it biases that owner's tables, so choose the bound generously, e.g.
    the largest owner's row count when weights are normalised to mean 1). The tables divided
    by ``weight_bound`` lie in ``[0, 1]``; ``t = 2 W / weight_bound - 1`` is flattened to one
    vector of length ``p = A * 2 * K`` and perturbed with ``mechanism`` (``d = p``).

    Returns
    -------
    ndarray (p,)
        The report, in t-space. Decode with :func:`stump_aggregate`.
    """
    if isinstance(weight_bound, bool) or not isinstance(weight_bound, Real) or not 0 < weight_bound < math.inf:
        raise ConfigError(f"weight_bound must be a finite number > 0, got {weight_bound!r}")
    w = np.asarray(w, dtype=np.float64)
    total = float(w.sum()) if w.size else 0.0
    if np.isfinite(total) and total > weight_bound:
        w = w * (weight_bound / total)
    tables = cross_tables(binarize(X, bounds, n_bins), y, w, n_classes)
    t = np.clip(2.0 * tables.ravel() / weight_bound - 1.0, -1.0, 1.0)  # clip only absorbs rounding
    if mechanism.d != t.shape[0]:
        raise ConfigError(
            f"mechanism has d={mechanism.d} but the tables have {t.shape[0]} entries; build it with d={t.shape[0]}"
        )
    return np.asarray(mechanism.privatize(t[None, :], rng), dtype=np.float64)[0]


def stump_aggregate(reports, *, weight_bound: float, n_attributes: int, n_classes: int) -> np.ndarray:
    """Coordinator side: unbiased estimate of the summed tables, ``sum_owners (t* + 1) weight_bound / 2``.

    Parameters
    ----------
    reports : array (n_owners, A * 2 * K)
    weight_bound : float
        The public bound the owners used.
    n_attributes : int
        ``A = d (B - 1)``.

    Returns
    -------
    ndarray (A, 2, K)
        May hold negative entries under LDP (SPEC §6).
    """
    n_attributes = _check_int("n_attributes", n_attributes, 1)
    n_classes = _check_int("n_classes", n_classes, 2)
    p = n_attributes * 2 * n_classes
    reports = np.asarray(reports, dtype=np.float64)
    if reports.ndim != 2 or reports.shape[1] != p:
        raise ConfigError(f"reports must have shape (n_owners, {p}), got {reports.shape}")
    return ((reports.sum(axis=0) + reports.shape[0]) * (float(weight_bound) / 2.0)).reshape(n_attributes, 2, n_classes)


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

    def predict(self, X) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        if not 0 <= self.attribute < X.shape[1]:
            raise ConfigError(f"stump splits feature {self.attribute} but the rows have {X.shape[1]} features")
        return np.asarray(self.leaves, dtype=np.int64)[(X[:, self.attribute] >= self.threshold).astype(np.int64)]

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "attribute": self.attribute,
            "threshold_index": self.threshold_index,
            "threshold": self.threshold,
            "leaves": list(self.leaves),
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Stump:
        if data.get("kind") != cls.kind:
            raise ConfigError(f"not a {cls.kind} model: kind={data.get('kind')!r}")
        return cls(
            int(data["attribute"]),
            int(data["threshold_index"]),
            float(data["threshold"]),
            (int(data["leaves"][0]), int(data["leaves"][1])),
            float(data["error"]),
        )


def table_errors(tables) -> np.ndarray:
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


def select_stump(tables, *, bounds: Bounds, n_bins: int) -> Stump:
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
    """
    tables = np.asarray(tables, dtype=np.float64)
    n_bins = _check_int("n_bins", n_bins, 2)
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
        threshold=float(thresholds(bounds, n_bins)[j, b]),
        leaves=(int(leaves[0]), int(leaves[1])),
        error=float(errors[a]),
    )
