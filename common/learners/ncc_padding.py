"""NCC shares of a public length (audits 10-13): an owner's share carries ``work_rows(n, max_owner_rows)`` reports,
not one per row, so its length shows at most ``n``'s public cell. Its real rows are padded with dummies that add
nothing to any class in expectation (weight 0, or the ⊥ label of :mod:`~privfed.common.learners.ncc_rr`) or
subsampled to the public bound, then shuffled; a spent owner's fallback is its public count of dummies alone."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.bounds import Bounds
from privfed.common.work_rows import release_rows

R = TypeVar("R", bound=Any)


def public_count_rows(
    X: ArrayLike,
    y: ArrayLike,
    w: ArrayLike | None,
    *,
    bound: int | None,
    bounds: Bounds,
    n_classes: int,
    rng: np.random.Generator,
    dummy_label: int | None = None,
    count: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows, labels and weights of an NCC share of a public length: ``m = work_rows(n, bound)``
    (:func:`~privfed.common.work_rows.release_rows`: ``n``'s public grid cell, or the public ``bound`` on an
    owner's rows if less). A share is one report per row, so its length would show the private count ``n``. Fewer
    rows are filled with :func:`dummies` of weight 0 (the bounds' midpoint, a uniform label, or ``dummy_label``),
    last: the release of them is :func:`shuffled`; more (``n`` above ``bound``) are subsampled to ``m``. ``w`` is
    the rows' weights, or ``None`` for weight 1 each (an unweighted share: no array of ``n`` ones is made).
    ``count``, with no rows, is a spent owner's fallback: its public count of reports, every one a dummy (drawn as
    an owner of no rows draws them, so a fallback of no rows is that owner's release draw for draw).

    Dummies are unbiased for the weighted shares: a row of scaled weight ``u = 0`` sends ``(0, ..., 0, -1)``
    through the row mechanism (:func:`ncc_share`'s weight column ``2u - 1``) or ⊥ through the joint report
    (:class:`~privfed.common.learners.ncc_joint.JointLabelEncoding`), so its expected contribution to every
    class's sum and weight total is 0 whatever its label (:func:`ncc_class_sums` and the joint estimator are
    linear in the reports). They add noise (each report's variance) and loosen the post-processing caps of the
    class totals (the rows reported). Each is an ε-LDP report of an input in the mechanism's domain, as a row
    is: telling a dummy from a row costs what telling two rows apart does, within the row's ε, so ``n`` against
    ``n + 1`` real rows is covered by the ledger's per-row ε (a row replaced by a dummy). An unweighted
    ``labels="rr"`` share counts every report: its dummies report ``dummy_label`` ⊥ through a ``K + 1``-ary k-RR
    whose ⊥ class the coordinator drops (:mod:`~privfed.common.learners.ncc_rr`); ``"clear"`` is not padded.
    """
    X, y = np.atleast_2d(np.asarray(X, dtype=np.float64)), np.asarray(y)
    if count is not None and X.shape[0]:
        raise ValueError("a fallback's count of dummies carries no rows")
    keep, m_dummies = release_rows(X.shape[0], bound, rng)
    m = keep.size + m_dummies if count is None else count
    # Every pass is m long, whatever n: the rows gathered over the m reports, the first keep.size real and the rest
    # dummies, and a label drawn for each of the m reports, the real rows' left unused (a copy of the n rows beside
    # the dummies', audit 12, or m - n labels drawn, made the time follow n within its cell).
    middle, labels, _ = dummies(m, bounds=bounds, n_classes=n_classes, rng=rng, dummy_label=dummy_label)
    real = np.arange(m) < keep.size
    at = np.zeros(m, dtype=np.int64)
    at[: keep.size] = keep
    if X.shape[0] == 0:  # no rows: every report a dummy
        X, y, w = np.zeros((1, bounds.d)), np.zeros(1, dtype=np.int64), np.zeros(1)
    weights = 1.0 if w is None else np.asarray(w, dtype=np.float64)[at]
    return (
        np.where(real[:, None], X[at], middle),
        np.where(real, y[at], labels).astype(np.int64),
        np.where(real, weights, 0.0),
    )


def dummies(
    count: int, *, bounds: Bounds, n_classes: int, rng: np.random.Generator, dummy_label: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` dummies of :func:`public_count_rows`; a padded share's fallback is its public count of them."""
    labels = rng.integers(0, n_classes, count) if dummy_label is None else np.full(count, dummy_label)
    middle = np.broadcast_to((bounds.lo + bounds.hi) / 2.0, (count, bounds.d))
    return middle, labels.astype(np.int64), np.zeros(count)


def shuffled(release: R, rng: np.random.Generator) -> R:
    """``release`` (a dataclass holding one row per report in each of its arrays) with its reports in a uniformly
    random order, drawn after the reports. :func:`public_count_rows` puts the dummies last: in that order a
    coordinator could find where the reports' distribution changes and read ``n`` off the position, to within a
    few reports (a change point is located to ``O(1/KL)`` reports, however many). Shuffled, the reports are a
    multiset, and what they tell of ``n`` is what the class weight totals' estimate tells (its noise grows as
    ``sqrt(m)``). Sums and centroids do not depend on the order."""
    arrays = {f.name: getattr(release, f.name) for f in fields(release)}
    arrays = {k: v for k, v in arrays.items() if isinstance(v, np.ndarray) and v.ndim}
    m = min(v.shape[0] for v in arrays.values())
    order = rng.permutation(m)
    return replace(release, **{k: v[order] for k, v in arrays.items() if v.shape[0] == m})
