"""The rows a fit works on: the owner's rows padded with zero rows to a public grid, so that the fit's
work -- its matrix shapes and its step counts -- tells a coordinator timing an answer no more of the
owner's private row count than which grid cell it lies in.

Why. A coordinator times every keyed answer, and an owner's row count is private (it leaves only through
the geometric mechanism, ``PcaShareTask.count_epsilon``, debited). A fit whose shapes and step counts follow
``n`` lets one timing tell 10% fewer rows apart (``bench/timing_processes.py``, before this module). The
cure is a predictable transaction (Haeberlen, Pierce, Narayan, "Differential privacy under fire", USENIX
Security 2011, §5): do the work of a public amount of data whatever the private amount is.

How. :func:`work_rows` rounds ``n`` up to the next power of two (at least 1): the fit runs on
:func:`pad_rows`' zero rows up to that count, and every step count that used ``n`` uses the padded count
A zero row contributes an
exact zero to every sum the fits take: the loss gradients and Hessians of the linear learners (each a
multiple of the row, or weighted by a zero sample weight), ``X^T X`` (DP-PCA) and the class sums (after
their bias column). So the minimiser is that of the ``n`` real rows (no calibration reads ``n``: audit 14,
:func:`privfed.common.mechanisms.objective.privacy_adjustment`), and the release is the same up to floating-point
summation order and, for the AMP solvers, within their public radius of the same minimiser
(``tests/statistical/test_padded_fits.py``).

What is left, stated: the grid cell, ``ceil(log2 n)``, still shows in the time (one timing of owners of
``n`` and ``2n`` rows differs by up to 2x in work) unless the owner declares a count (below): a bound a task
carried would let the coordinator choose the work, and padding every owner to a job's bound costs ``bound / n``
times the work (a 10^4-row owner padded to 10^5 works 10x longer), while the grid costs at most 2x
(``bench/row_padding.py``). The O(n) work before and around a fit runs on the cell too: the
rows are padded first (:func:`cell_rows`, :func:`pad_rows`) and, after each per-row step that made the padding
non-zero (a scaling, a bias feature), zeroed again (:func:`zero_padding`), or weighted 0 (a boosted share's SAMME
weights): DP-PCA since audit 11, the SVM share, a boosted share and evaluation since audit 12 (an NB report reads
one row). ``tests/adversary/test_differential_row_work.py`` counts, kind by kind, the calls still given the ``n``
rows, and ``bench/row_padding_answers.py`` what the padding costs a whole answer. A release whose *shape* is
``n`` (an NCC share's reports: one per row) takes :func:`release_rows`' count through
:func:`privfed.common.learners.ncc_padding.public_count_rows` (weighted, joint and rr shares; see ``docs/owner-limits.md``,
"Limits", for the rest).

An owner's declared row count closes the cell too (``privfed owner --work-rows P``): within
:func:`declared_rows` ``(P)``, every count above is ``P`` whatever ``n <= P`` is, so the work is a function of the
owner's public configuration alone (Haeberlen et al.'s predictable transaction with the owner's own bound, not
one a task chooses: DESIGN.md, release discipline 4), at ``P / n`` times the work. The owner core sets it around
everything it does for the owner (:class:`~privfed.owner.core.OwnerCore`), so every call site reads one value.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from privfed.common.errors import ConfigError

#: The row count the owner declared public (:func:`declared_rows`), or None: each count's power-of-two cell.
_DECLARED: ContextVar[int | None] = ContextVar("privfed_declared_rows", default=None)


def check_declared_rows(rows: int, most: int) -> int:
    """``rows`` if it can be an owner's declared row count (``--work-rows``) for owners of at most ``most`` rows: a
    power of two (the lengths an honest NCC share has, which the coordinator checks) of at least ``most``."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1 or rows & (rows - 1):
        raise ConfigError(f"--work-rows must be a power of two (1, 2, 4, ..., 1024, ...), got {rows!r}")
    if most > rows:
        raise ConfigError(
            f"--work-rows {rows} is below an owner's {most} rows: every computation works on the declared count, so it "
            f"must be at least the rows of every owner on the node (e.g. --work-rows {work_rows(most)})"
        )
    return rows


@contextmanager
def declared_rows(rows: int | None) -> Iterator[None]:
    """Within: :func:`work_rows` is ``rows`` for every count up to it (None: each count's own cell), the owner's
    declared public row count (module docstring). A count above it raises :class:`ConfigError`: the owner core
    checks its owners against it first (:func:`check_declared_rows`)."""
    token = _DECLARED.set(rows)
    try:
        yield
    finally:
        _DECLARED.reset(token)


def work_rows(n: int, bound: int | None = None) -> int:
    """The public row count a fit of ``n`` rows works on: the least power of two ``>= max(n, 1)`` (the owner's
    declared count instead, within :func:`declared_rows`), or the public ``bound`` on an owner's rows if that is
    less (a release of as many rows as this, :func:`release_rows`).

    With a ``bound``, the count is ``min(2^ceil(log2 n), bound)``: a coordinator that chooses the bound learns
    no more than the cell (a bound inside the cell gives ``bound`` whether ``n`` is above it or not)."""
    if n < 0:
        raise ConfigError(f"a row count must be >= 0, got {n}")
    declared = _DECLARED.get()
    if declared is not None and n > declared:
        raise ConfigError(f"{n} rows are above the owner's declared {declared} (--work-rows)")
    cell = declared if declared is not None else 1 << (max(int(n), 1) - 1).bit_length()
    if bound is None:
        return cell
    if bound < 1:
        raise ConfigError(f"a public bound on an owner's rows must be >= 1, got {bound}")
    return min(cell, int(bound))


def release_rows(n: int, bound: int | None, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Which of ``n`` rows a release of :func:`work_rows` ``(n, bound)`` rows carries, and how many dummies:
    every row and ``m - n`` dummies when ``n <= m``; else (``n`` above the public ``bound``) ``m`` rows drawn
    uniformly without replacement (each still released once through its mechanism: the rows left out are
    released nowhere, a subsample -- biased towards ``m / n`` of the owner's totals, never less private).

    One path for both: the first ``m`` of a uniform permutation of ``n``'s public cell that fall below ``n`` (all
    ``n`` rows when ``n <= m``; a uniform ``m``-subset otherwise). A branch on ``n > bound`` made other calls
    (a draw without replacement, or none), and the coordinator chooses ``bound`` task by task: a probe per
    bound read ``n`` bit by bit off the work (``tests/adversary/test_differential_kinds.py``)."""
    m = work_rows(n, bound)
    order = rng.permutation(work_rows(n))
    real = order < n
    chosen = np.zeros(order.size, dtype=bool)  # by row: the first m real rows of the permutation
    chosen[order] = real & (np.cumsum(real) <= m)
    keep = np.flatnonzero(chosen)  # sorted, by passes over the cell (a sort of the n rows' indices worked on n)
    return keep, m - keep.size


def pad_rows(a: np.ndarray, rows: int, *, axis: int = -2, value: float = 0.0) -> np.ndarray:
    """``a`` with entries ``value`` appended along ``axis`` (the rows' axis: -2 for a matrix of rows, -1 for
    per-row values) up to ``rows``: a new array always, so a count at the top of its cell does the work (an
    allocation and a copy) that the other counts of the cell do."""
    a = np.asarray(a)
    n = a.shape[axis]
    if n > rows:
        raise ConfigError(f"{n} rows cannot be padded to {rows}")
    shape = list(a.shape)
    shape[axis] = rows
    out = np.full(shape, value, dtype=a.dtype)
    # the rows written in place: np.pad's general modes cost ~20 us a call, and a node pads each of its
    # one-row owners (issue 27: 12 % of an LR node's time at 10^5 owners)
    out[(slice(None),) * (axis % a.ndim) + (slice(0, n),)] = a
    return out


def cell_rows(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An owner's rows ``X`` (n, d) and labels ``y`` (n,) padded to ``n``'s cell (:func:`pad_rows`: zero rows,
    class 0): what its every pass then works on, with the padding's weights zero or its rows zeroed again
    (:func:`zero_padding`), so the ``n`` rows are read once, by this copy."""
    rows = work_rows(np.asarray(y).shape[0])
    return pad_rows(X, rows), pad_rows(y, rows, axis=-1)


def zero_padding(a: np.ndarray, n: int, *, axis: int = -2) -> np.ndarray:
    """``a``, rows of a grid cell that :func:`pad_rows` filled from ``n`` on, with every row from ``n`` on an exact
    zero again: "pad first, then mask". A per-row step (a scaling, a bias feature) run on the padded rows made the
    padding's rows non-zero; this one pass over the cell undoes it, so each step works on the cell and only
    :func:`pad_rows`' copy on the ``n`` rows (``tests/adversary/test_differential_row_work.py``), while the real
    rows are those the step gives ``n`` rows alone (a per-row step's row depends on that row only): the release
    is the unpadded one's (``tests/unit/test_pad_rows.py``). ``np.where``, not a product with the mask: a
    padding row's ``inf`` or ``-x`` times zero would be a NaN or a ``-0.0``."""
    a = np.asarray(a)
    trailing = a.ndim - 1 - axis % a.ndim  # the axes after the rows' axis, broadcast over
    real = (np.arange(a.shape[axis]) < n).reshape((-1,) + (1,) * trailing)
    return np.where(real, a, np.zeros((), dtype=a.dtype))


__all__ = [
    "cell_rows",
    "check_declared_rows",
    "declared_rows",
    "pad_rows",
    "release_rows",
    "work_rows",
    "zero_padding",
]
