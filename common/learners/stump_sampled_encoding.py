"""Sampled encodings of a stump share, ``"signs"`` and ``"cells"`` (seed 002 §3.5.3; SPEC §6).

Each owner samples m coordinates (attributes, and for ``"signs"`` the class) independently of its
data and reports one category through a frequency oracle (:mod:`privfed.common.mechanisms.frequency`):
:class:`SampledEncoding` makes and decodes the reports, :class:`SampledReports` carries them (the
wire's ``BoostShare``). Which encoding to use, and the measured comparison, is
:mod:`privfed.common.learners.stump_encodings`; the row encodings are
:mod:`privfed.common.learners.stump_row_encoding`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.learners.stump_row_encoding import clipped_weights, difference_tables
from privfed.common.mechanisms.frequency import ORACLES, FrequencyOracle, make_oracle
from privfed.common.validation import check_int

#: Most coordinates an owner samples in a sampled encoding (the domain grows like 2^m).
MAX_SAMPLED = 8


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
            clipped_weights(w, owner_of_row, n_owners, self.weight_bound),
            owner_of_row,
            n_owners,
            self.weight_bound,
            rng,
        )
        has = row >= 0
        Xbin = np.asarray(Xbin, dtype=bool).reshape(-1, self.n_attributes)
        y = np.asarray(y, dtype=np.int64).reshape(-1)
        if Xbin.shape[0] == 0:  # no rows at all: a stand-in row, never picked
            Xbin, y = np.zeros((1, self.n_attributes), dtype=bool), np.zeros(1, dtype=np.int64)
        # Every owner's bits are read off a row (row 0 stands in where the pick hit none) and, under signs, its
        # filler bits drawn, picked or not: as much work and as many draws whether a row was picked, which
        # follows the owner's weights (the filler was drawn for the misses alone until stop 46).
        r = np.maximum(row, 0)
        if self.kind == "signs":
            u = np.concatenate([Xbin[r] ^ (y[r] == 1)[:, None], (y[r] == 0)[:, None]], axis=1)  # sign > 0
            filler = rng.integers(0, 2, size=(n_owners, m))
            bits = np.where(has[:, None], u[np.arange(n_owners)[:, None], coords], filler)
            values = bits @ (1 << np.arange(m))
        else:
            bits = Xbin[r[:, None], coords].astype(np.int64)
            values = np.where(
                has,
                (bits @ (1 << np.arange(m))) * self.n_classes + y[r],
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
        coords = self._check_coordinates(reports.coordinates)
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
        self._check_coordinates(out.coordinates)
        self.frequency_oracle.supports(out.reports)  # refuses reports outside the oracle's domain
        return out

    def _check_coordinates(self, coordinates: np.ndarray) -> np.ndarray:
        """``coordinates`` (n, m) as int64, refused unless each lies in ``0..n_coordinates-1`` and an owner's differ."""
        coords = np.asarray(coordinates, dtype=np.int64)
        if coords.size and (coords.min() < 0 or coords.max() >= self.n_coordinates):
            raise ConfigError(f"sampled coordinates must lie in 0..{self.n_coordinates - 1}")
        if np.any(np.diff(np.sort(coords, axis=1), axis=1) == 0):
            raise ConfigError("an owner's sampled coordinates must be distinct (sampled without replacement)")
        return coords

    def to_tables(self, estimate: np.ndarray, n_owners: int) -> np.ndarray:
        if self.kind == "cells":
            return estimate
        U, D = estimate[: self.n_attributes], estimate[self.n_attributes]
        return difference_tables(np.stack([(D - U) / 2.0, (D + U) / 2.0], axis=1), n_owners, self.weight_bound)


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
