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
MNIST 4 vs 9, in :mod:`privfed.deploy.experiments.stump_hit_rate`. So ``"signs"`` is the default for
two classes and ``"cells"`` (k-RR) for more.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.stump import binarize, check_rows
from privfed.common.learners.stump_row_encoding import RowEncoding, owner_tables
from privfed.common.learners.stump_sampled_encoding import SampledEncoding, SampledReports
from privfed.common.mechanisms.base import Mechanism, check_epsilon
from privfed.common.validation import check_int, check_positive

#: Share encodings, best first (module docstring, "Measured").
STUMP_ENCODINGS = ("signs", "cells", "pair", "table")


def default_encoding(n_classes: int) -> str:
    """The default share encoding: ``"signs"`` for two classes, else ``"cells"`` (measured, module docstring)."""
    return "signs" if check_int(n_classes, name="n_classes", minimum=2) == 2 else "cells"


def _check_weight_bound(weight_bound: object) -> float:
    return check_positive(weight_bound, name="weight_bound")


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
