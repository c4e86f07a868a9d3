"""Stump share encodings: how an owner releases its weighted cross tables under LDP (seed 002 §3.5.3; SPEC §6).

Owner side, :func:`stump_share` (:func:`stump_shares` for many owners at once): one ε-LDP share
of the owner's weighted cross tables ``W[a, side, k]`` (:func:`privfed.common.learners.stump.cross_tables`;
the weights scaled down to total ``weight_bound`` if they exceed it), in one of four *encodings*
(:data:`STUMP_ENCODINGS`, issue 12 item 1):

* ``"signs"`` (default for two classes): each owner samples m of the ``A + 1`` signed
  coordinates (the paper's class difference per branch, rewritten as one sign per attribute plus
  the class) and reports their sign pattern by k-RR (:class:`SampledEncoding`);
* ``"cells"`` (default for K > 2): each owner samples m attributes and reports their joint
  (branch, ..., class) cell through a frequency oracle, k-RR, OUE or OLH
  (:mod:`privfed.common.mechanisms.frequency`);
* ``"pair"``: the paper's "two values per attribute" (seed 002 §3.5.3), ``W[a,v,0] - W[a,v,1]``
  for both branches, ``2 A`` values through a row mechanism (PM, Duchi, Laplace; :class:`RowEncoding`);
* ``"table"``: the whole ``A * 2 * K`` table through a row mechanism (the first implementation).

Coordinator side: :func:`stump_aggregate` turns the reports into summed tables (unbiased cells, or
unbiased class differences for ``"signs"``/``"pair"``) for
:func:`~privfed.common.learners.stump.select_stump`.

Privacy. Every encoding releases one report per owner from an ε-LDP mechanism over all possible
inputs (a vector of ``[-1, 1]^p``, or a value of the oracle's whole domain), and what a sampled
encoding adds (the sampled coordinates, the row picked by weight) is independent of the data or
a randomised function of it, so the owner's data set (features, labels and weights) is protected
at ε. One share costs exactly its ε, whatever the encoding.

Measured (``privfed experiment stump-hit-rate --runs 200 --epsilon 1,3,5,8``, synthetic set,
10^4 one-row owners, top-3 hit rate at ε = 1 / 3 / 5 / 8): signs 0.68 / 0.98 / 1.00 / 1.00,
cells with k-RR 0.36 / 0.88 / 0.98 / 1.00, pair with PM 0.38 / 0.74 / 0.78 / 0.90, table with PM
0.23 / 0.47 / 0.64 / 0.70; OUE and OLH trail k-RR at these small domains. The whole table, and
MNIST 4 vs 9, in :mod:`privfed.deploy.experiments.boosting`. So ``"signs"`` is the default for
two classes and ``"cells"`` (k-RR) for more.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.stump import binarize, check_rows
from privfed.common.mechanisms.base import Mechanism, check_epsilon
from privfed.common.mechanisms.frequency import ORACLES, FrequencyOracle, make_oracle
from privfed.common.validation import check_int, check_positive

#: Share encodings, best first (module docstring, "Measured").
STUMP_ENCODINGS = ("signs", "cells", "pair", "table")
#: Most coordinates an owner samples in a sampled encoding (the domain grows like 2^m).
MAX_SAMPLED = 8


def default_encoding(n_classes: int) -> str:
    """The default share encoding: ``"signs"`` for two classes, else ``"cells"`` (measured, module docstring)."""
    return "signs" if check_int(n_classes, name="n_classes", minimum=2) == 2 else "cells"


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
    w = _clipped_weights(w, owner_of_row, n_owners, weight_bound)
    cells = np.zeros((r, a, 2, n_classes))
    cells[np.arange(r)[:, None], np.arange(a)[None, :], Xbin.astype(np.intp), np.asarray(y)[:, None]] = w[:, None]
    import scipy.sparse as sp  # here, not at import: the coordinator's and owner's import paths stay scipy-free

    gather = sp.csr_matrix((np.ones(r), (owner_of_row, np.arange(r))), shape=(n_owners, r))
    return np.asarray(gather @ cells.reshape(r, -1)).reshape((n_owners, a, 2, n_classes))


def _clipped_weights(w: Any, owner_of_row: np.ndarray, n_owners: int, weight_bound: float) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError("w must be finite non-negative weights")
    total = np.bincount(owner_of_row, weights=w, minlength=n_owners)
    scale = np.where(total > weight_bound, weight_bound / np.maximum(total, 1e-300), 1.0)
    return w * scale[owner_of_row]


def _check_weight_bound(weight_bound: object) -> float:
    return check_positive(weight_bound, name="weight_bound")


def _difference_tables(diff: np.ndarray, n_owners: int, weight_bound: float) -> np.ndarray:
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
        return _difference_tables(estimate, n_owners, self.weight_bound)

    def aggregate(self, reports: Any) -> np.ndarray:
        """Coordinator side: summed tables (A, 2, K) from the owners' reports (n, dim) (:func:`stump_aggregate`)."""
        reports = np.atleast_2d(np.asarray(reports, dtype=np.float64))
        return self.to_tables(self.estimate(reports), reports.shape[0])


@dataclass(frozen=True)
class SampledReports:
    """Reports of a sampled encoding, one row per owner; all fields but the arrays are public configuration.

    Attributes
    ----------
    encoding : {"signs", "cells"}
    oracle : str
    epsilon : float
    coordinates : int64 array (n, m)
        The coordinates (attributes; for ``"signs"`` index ``A`` is the class coordinate) each owner
        sampled, independently of its data.
    reports : int64 array (n, report_width)
        The frequency oracle's reports.
    """

    encoding: str
    oracle: str
    epsilon: float
    coordinates: np.ndarray
    reports: np.ndarray

    def __len__(self) -> int:
        return int(self.coordinates.shape[0])

    @classmethod
    def concat(cls, parts: Iterable[SampledReports]) -> SampledReports:
        """Stack several owners' reports of the same configuration."""
        parts = list(parts)
        if not parts or len({(p.encoding, p.oracle, p.epsilon, p.coordinates.shape[1]) for p in parts}) != 1:
            raise ConfigError("can only stack a non-empty list of reports of one encoding configuration")
        first = parts[0]
        return cls(
            first.encoding,
            first.oracle,
            first.epsilon,
            np.concatenate([p.coordinates for p in parts]),
            np.concatenate([p.reports for p in parts]),
        )


@dataclass(frozen=True, kw_only=True)
class SampledEncoding:
    """``"signs"`` or ``"cells"``: each owner samples m coordinates and reports one category through a frequency oracle.

    Attribute sampling with a frequency oracle is the classic answer to many-attribute LDP
    statistics (marginals: Cormode, Kulkarni, Srivastava, SIGMOD 2018; oracles: Wang et al.,
    USENIX Security 2017, :mod:`privfed.common.mechanisms.frequency`). The owner draws its ``m``
    coordinates uniformly without replacement, independently of its data (owner-local randomness;
    they travel in the clear with the report), and one *input*: a row ``r`` with probability
    ``w_r / B`` (its SAMME weight, the owner's weights scaled down to total ``B`` if they exceed it),
    else nothing (``⊥``, probability ``1 - sum_r w_r / B``). Then, at the whole ε:

    * ``"cells"`` (any K): the joint cell ``(x_{r,c_1}, ..., x_{r,c_m}, y_r)`` of the m sampled
      binary attributes, one of ``2^m K`` values, or ``⊥`` (value ``2^m K``), through k-RR, OUE or OLH.
      The coordinator sums the supports over the ``2^(m-1)`` joint values with ``(x_{c_j}, y) = (v, k)``,
      debiases (``(s - q 2^(m-1)) / (p - q)``) and scales by ``B A / m``. Unbiased:
      ``E = (m / A) (A / m) B sum_r (w_r / B) 1[row r in cell (a, v, k)] = W[a, v, k]``.
      ``m = 1`` is the single-attribute design (2K cells + ⊥).
    * ``"signs"`` (two classes): the paper's two values per attribute, ``D[a, v] = W[a,v,0] - W[a,v,1]``,
      rewritten as ``D[a, v] = (D + (2v - 1) U_a) / 2`` with the class difference ``D = sum_r w_r s_r``
      and ``U_a = sum_r w_r s_r (2 x_ra - 1)``, ``s_r = +1`` for class 0, ``-1`` for class 1. A row
      contributes a sign ``u_j`` in ``{-1, 1}`` to each of the ``A + 1`` coordinates (A attributes and
      the class), so the owner reports the sign pattern of its m sampled coordinates, one of
      ``2^m`` values, by k-RR (``⊥``: a uniformly random pattern, mean 0). ``E[z_j] = (p - q) u_j``
      for the reported sign ``z_j`` (the other patterns' signs sum to ``-u_j``), so
      ``B (A + 1) / m z_j / (p - q)`` is unbiased for the owner's ``U_a`` (or ``D``), with the exact
      per-owner variance ``(A + 1) B^2 / (m (p - q)^2) - U_a^2``. Half the domain of ``"cells"``
      with K = 2, and selection needs only ``|U_a|`` (``sum_v |D[a,v]| = max(|D|, |U_a|) * 2 / 2``).

    ``n_sampled=None`` picks the m that minimises the closed-form per-owner variance of one
    coordinate's estimate (as Algorithm 4 picks k for PM): more coordinates per owner shrink the
    sampling factor ``A / m`` but enlarge the domain, so m grows with ε (signs, A = 20: m = 1 at
    ε = 1, 2 at ε = 2, 3 at ε = 3, 5 at ε = 5).

    Privacy: the coordinates are independent of the data; the input is a (randomised) function of
    the owner's data set and the oracle is ε-LDP over its whole domain, so a report is ε-LDP for the
    owner's whole data set (features, labels and weights), as the row encodings.
    """

    kind: str
    epsilon: float
    n_attributes: int
    n_classes: int
    weight_bound: float
    n_sampled: int | None = None
    oracle: str = "krr"

    def __post_init__(self) -> None:
        if self.kind == "signs" and self.n_classes != 2:
            raise ConfigError(f"encoding 'signs' needs two classes, got n_classes={self.n_classes}; use 'cells'")
        if self.kind == "signs" and self.oracle != "krr":
            raise ConfigError(f"encoding 'signs' reports sign patterns by k-RR, got oracle={self.oracle!r}")
        if self.oracle not in ORACLES:
            raise ConfigError(f"oracle must be one of {ORACLES}, got {self.oracle!r}")
        limit = min(self.n_coordinates, MAX_SAMPLED)
        if self.n_sampled is None:
            m = min(range(1, limit + 1), key=self._noise_factor)
        else:
            m = check_int(self.n_sampled, name="n_sampled", minimum=1)
            if m > limit:
                raise ConfigError(f"n_sampled must be <= {limit} (coordinates, and at most {MAX_SAMPLED}), got {m}")
        object.__setattr__(self, "n_sampled", m)

    @property
    def m(self) -> int:
        """The number of coordinates each owner samples (``n_sampled`` as resolved when built)."""
        if self.n_sampled is None:  # never: __post_init__ resolves it
            raise ConfigError("n_sampled was not resolved")
        return self.n_sampled

    @property
    def n_coordinates(self) -> int:
        return self.n_attributes + (1 if self.kind == "signs" else 0)

    def _domain(self, m: int) -> int:
        return 2**m if self.kind == "signs" else 2**m * self.n_classes + 1

    def _noise_factor(self, m: int) -> float:
        """Per-owner second moment of one coordinate's estimate in units of ``B^2`` (data-independent).

        Signs: exact for every owner (``z^2 = 1``). Cells: for an owner whose input lies in the cell
        with probability ``1 / (2K)``, the average over a branch and class; it counts the sampling
        term as well as the oracle's noise, both of which the choice of m trades.
        """
        oracle = make_oracle(self.oracle, epsilon=self.epsilon, domain=self._domain(m))
        gap = (oracle.p - oracle.q) ** 2
        if self.kind == "signs":
            return self.n_coordinates / (m * gap)
        return self.n_coordinates / m * oracle.set_second_moment(2 ** (m - 1), 0.5 / self.n_classes) / gap

    @cached_property
    def frequency_oracle(self) -> FrequencyOracle:
        return make_oracle(self.oracle, epsilon=self.epsilon, domain=self._domain(self.m))

    def statistic(self, tables: Any) -> np.ndarray:
        """What the encoding estimates: the tables (cells), or ``(U_1..U_A, D)`` (signs), from exact tables."""
        tables = np.asarray(tables, dtype=np.float64)
        if self.kind == "cells":
            return tables
        diff = tables[..., 0] - tables[..., 1]  # (..., A, 2)
        return np.concatenate([diff[..., 1] - diff[..., 0], diff[..., :1, :].sum(axis=-1)], axis=-1)

    def share(
        self, Xbin: Any, y: Any, w: Any, owner_of_row: np.ndarray, n_owners: int, rng: np.random.Generator
    ) -> SampledReports:
        """Reports of ``n_owners`` owners (rows ``owner_of_row``), vectorised over owners."""
        m, C = self.m, self.n_coordinates
        coords = np.argsort(rng.random((n_owners, C)), axis=1)[:, :m].astype(np.int64)
        row = _pick_rows(
            _clipped_weights(w, owner_of_row, n_owners, self.weight_bound),
            owner_of_row,
            n_owners,
            self.weight_bound,
            rng,
        )
        has = row >= 0
        Xbin = np.asarray(Xbin, dtype=bool)
        y = np.asarray(y, dtype=np.int64)
        bits = np.zeros((n_owners, m), dtype=np.int64)
        r = row[has]
        if self.kind == "signs":
            u = np.concatenate([Xbin[r] ^ (y[r] == 1)[:, None], (y[r] == 0)[:, None]], axis=1)  # sign > 0
            bits[has] = u[np.arange(r.shape[0])[:, None], coords[has]]
            bits[~has] = rng.integers(0, 2, size=(int((~has).sum()), m))
            values = bits @ (1 << np.arange(m))
        else:
            bits[has] = Xbin[r[:, None], coords[has]]
            values = np.where(
                has,
                (bits @ (1 << np.arange(m))) * self.n_classes + y[np.maximum(row, 0)],
                2**m * self.n_classes,
            )
        reports = self.frequency_oracle.privatize(values, rng)
        return SampledReports(self.kind, self.oracle, self.epsilon, coords, reports)

    def estimate(self, reports: SampledReports) -> np.ndarray:
        """Unbiased estimate of the summed statistic: tables (A, 2, K) or ``(U_1..U_A, D)``."""
        m, oracle = self.m, self.frequency_oracle
        if (reports.encoding, reports.oracle, reports.epsilon, reports.coordinates.shape[1]) != (
            self.kind,
            self.oracle,
            self.epsilon,
            m,
        ):
            raise ConfigError("reports were made with another encoding configuration")
        coords = np.asarray(reports.coordinates, dtype=np.int64)
        if coords.size and (coords.min() < 0 or coords.max() >= self.n_coordinates):
            raise ConfigError(f"sampled coordinates must lie in 0..{self.n_coordinates - 1}")
        if m > 1 and np.any(np.diff(np.sort(coords, axis=1), axis=1) == 0):
            raise ConfigError("an owner's sampled coordinates must be distinct (sampled without replacement)")
        support = oracle.supports(reports.reports)
        scale = self.weight_bound * self.n_coordinates / m / (oracle.p - oracle.q)
        values = np.arange(2**m * (self.n_classes if self.kind == "cells" else 1))
        if self.kind == "signs":
            out = np.zeros(self.n_coordinates)
            for j in range(m):
                sign = 2.0 * ((values >> j) & 1) - 1.0
                np.add.at(out, coords[:, j], support[:, : values.size] @ sign)
            return out * scale
        K = self.n_classes
        out = np.zeros((self.n_attributes, 2 * K))
        for j in range(m):
            cell_of = ((values // K >> j) & 1) * K + values % K
            marg = support[:, : values.size].astype(np.float64) @ (cell_of[:, None] == np.arange(2 * K)[None, :])
            np.add.at(out, coords[:, j], marg - oracle.q * 2 ** (m - 1))
        return (out * scale).reshape(self.n_attributes, 2, K)

    def variance(self, tables: Any) -> np.ndarray:
        """Closed-form variance of one owner's contribution to :meth:`estimate`, from its exact (clipped) tables."""
        m, oracle, B = self.m, self.frequency_oracle, self.weight_bound
        stat = self.statistic(tables)
        gap = (oracle.p - oracle.q) ** 2
        if self.kind == "signs":
            return np.full(stat.shape, self.n_coordinates * B**2 / (m * gap)) - stat**2
        second = np.vectorize(lambda pi: oracle.set_second_moment(2 ** (m - 1), pi))(stat / B)
        return self.n_coordinates / m * B**2 * second / gap - stat**2

    def aggregate(self, reports: SampledReports) -> np.ndarray:
        """Coordinator side: summed tables (A, 2, K) from the owners' reports (:func:`stump_aggregate`)."""
        return self.to_tables(self.estimate(reports), len(reports))

    def reports_of(self, coordinates: Any, reports: Any) -> SampledReports:
        """Reports received as plain arrays (the wire) as :class:`SampledReports` of this encoding.

        Raises
        ------
        ConfigError
            Shapes that do not fit the encoding, non-integer values, coordinates outside
            ``0..n_coordinates-1`` or repeated within an owner, reports outside the oracle's domain.
        """
        coords = np.asarray(coordinates, dtype=np.float64)
        values = np.asarray(reports, dtype=np.float64)
        width = self.frequency_oracle.report_width
        if coords.ndim != 2 or coords.shape[1] != self.m or values.shape != (coords.shape[0], width):
            raise ConfigError(
                f"sampled reports must be ({self.m} coordinates, {width} report values) per owner, got "
                f"{coords.shape} and {values.shape}"
            )
        if not (np.all(coords == np.rint(coords)) and np.all(values == np.rint(values))):
            raise ConfigError("sampled coordinates and reports must be integers")
        out = SampledReports(self.kind, self.oracle, self.epsilon, coords.astype(np.int64), values.astype(np.int64))
        if out.coordinates.size and (out.coordinates.min() < 0 or out.coordinates.max() >= self.n_coordinates):
            raise ConfigError(f"sampled coordinates must lie in 0..{self.n_coordinates - 1}")
        if np.any(np.diff(np.sort(out.coordinates, axis=1), axis=1) == 0):
            raise ConfigError("an owner's sampled coordinates must be distinct (sampled without replacement)")
        self.frequency_oracle.supports(out.reports)  # refuses reports outside the oracle's domain
        return out

    def to_tables(self, estimate: np.ndarray, n_owners: int) -> np.ndarray:
        if self.kind == "cells":
            return estimate
        U, D = estimate[: self.n_attributes], estimate[self.n_attributes]
        return _difference_tables(np.stack([(D - U) / 2.0, (D + U) / 2.0], axis=1), n_owners, self.weight_bound)


def _pick_rows(
    w: np.ndarray, owner_of_row: np.ndarray, n_owners: int, weight_bound: float, rng: np.random.Generator
) -> np.ndarray:
    """Per owner, row ``r`` with probability ``w_r / weight_bound``, else ``-1`` (weights already clipped)."""
    order = np.argsort(owner_of_row, kind="stable")
    cum = np.cumsum(w[order])
    counts = np.bincount(owner_of_row, minlength=n_owners)
    end = np.cumsum(counts)
    start_cum = np.concatenate([[0.0], cum])[end - counts]
    end_cum = np.concatenate([[0.0], cum])[end]
    target = start_cum + rng.random(n_owners) * weight_bound
    pos = np.searchsorted(cum, target, side="right")
    hit = (target < end_cum) & (counts > 0)
    return np.where(hit, order[np.minimum(pos, max(order.size - 1, 0))], -1)


#: A share encoding (:func:`make_stump_encoding`).
StumpEncoding = RowEncoding | SampledEncoding


def make_stump_encoding(
    encoding: str,
    *,
    n_attributes: int,
    n_classes: int,
    weight_bound: float,
    mechanism: Mechanism | None = None,
    epsilon: float | None = None,
    n_sampled: int | None = None,
    oracle: str = "krr",
) -> StumpEncoding:
    """Build a share encoding by name (:data:`STUMP_ENCODINGS`).

    ``"table"`` and ``"pair"`` take a row ``mechanism`` (``make_mechanism(name, epsilon=..., d=...)``);
    ``"signs"`` and ``"cells"`` take ``epsilon`` (and ``n_sampled``, ``oracle``).
    """
    n_attributes = check_int(n_attributes, name="n_attributes", minimum=1)
    n_classes = check_int(n_classes, name="n_classes", minimum=2)
    weight_bound = _check_weight_bound(weight_bound)
    if encoding in ("table", "pair"):
        return RowEncoding(
            kind=encoding,
            mechanism=mechanism,
            n_attributes=n_attributes,
            n_classes=n_classes,
            weight_bound=weight_bound,
        )
    if encoding not in STUMP_ENCODINGS:
        raise ConfigError(f"unknown stump encoding {encoding!r}; choose one of {STUMP_ENCODINGS}")
    if mechanism is not None:
        raise ConfigError(f"encoding {encoding!r} uses a frequency oracle at epsilon, not a row mechanism")
    if epsilon is None:
        raise ConfigError(f"encoding {encoding!r} needs epsilon")
    return SampledEncoding(
        kind=encoding,
        epsilon=check_epsilon(epsilon),
        n_attributes=n_attributes,
        n_classes=n_classes,
        weight_bound=weight_bound,
        n_sampled=n_sampled,
        oracle=oracle,
    )


def stump_shares(
    X: Any,
    y: Any,
    w: Any,
    owner_of_row: Any,
    n_owners: int,
    *,
    bounds: Bounds,
    n_bins: int,
    n_classes: int,
    weight_bound: float,
    rng: np.random.Generator,
    encoding: str | None = None,
    mechanism: Mechanism | None = None,
    epsilon: float | None = None,
    n_sampled: int | None = None,
    oracle: str = "krr",
) -> np.ndarray | SampledReports:
    """Owner side for many owners at once: what ``stump_share`` gives each of ``n_owners`` owners (stacked).

    Returns an ndarray (n_owners, dim) for ``"table"``/``"pair"``, a :class:`SampledReports` otherwise.
    """
    n_classes = check_int(n_classes, name="n_classes", minimum=2)
    n_owners = check_int(n_owners, name="n_owners", minimum=1)
    Xbin = binarize(X, bounds, n_bins)
    owner_of_row = np.asarray(owner_of_row, dtype=np.int64)
    if owner_of_row.shape != (Xbin.shape[0],) or (
        owner_of_row.size and (owner_of_row.min() < 0 or owner_of_row.max() >= n_owners)
    ):
        raise ConfigError(f"owner_of_row must give each of the {Xbin.shape[0]} rows an owner in 0..{n_owners - 1}")
    if encoding is None:
        encoding = "table" if mechanism is not None else default_encoding(n_classes)
    enc = make_stump_encoding(
        encoding,
        n_attributes=Xbin.shape[1],
        n_classes=n_classes,
        weight_bound=weight_bound,
        mechanism=mechanism,
        epsilon=epsilon,
        n_sampled=n_sampled,
        oracle=oracle,
    )
    return encoding_shares(enc, Xbin, y, w, owner_of_row, n_owners, rng)


def encoding_shares(
    enc: StumpEncoding, Xbin: Any, y: Any, w: Any, owner_of_row: np.ndarray, n_owners: int, rng: np.random.Generator
) -> np.ndarray | SampledReports:
    """The shares of ``n_owners`` owners in encoding ``enc`` from binarised rows (row i owned by ``owner_of_row[i]``).

    What :func:`stump_shares` and the boosting owner steps (``privfed.common.boosting.owner``) both call.
    """
    Xbin = np.atleast_2d(np.asarray(Xbin, dtype=bool))
    y, w = check_rows(y, w, Xbin.shape[0], enc.n_classes)
    if isinstance(enc, RowEncoding):
        tables = owner_tables(
            Xbin, y, w, owner_of_row, n_owners, n_classes=enc.n_classes, weight_bound=enc.weight_bound
        )
        return enc.share(tables, rng)
    return enc.share(Xbin, y, w, owner_of_row, n_owners, rng)


def stump_share(
    X: Any,
    y: Any,
    w: Any,
    *,
    bounds: Bounds,
    n_bins: int,
    n_classes: int,
    weight_bound: float,
    rng: np.random.Generator,
    mechanism: Mechanism | None = None,
    encoding: str | None = None,
    epsilon: float | None = None,
    n_sampled: int | None = None,
    oracle: str = "krr",
) -> np.ndarray | SampledReports:
    """Owner side: one ε-LDP share of the owner's weighted cross tables (seed 002 §3.5.3; module docstring).

    Parameters
    ----------
    X, y, w : the owner's rows, class indices and SAMME weights.
    weight_bound : float
        Public bound ``B`` on the owner's total weight; larger totals are scaled down to it (a
        clip: still ε-LDP, but biased for that owner, so choose it generously).
    encoding : {"signs", "cells", "pair", "table"}, optional
        Default: ``"table"`` when a row ``mechanism`` is given (the call of the current boosting
        driver), else :func:`default_encoding` (``"signs"`` for two classes, ``"cells"`` otherwise).
    mechanism : row mechanism for ``"table"`` (``d = A * 2 * K``) and ``"pair"`` (``d = 2 A``).
    epsilon, n_sampled, oracle : for ``"signs"`` and ``"cells"`` (:class:`SampledEncoding`).

    Returns
    -------
    ndarray (dim,) for ``"table"``/``"pair"`` (the report in t-space); :class:`SampledReports` with one row otherwise.
    Decode with :func:`stump_aggregate`.
    """
    n = np.atleast_2d(np.asarray(X)).shape[0]
    out = stump_shares(
        X,
        y,
        w,
        np.zeros(n, dtype=np.int64),
        1,
        bounds=bounds,
        n_bins=n_bins,
        n_classes=n_classes,
        weight_bound=weight_bound,
        rng=rng,
        encoding=encoding,
        mechanism=mechanism,
        epsilon=epsilon,
        n_sampled=n_sampled,
        oracle=oracle,
    )
    return out if isinstance(out, SampledReports) else out[0]


def stump_aggregate(
    reports: Any, *, weight_bound: float, n_attributes: int, n_classes: int, encoding: str | None = None
) -> np.ndarray:
    """Coordinator side: the summed tables estimated from the owners' reports, for :func:`select_stump`.

    Parameters
    ----------
    reports : array (n_owners, dim) of ``"table"``/``"pair"`` reports, or :class:`SampledReports`
        (which name their encoding).
    weight_bound : float
        The public bound the owners used.
    n_attributes : int
        ``A = d (B - 1)``.
    encoding : {"table", "pair"}, optional
        For array reports (default ``"table"``).

    Returns
    -------
    ndarray (A, 2, K)
        Unbiased cell estimates (``"table"``, ``"cells"``), or tables whose class differences
        ``W[a,v,0] - W[a,v,1]`` are unbiased and whose branch totals are ``n_owners B / 2``
        (``"pair"``, ``"signs"``). May hold negative entries under LDP (SPEC §6).
    """
    enc: StumpEncoding
    if isinstance(reports, SampledReports):
        if encoding not in (None, reports.encoding):
            raise ConfigError(f"reports are {reports.encoding!r}, not {encoding!r}")
        enc = SampledEncoding(
            kind=reports.encoding,
            epsilon=reports.epsilon,
            n_attributes=check_int(n_attributes, name="n_attributes", minimum=1),
            n_classes=check_int(n_classes, name="n_classes", minimum=2),
            weight_bound=_check_weight_bound(weight_bound),
            n_sampled=int(reports.coordinates.shape[1]),
            oracle=reports.oracle,
        )
        return enc.aggregate(reports)
    encoding = encoding or "table"
    if encoding not in ("table", "pair"):
        raise ConfigError(f"array reports come from 'table' or 'pair', got encoding={encoding!r}")
    enc = make_stump_encoding(
        encoding, n_attributes=n_attributes, n_classes=n_classes, weight_bound=weight_bound
    )  # decoding needs no mechanism: the reports are unbiased
    return enc.aggregate(reports)
