"""What an owner of a boosting run computes from its rows and releases (seed 002 Alg. 2; SPEC §5, §6).

Every step is a pure function of one owner's rows, its SAMME weights and public values, so the owner core
(``privfed.owner.kinds.boosting``) and the in-process simulation (:mod:`.simulation`) call the same code:

* in the round(s) of its share group: :func:`share` (perturbed stump tables, weighted NCC rows or a
  perturbed local LR model, all with the SAMME weights the owner holds; Alg. 2 lines 6-9);
  :func:`group_shares` is the same for a whole group at once (the simulation's vectorised path);
* in the round it evaluates: :func:`evaluation_sums`, its row-clipped ``(err_sum, w_sum)``, then
  :func:`evaluation_release`, the noisy pair that goes into the round's secure sum (Alg. 2 lines 11-12);
* after every kept round: :func:`update_weights`, SAMME's update from the published totals.

Before it computes anything for a task, an owner checks what the coordinator sent against the run's
public parameters: :func:`check_learner` and :func:`check_kept_round` (``privfed.owner.history``).

Weights. Owners start with weight 1 per row (mean-1 weights, so ``weight_bound`` and ``eval_row_bound`` are
in rows). The normaliser of the update, ``sum_i w_i exp(alpha miss_i) / sum_i w_i = 1 + (E / W)(e^alpha -
1)``, follows from the published (noisy) totals ``E``, ``W`` of the secure sum, so the paper's second secure
sum for it (Alg. 2 line 18) is not needed; with exact totals over all owners ``sum w`` stays the row count
(with the row clip, ``E / W`` is that of the clipped weights, a small bias of the normaliser only). SAMME is
invariant to the scale of the weights; the scale only matters for the bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from privfed.common.boosting.releases import ReleasePlan
from privfed.common.bounds import flush_tiny
from privfed.common.errors import ConfigError
from privfed.common.learners.logistic import LinearModel, fit_local_logistic, lr_share
from privfed.common.learners.ncc import NccShare, ncc_share
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.ncc_padding import public_count_rows, shuffled
from privfed.common.learners.samme import max_alpha
from privfed.common.learners.stump import Stump, binarize
from privfed.common.learners.stump_encodings import encoding_shares
from privfed.common.learners.stump_sampled_encoding import SampledReports

#: The base learners a boosting run can hold (``base``: stump, ncc, lr).
Learner = Stump | NearestCentroidModel | LinearModel
#: What owners release for the base learner: stump shares (vectors, or sampled reports), NCC rows, LR models.
Release = np.ndarray | SampledReports | NccShare

#: Public bounds an owner's SAMME row weights saturate at (issue 20, "Totality"): whatever history a
#: coordinator sends, every weight is a finite positive number, so every sum over at most
#: ``MAX_OWNER_ROWS`` rows is finite and no computation on the rows can fail. An honest run's
#: mean-1 weights stay far inside (a row missed by 16 learners of error 1e-7 weighs ~2^370).
WEIGHT_MIN, WEIGHT_MAX = 2.0**-512, 2.0**512


def misses(model: Learner, X: Any, y: Any) -> np.ndarray:
    """``1[model(x_i) != y_i]`` per row."""
    return np.asarray(model.predict(np.atleast_2d(np.asarray(X, dtype=np.float64)))) != np.asarray(y)


# ------------------------------------------------------------------ shares
def share(plan: ReleasePlan, X: Any, y: Any, w: Any, *, rng: np.random.Generator) -> Release:
    """One owner's perturbed share for the base learner, with its SAMME weights ``w`` (Alg. 2 lines 6-9).

    Returns a stump share (a row encoding's vector, or :class:`SampledReports` of one row), an
    :class:`NccShare` (:class:`SampledReports` of its rows under ``labels="joint"``), or an LR parameter vector.
    """
    p = plan.params
    if p.base == "stump":
        n = np.atleast_2d(np.asarray(X)).shape[0]
        out = _stump_shares(plan, X, y, w, np.zeros(n, dtype=np.int64), 1, rng)
        return out if isinstance(out, SampledReports) else out[0]
    if plan.joint_encoding is not None:
        return plan.joint_encoding.share(X, y, bounds=p.bounds, rng=rng, sample_weight=w)
    if p.base == "ncc":
        return ncc_share(
            X,
            y,
            bounds=p.bounds,
            mechanism=plan.release_mechanism,
            label_rr=plan.label_rr(),
            rng=rng,
            sample_weight=w,
            weight_bound=p.weight_bound,
        )
    return _lr_share(plan, X, y, w, rng)


def stump_shares_each(
    plan: ReleasePlan, Xs: Sequence[Any], ys: Sequence[Any], ws: Sequence[Any], *, rng: np.random.Generator
) -> list[Release]:
    """The stump shares of several owners at once, in order: owner ``i``'s rows, labels and SAMME weights are
    ``Xs[i], ys[i], ws[i]``, and its share is what :func:`share` gives it, an independent draw per owner from
    ``rng`` (the encoding is vectorised over owners; issue 27: a node's owners share in one call, not one each).
    """
    if plan.params.base != "stump":
        raise ConfigError(f"stump shares of a {plan.params.base!r} run")
    Xs = [np.atleast_2d(np.asarray(X, dtype=np.float64)) for X in Xs]
    owner_of_row = np.repeat(np.arange(len(Xs), dtype=np.int64), [X.shape[0] for X in Xs])
    y = np.concatenate([np.asarray(v).reshape(-1) for v in ys])
    w = np.concatenate([np.asarray(v, dtype=np.float64).reshape(-1) for v in ws])
    out = _stump_shares(plan, np.concatenate(Xs), y, w, owner_of_row, len(Xs), rng)
    if isinstance(out, SampledReports):
        return [
            SampledReports(out.encoding, out.oracle, out.epsilon, out.coordinates[i : i + 1], out.reports[i : i + 1])
            for i in range(len(Xs))
        ]
    return list(out)


def ncc_release_rows(
    plan: ReleasePlan, X: Any, y: Any, w: Any, *, rng: np.random.Generator, count: int | None = None
) -> tuple[Any, Any, Any]:
    """The rows, labels and SAMME weights an owner's NCC share carries (``base="ncc"``): exactly
    ``work_rows(n, max_owner_rows)`` of them, weight-0 dummies or a subsample
    (:func:`~privfed.common.learners.ncc_padding.public_count_rows`: unbiased, covered by the per-row ε), or a
    fallback's ``count`` of dummies alone. Other base learners' rows are returned as they are."""
    p = plan.params
    if p.base != "ncc":
        return X, y, w
    return public_count_rows(
        X, y, w, bound=p.max_owner_rows, bounds=p.bounds, n_classes=p.n_classes, rng=rng, count=count
    )


def ordered(plan: ReleasePlan, release: Release, *, rng: np.random.Generator) -> Release:
    """An NCC share's reports shuffled (:func:`~privfed.common.learners.ncc_padding.shuffled`: the dummies of
    :func:`ncc_release_rows` are last); other shares as they are."""
    return shuffled(release, rng) if plan.params.base == "ncc" else release


def group_shares(
    plan: ReleasePlan, X: Any, y: Any, w: Any, owner_of_row: Any, group: Any, *, rng: np.random.Generator
) -> Release:
    """The shares of every owner in ``group`` at once; what ``[share(owner) for owner in group]`` gives."""
    p = plan.params
    if p.base == "stump":
        owner_of_row = np.asarray(owner_of_row, dtype=np.int64)
        group = np.asarray(group, dtype=np.int64)
        pos = np.full(max(int(owner_of_row.max(initial=-1)), int(group.max(initial=-1))) + 1, -1, dtype=np.int64)
        pos[group] = np.arange(group.shape[0])
        rows = np.flatnonzero((owner_of_row >= 0) & (pos[np.maximum(owner_of_row, 0)] >= 0))
        return _stump_shares(plan, X[rows], y[rows], w[rows], pos[owner_of_row[rows]], group.shape[0], rng)
    if p.base == "ncc":  # row-wise mechanism: one call over the group's rows = one call per owner
        rows = np.flatnonzero(np.isin(owner_of_row, group))
        return share(plan, X[rows], y[rows], w[rows], rng=rng)
    return np.stack(
        [_lr_share(plan, X[owner_of_row == o], y[owner_of_row == o], w[owner_of_row == o], rng) for o in group]
    )


def _lr_share(plan: ReleasePlan, X: Any, y: Any, w: Any, rng: np.random.Generator) -> np.ndarray:
    """One owner's perturbed local LR model (seed 002 §3.5.2), fitted with its SAMME weights."""
    p = plan.params
    theta = fit_local_logistic(
        X, y, bounds=p.bounds, n_classes=p.n_classes, C=p.C, sample_weight=w, weight_bound=p.weight_bound
    )
    return lr_share(theta, param_bound=p.param_bound, mechanism=plan.release_mechanism, rng=rng)


def _stump_shares(
    plan: ReleasePlan, X: Any, y: Any, w: Any, owner_of_row: np.ndarray, n_owners: int, rng: np.random.Generator
) -> np.ndarray | SampledReports:
    """The stump shares of ``n_owners`` owners (rows ``owner_of_row``) in the plan's share encoding."""
    p = plan.params
    Xbin = binarize(X, p.bounds, p.n_bins, p.split_points)
    return encoding_shares(plan.share_encoding, Xbin, y, w, owner_of_row, n_owners, rng)


# ------------------------------------------------------------------ evaluations
def local_error(model: Learner, X: Any, y: Any, w: Any, *, row_bound: float = math.inf) -> tuple[float, float]:
    """``(sum_i u_i 1[model(x_i) != y_i], sum_i u_i)`` with ``u_i = min(w_i, row_bound)`` (Alg. 2 lines 11-12).

    An evaluation release clips every row's weight to the public ``b`` first, which bounds what one row can
    change (the mechanisms' sensitivity argument); the default is no clip.
    """
    w = np.minimum(np.asarray(w, dtype=np.float64), row_bound)
    if w.shape[0] == 0:
        return 0.0, 0.0
    return float(np.dot(w, misses(model, X, y))), float(w.sum())


def evaluation_sums(plan: ReleasePlan, learner: Learner, X: Any, y: Any, w: Any) -> tuple[float, float]:
    """One owner's row-clipped ``(err_sum, w_sum)`` (:func:`local_error` at ``eval_row_bound``)."""
    return local_error(learner, X, y, w, row_bound=plan.params.eval_row_bound)


def evaluation_release(plan: ReleasePlan, sums: Any, *, rng: np.random.Generator) -> np.ndarray:
    """The owners' noisy ``(err_sum, w_sum)`` (n, 2) from their row-clipped sums (:func:`evaluation_sums`):
    the run's evaluation mechanism (:attr:`ReleasePlan.evaluation`)."""
    return plan.evaluation.privatize(sums, rng)


# ------------------------------------------------------------------ weights
def update_weights(
    model: Learner, alpha: float, X: Any, y: Any, w: Any, *, err_total: float, weight_total: float
) -> np.ndarray:
    """SAMME's update ``w_i exp(alpha 1[miss_i])``, renormalised to keep ``sum w = weight_total``.

    ``err_total`` and ``weight_total`` are this round's secure sums ``E`` and ``W``; the normaliser ``(W - E
    + E e^alpha) / W = 1 + r (e^alpha - 1)``, ``r = E / W`` (clipped to [0, 1]), is taken in the log domain
    (``log(1 - r + r e^alpha)``) and the weights saturate at :data:`WEIGHT_MIN`, :data:`WEIGHT_MAX`: for any
    finite history the result is finite and positive (a hostile ``alpha = 709`` used to overflow a missed
    row's weight to inf, and the share code then refused the task, a noiseless bit about the row; issue 20,
    finding 2).
    """
    w = np.asarray(w, dtype=np.float64)
    if w.shape[0] == 0:
        return w.copy()
    # alpha, E and W come through a KeptRound, which reads them below 2^-300 as 0; so are the scalars made of
    # them here: a subnormal alpha (or log_scale) was an operand of the missed rows' arithmetic only, which took
    # the slow path, so the time counted the owner's misses, which its evaluation release noises (audit 9).
    alpha = float(alpha)
    r = float(flush_tiny(min(max(float(err_total) / float(weight_total), 0.0), 1.0)))
    log_scale = float(
        flush_tiny(
            np.logaddexp(math.log1p(-r) if r < 1.0 else -math.inf, alpha + math.log(r) if r > 0.0 else -math.inf)
        )
    )
    with np.errstate(over="ignore", under="ignore"):
        new = w * np.exp(alpha * misses(model, X, y) - log_scale)
    return np.clip(new, WEIGHT_MIN, WEIGHT_MAX)


# ------------------------------------------------------------------ checks of what the coordinator sends
def check_learner(plan: ReleasePlan, learner: Any) -> None:
    """Raise :class:`ConfigError` unless ``learner`` is of this run's base kind and shape.

    An owner checks every learner a coordinator names before computing anything with it: a stump splits a
    feature ``< d`` at one of the public thresholds of SPEC §6 and predicts classes ``< K``; NCC centroids
    and LR coefficients have this run's shapes and classes.
    """
    p = plan.params
    kind = getattr(learner, "kind", None)
    expected_kind = {"stump": Stump.kind, "ncc": NearestCentroidModel.kind, "lr": LinearModel.kind}[p.base]
    if kind != expected_kind:
        raise ConfigError(
            f"learner kind {kind!r} does not match the run's base learner {p.base!r} (kind {expected_kind!r})"
        )
    d, k = p.bounds.d, p.n_classes
    if p.base == "stump":
        if not (0 <= learner.attribute < d and 1 <= learner.threshold_index < p.n_bins):
            raise ConfigError(
                f"stump (feature {learner.attribute}, threshold {learner.threshold_index}) is "
                f"outside the run's {d} features and thresholds 1..{p.n_bins - 1}"
            )
        expected = float(plan.thresholds[learner.attribute, learner.threshold_index - 1])
        if learner.threshold != expected:
            raise ConfigError(
                f"stump threshold {learner.threshold!r} is not the public threshold {expected!r} "
                f"of feature {learner.attribute}, index {learner.threshold_index} (SPEC §6)"
            )
        if not all(0 <= c < k for c in learner.leaves):
            raise ConfigError(f"stump leaves {learner.leaves} are not classes of 0..{k - 1}")
        return
    classes = np.asarray(learner.classes)
    if classes.shape != (k,) or not np.array_equal(classes, np.arange(k)):
        raise ConfigError(f"learner classes {classes.tolist()} are not 0..{k - 1}")
    if p.base == "ncc":
        if np.asarray(learner.centroids).shape != (k, d):
            raise ConfigError(f"NCC centroids of shape {np.asarray(learner.centroids).shape}, expected {(k, d)}")
        return
    if np.asarray(learner.coef_).shape[-1] != d or learner.bounds.to_list() != p.bounds.to_list():
        raise ConfigError("LR model does not match the run's features or bounds")


def check_kept_round(plan: ReleasePlan, alpha: float, err_total: float, weight_total: float) -> None:
    """Raise :class:`ConfigError` unless a kept round's ``alpha``, ``E`` and ``W`` are ones SAMME can publish:
    ``0 <= alpha <= max_alpha(K)`` (:func:`~privfed.common.learners.samme.max_alpha`, a public constant) and
    ``0 <= E <= W`` (a kept learner's error ``E / W`` is below ``1 - 1/K``)."""
    k = plan.params.n_classes
    if not 0.0 <= alpha <= max_alpha(k):
        raise ConfigError(
            f"a kept round's alpha={alpha!r} is outside [0, {max_alpha(k):.6g}], the weights SAMME gives for {k} classes"
        )
    if not 0.0 <= err_total <= weight_total:
        raise ConfigError(f"a kept round's totals E={err_total!r}, W={weight_total!r} do not satisfy 0 <= E <= W")
