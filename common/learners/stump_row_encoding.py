"""Row encodings of a stump share, ``"table"`` and ``"pair"`` (seed 002 §3.5.3; SPEC §6), and the owners' tables.

:func:`owner_tables` computes every owner's weighted cross tables ``W[a, side, k]`` at once (weights
scaled down to total ``weight_bound``, :func:`clipped_weights`); :class:`RowEncoding` releases them as
one vector of ``[-1, 1]^p`` through a row mechanism (PM, Duchi, Laplace) and decodes the sum.
:func:`difference_tables` rebuilds tables from estimated class differences, for ``"pair"`` and the
sampled ``"signs"`` encoding (:mod:`privfed.common.learners.stump_sampled_encoding`). Which encoding
to use, and the measured comparison, is :mod:`privfed.common.learners.stump_encodings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.base import Mechanism


def owner_tables(
    Xbin: Any, y: Any, w: Any, owner_of_row: Any, n_owners: int, *, n_classes: int, weight_bound: float
) -> np.ndarray:
    """Every owner's weighted cross tables, weights scaled down to total ``weight_bound`` where they exceed it.

    ``owner_of_row[i]`` is row i's owner in ``0..n_owners-1``. One sparse product over all rows, so
    a group of 10^4 owners costs one pass.

    Returns
    -------
    ndarray (n_owners, A, 2, K)
    """
    Xbin = np.atleast_2d(np.asarray(Xbin, dtype=bool))
    owner_of_row = np.asarray(owner_of_row, dtype=np.int64)
    r, a = Xbin.shape
    w = clipped_weights(w, owner_of_row, n_owners, weight_bound)
    cells = np.zeros((r, a, 2, n_classes))
    cells[np.arange(r)[:, None], np.arange(a)[None, :], Xbin.astype(np.intp), np.asarray(y)[:, None]] = w[:, None]
    import scipy.sparse as sp  # here, not at import: the coordinator's and owner's import paths stay scipy-free

    gather = sp.csr_matrix((np.ones(r), (owner_of_row, np.arange(r))), shape=(n_owners, r))
    return np.asarray(gather @ cells.reshape(r, -1)).reshape((n_owners, a, 2, n_classes))


def clipped_weights(w: Any, owner_of_row: np.ndarray, n_owners: int, weight_bound: float) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError("w must be finite non-negative weights")
    total = np.bincount(owner_of_row, weights=w, minlength=n_owners)
    scale = np.where(total > weight_bound, weight_bound / np.maximum(total, 1e-300), 1.0)
    return w * scale[owner_of_row]


def difference_tables(diff: np.ndarray, n_owners: int, weight_bound: float) -> np.ndarray:
    """Tables with ``W[a,v,0] - W[a,v,1] = diff[a,v]`` and each branch total ``n_owners weight_bound / 2``.

    The difference encodings do not release branch totals. Selection and leaves only need the
    differences (``sum_v max_k W = N/2 + sum_v |diff_av| / 2`` for two classes); the stump's
    ``error`` is exact when the total weight is ``N = n_owners * weight_bound`` (one-row owners at
    full weight, e.g. the first boosting round) and overstated otherwise.
    """
    half = n_owners * weight_bound / 4.0
    return np.stack([half + diff / 2.0, half - diff / 2.0], axis=2)


@dataclass(frozen=True, kw_only=True)
class RowEncoding:
    """``"table"`` or ``"pair"``: one vector per owner through a row mechanism (PM, Duchi, Laplace).

    ``"table"`` (seed 002 §3.5.3 as first implemented): ``t = 2 W / B - 1`` over all ``A * 2 * K``
    cells, decoded to ``sum (t* + 1) B / 2``. ``"pair"`` (the paper's "two values per attribute",
    two classes): ``t[a, v] = (W[a,v,0] - W[a,v,1]) / B`` in ``[-1, 1]`` (one owner's branch holds at
    most weight ``B``), ``2 A`` values, decoded to ``B sum t*``: an unbiased estimate of the class
    differences ``D[a, v]``, from which the error is ``(N - sum_v |D[a, v]|) / 2``. Both are ε-LDP for
    the owner's whole data set: one release of a vector of ``[-1, 1]^p`` through an ε-LDP mechanism.
    """

    kind: str
    mechanism: Mechanism | None
    n_attributes: int
    n_classes: int
    weight_bound: float

    def __post_init__(self) -> None:
        if self.kind == "pair" and self.n_classes != 2:
            raise ConfigError(f"encoding 'pair' needs two classes, got n_classes={self.n_classes}; use 'cells'")
        if self.mechanism is not None and getattr(self.mechanism, "d", None) != self.dim:
            raise ConfigError(
                f"encoding {self.kind!r} needs a row mechanism with d={self.dim}, got "
                f"{getattr(self.mechanism, 'd', None)!r}; build it with make_mechanism(name, epsilon=..., d={self.dim})"
            )

    @property
    def dim(self) -> int:
        return self.n_attributes * 2 * (self.n_classes if self.kind == "table" else 1)

    def statistic(self, tables: Any) -> np.ndarray:
        """What the encoding estimates from exact tables: the tables, or the class differences (A, 2)."""
        tables = np.asarray(tables, dtype=np.float64)
        return tables if self.kind == "table" else tables[..., 0] - tables[..., 1]

    def vectors(self, tables: Any) -> np.ndarray:
        """Owners' tables (n, A, 2, K) -> the vectors (n, dim) in ``[-1, 1]`` the mechanism perturbs."""
        s = self.statistic(tables).reshape(np.shape(tables)[0], -1) / self.weight_bound
        return np.clip(2.0 * s - 1.0 if self.kind == "table" else s, -1.0, 1.0)  # clip absorbs rounding

    def _mechanism(self) -> Mechanism:
        if self.mechanism is None:
            raise ConfigError(f"encoding {self.kind!r} needs a row mechanism with d={self.dim} to make shares")
        return self.mechanism

    def share(self, tables: Any, rng: np.random.Generator) -> np.ndarray:
        """Perturbed vectors (n, dim) of owners' tables (n, A, 2, K)."""
        return np.asarray(self._mechanism().privatize(self.vectors(tables), rng), dtype=np.float64)

    def estimate(self, reports: Any) -> np.ndarray:
        """Unbiased estimate of the summed statistic from reports (n, dim)."""
        reports = np.asarray(reports, dtype=np.float64)
        if reports.ndim != 2 or reports.shape[1] != self.dim:
            raise ConfigError(f"reports must have shape (n_owners, {self.dim}), got {reports.shape}")
        shape = (self.n_attributes, 2) + ((self.n_classes,) if self.kind == "table" else ())
        if self.kind == "table":
            return ((reports.sum(axis=0) + reports.shape[0]) * (self.weight_bound / 2.0)).reshape(shape)
        return (reports.sum(axis=0) * self.weight_bound).reshape(shape)

    def variance(self, tables: Any) -> np.ndarray:
        """Closed-form variance of one owner's contribution to :meth:`estimate`, from its exact tables."""
        scale = self.weight_bound / 2.0 if self.kind == "table" else self.weight_bound
        t = self.vectors(np.asarray(tables)[None])[0]
        return (scale**2 * self._mechanism().variance(t)).reshape(self.statistic(tables).shape)

    def to_tables(self, estimate: np.ndarray, n_owners: int) -> np.ndarray:
        if self.kind == "table":
            return estimate
        return difference_tables(estimate, n_owners, self.weight_bound)

    def aggregate(self, reports: Any) -> np.ndarray:
        """Coordinator side: summed tables (A, 2, K) from the owners' reports (n, dim) (:func:`stump_aggregate`)."""
        reports = np.atleast_2d(np.asarray(reports, dtype=np.float64))
        return self.to_tables(self.estimate(reports), reports.shape[0])
