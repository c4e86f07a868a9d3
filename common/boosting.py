"""One federated boosting run: LDP base learners from fresh owner groups, SAMME sums over all owners.

Seed paper 002 (Wang & Chang, "Privacy-Preserving Boosting in the Local Setting"), Alg. 2;
SAMME (SPEC §5), stumps from cross tables (SPEC §6), ring secure sum (SPEC §11). Every step is a
pure function of one party's data, so the networked path (owner handlers, coordinator strategy)
and the in-process driver :meth:`FederatedBoosting.fit` call the same code:

* owner, once per run and only when in round t's group: :meth:`FederatedBoosting.owner_release`
  (perturbed stump tables, weighted NCC rows or a perturbed local LR model, all with the SAMME
  weights the owner holds);
* coordinator: :meth:`FederatedBoosting.coordinator_select` (aggregate the group's releases,
  pick the base learner) and :meth:`FederatedBoosting.coordinator_decide` (SAMME's weight and stop
  rules from the secure-summed totals, :func:`~privfed.common.learners.samme.samme_decide`);
* every owner, every round: :func:`owner_local_error` -> ``(err_sum, w_sum)``, summed over all
  owners by :func:`secure_total`, then :func:`owner_update_weights`.

Groups (§3.4.1). Round t's group is drawn uniformly from the owners that have not released yet
(:func:`sample_groups`), so an owner releases at most once and spends its ε once; ``T * group``
must not exceed the number of owners. (Each owner's ledger enforces this independently on the
networked path.)

Weights. Owners start with weight 1 per row (mean-1 weights, so ``weight_bound`` is in rows)
and keep ``sum w = n_rows`` exactly: the normaliser of the update, ``sum_i w_i exp(alpha miss_i)
= (W - E) + E e^alpha``, follows from the totals ``E = sum err_sum``, ``W = sum w_sum`` the ring
already produced, so the paper's second secure sum for it (Alg. 2 line 18) is not needed. SAMME
is invariant to the scale of the weights; the scale only matters for ``weight_bound``.

Secure sum. ``secure_sum="ring"`` runs :func:`~privfed.common.securesum.run_ring_in_process` (the
networked state machines, AES-GCM hops) on the fixed-point values; ``"plain"`` adds the same
per-owner values in float64. The ring is exact in Z_2^64, so the two differ only by the
fixed-point rounding, at most ``N 2^(-f-1)`` (SPEC §11.1; tested): ``"plain"`` keeps runs with
10^4 owners fast.

Vectorised driver. With ``vectorised=True`` the driver applies the owner steps to all owners' rows
at once (:func:`stump_table_vectors` + one ``privatize`` call for a whole group; per-owner sums by
``bincount``). Every owner step is row-wise or a per-owner sum, and the mechanisms perturb row by
row, so this is the same computation; at ε = ∞ the two paths give identical models (tested).
With a finite ε the noise draws differ (one generator stream instead of one per owner) but have
the same distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, partial
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from privfed.common.bounds import Bounds
from privfed.common.e2e import generate_private_key, local_boxes
from privfed.common.errors import ConfigError, LocalProtocolError, PrivfedError
from privfed.common.fixedpoint import FixedPoint
from privfed.common.learners.logistic import fit_local_logistic, lr_aggregate, lr_share, n_parameters
from privfed.common.learners.ncc import NccShare, NearestCentroidModel, ncc_centroids, ncc_share, split_label_budget
from privfed.common.learners.samme import BoostedModel, SammeDecision, SammeStep, samme_decide, samme_update
from privfed.common.learners.stump import binarize, select_stump, stump_aggregate, stump_share
from privfed.common.mechanisms import MECHANISMS, KaryRandomizedResponse, make_mechanism
from privfed.common.securesum import ring_peers, run_ring_in_process

BASE_LEARNERS = ("stump", "ncc", "lr")
SECURE_SUMS = ("plain", "ring")
ON_REJECT = ("skip", "stop")


def _int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _choice(name: str, value, allowed) -> str:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def sample_groups(n_owners: int, n_rounds: int, group_size: int, rng: np.random.Generator) -> np.ndarray:
    """Disjoint uniform groups of owners, one per round (seed 002 §3.4.1, Alg. 2 lines 9-10).

    Returns
    -------
    ndarray (n_rounds, group_size) of owner indices; no owner appears twice.

    Raises
    ------
    ConfigError
        ``n_rounds * group_size > n_owners``: some owner would release twice.
    """
    n_owners, n_rounds = _int("n_owners", n_owners, 1), _int("n_rounds", n_rounds, 1)
    group_size = _int("group_size", group_size, 1)
    if n_rounds * group_size > n_owners:
        raise ConfigError(f"n_rounds * group_size = {n_rounds} * {group_size} = {n_rounds * group_size} exceeds "
                          f"the {n_owners} owners: an owner would release twice; use group_size <= "
                          f"{n_owners // n_rounds} or fewer rounds")
    return rng.permutation(n_owners)[: n_rounds * group_size].reshape(n_rounds, group_size)


def stump_table_vectors(X, y, w, owner_of_row, group, *, bounds: Bounds, n_bins: int, n_classes: int,
                        weight_bound: float) -> np.ndarray:
    """The vectors :func:`~privfed.common.learners.stump.stump_share` perturbs, for a whole group at once.

    Row ``i`` of the result is what owner ``group[i]`` feeds its mechanism: its weighted cross
    tables (weights scaled down to total ``weight_bound`` if they exceed it), mapped to
    ``t = 2 W / weight_bound - 1`` and flattened to ``A * 2 * K`` values. Equal to the per-owner
    computation inside ``stump_share`` up to float rounding (tested).

    Parameters
    ----------
    X, y, w : arrays (n, d), (n,), (n,)
        All rows, labels (class indices) and weights.
    owner_of_row : int array (n,)
        Owner index of every row (``-1``: no owner).
    group : int array (g,)
        The owners releasing.

    Returns
    -------
    ndarray (g, A * 2 * K)
    """
    owner_of_row = np.asarray(owner_of_row, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    pos = np.full(max(int(owner_of_row.max(initial=-1)), int(group.max(initial=-1))) + 1, -1, dtype=np.int64)
    pos[group] = np.arange(group.shape[0])
    rows = np.flatnonzero((owner_of_row >= 0) & (pos[np.maximum(owner_of_row, 0)] >= 0))
    xbin = binarize(np.asarray(X)[rows], bounds, n_bins)
    r, a = xbin.shape
    yr, wr = np.asarray(y)[rows], np.asarray(w, dtype=np.float64)[rows]
    cells = np.zeros((r, a, 2, n_classes))
    cells[np.arange(r)[:, None], np.arange(a)[None, :], xbin.astype(np.intp), yr[:, None]] = wr[:, None]
    owner_pos = pos[owner_of_row[rows]]
    gather = sp.csr_matrix((np.ones(r), (owner_pos, np.arange(r))), shape=(group.shape[0], r))
    tables = np.asarray(gather @ cells.reshape(r, -1))
    total = np.bincount(owner_pos, weights=wr, minlength=group.shape[0])
    over = np.isfinite(total) & (total > weight_bound)
    tables[over] *= (weight_bound / total[over])[:, None]
    return np.clip(2.0 * tables / weight_bound - 1.0, -1.0, 1.0)


def _misses(model, X, y) -> np.ndarray:
    return np.asarray(model.predict(np.atleast_2d(np.asarray(X, dtype=np.float64)))) != np.asarray(y)


def owner_local_error(model, X, y, w) -> tuple[float, float]:
    """Owner side, every round (Alg. 2 lines 11-12): ``(sum_i w_i 1[model(x_i) != y_i], sum_i w_i)``."""
    w = np.asarray(w, dtype=np.float64)
    if w.shape[0] == 0:
        return 0.0, 0.0
    return float(np.dot(w, _misses(model, X, y))), float(w.sum())


def owner_update_weights(model, alpha: float, X, y, w, *, err_total: float, weight_total: float) -> np.ndarray:
    """Owner side: SAMME update ``w_i exp(alpha 1[miss_i])``, renormalised to keep ``sum w = weight_total``.

    ``err_total`` and ``weight_total`` are this round's secure sums ``E`` and ``W``; the
    normaliser ``(W - E + E e^alpha) / W`` is the new total over all owners divided by ``W``.
    """
    w = np.asarray(w, dtype=np.float64)
    if w.shape[0] == 0:
        return w.copy()
    scale = (weight_total - err_total + err_total * math.exp(alpha)) / weight_total
    return samme_update(w, _misses(model, X, y), alpha, total=scale)


def secure_total(values, *, method: str = "plain", fixed_point: FixedPoint | None = None,
                 boxes=None) -> np.ndarray:
    """Sum per-owner vectors: ``values`` (N, m) -> (m,).

    ``"plain"``: float64 sum. ``"ring"``: :func:`run_ring_in_process` over parties ``"o0"..``
    with ``fixed_point`` (required) and optional cached ``boxes``; exact in Z_2^64, so it
    differs from the plain sum by at most ``fixed_point.error_bound`` (SPEC §11.1).
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if _choice("method", method, SECURE_SUMS) == "plain":
        return values.sum(axis=0)
    if fixed_point is None:
        raise ConfigError("secure_total(method='ring') needs fixed_point (FixedPoint.choose(n_parties, max_abs))")
    return run_ring_in_process({f"o{i}": v for i, v in enumerate(values)}, fixed_point, boxes)


@dataclass(frozen=True)
class RoundRecord:
    """What the coordinator learned in one round."""

    round: int
    group_size: int
    learner: object  # the selected base learner (Stump, NearestCentroidModel, LinearModel)
    error: float  # E / W from the secure sums
    alpha: float | None  # None: rejected
    step: str  # "keep", "keep_and_stop", "skip" or "stop"


@dataclass
class BoostingRun:
    """Result of :meth:`FederatedBoosting.fit`."""

    model: BoostedModel
    rounds: list[RoundRecord]
    groups: np.ndarray
    weights: np.ndarray
    stop_reason: str

    def staged_misclassification(self, X, y) -> np.ndarray:
        """Misclassification of the ensemble after each round, on class indices ``y``.

        A rejected round repeats the previous value; before the first kept learner the empty vote
        predicts class 0 (ties go to the lowest class, SPEC §5).
        """
        y = np.asarray(y)
        votes = np.zeros((y.shape[0], self.model.classes.shape[0]))
        out, rows = [], np.arange(y.shape[0])
        for rec in self.rounds:
            if rec.alpha is not None:
                votes[rows, np.asarray(rec.learner.predict(X), dtype=np.int64)] += rec.alpha
            out.append(float(np.mean(np.argmax(votes, axis=1) != y)))
        return np.asarray(out)


@dataclass(frozen=True, kw_only=True)
class FederatedBoosting:
    """Federated SAMME over LDP base learners (seed 002 Alg. 2; SPEC §5, §6, §11).

    Parameters
    ----------
    base : {"stump", "ncc", "lr"}
        Base learner: decision stump from perturbed weighted cross tables (§3.5.3), nearest
        centroid from perturbed weighted rows (§3.5.1), or logistic regression from perturbed
        local models (§3.5.2).
    epsilon : float > 0 or math.inf
        Each releasing owner's budget for its one release (``inf``: no noise).
    mechanism : {"pm", "duchi", "laplace"}
    n_classes : int >= 2
    bounds : Bounds
        Public feature bounds.
    n_rounds : int >= 1
        T.
    group_size : int or None
        Owners per round; default ``n_owners // n_rounds``.
    n_bins : int >= 2
        Stumps: ``B``, thresholds ``lo + b (hi - lo) / B`` (SPEC §6). Default 2 (the midpoint).
    weight_bound : float > 0
        Public bound on an owner's total weight (stump) or a row's weight (NCC), in rows (weights
        have mean 1). Larger weights are scaled down before release (biases the selection,
        never the privacy); the noise grows linearly with it.
    labels, label_fraction : NCC label scheme (:func:`split_label_budget`); default the paper's "clear".
    C, param_bound : LR regularisation and public parameter clip bound.
    secure_sum : {"plain", "ring"}
    on_reject : {"skip", "stop"}
        A learner no better than chance: ``"stop"`` ends the run (scikit-learn; raises in the
        first round), ``"skip"`` (default) drops it and goes on with the next group, which
        releases a different learner -- unlike the centralised case, where the same one would come back.
    vectorised : bool
        Driver only: apply the owner steps to all owners at once (see module docstring).
    """

    base: str = "stump"
    epsilon: float
    mechanism: str = "pm"
    n_classes: int
    bounds: Bounds
    n_rounds: int
    group_size: int | None = None
    n_bins: int = 2
    weight_bound: float = 1.0
    labels: str = "clear"
    label_fraction: float = 0.2
    C: float = 1.0
    param_bound: float = 1.0
    secure_sum: str = "plain"
    on_reject: str = "skip"
    vectorised: bool = True

    def __post_init__(self):
        _choice("base", self.base, BASE_LEARNERS)
        _choice("mechanism", self.mechanism, MECHANISMS)
        _choice("secure_sum", self.secure_sum, SECURE_SUMS)
        _choice("on_reject", self.on_reject, ON_REJECT)
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, Real) or not self.epsilon > 0:
            raise ConfigError(f"epsilon must be a number > 0 (math.inf: no noise), got {self.epsilon!r}")
        _int("n_classes", self.n_classes, 2)
        _int("n_rounds", self.n_rounds, 1)
        _int("n_bins", self.n_bins, 2)
        if self.group_size is not None:
            _int("group_size", self.group_size, 1)
        for name in ("weight_bound", "C", "param_bound"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value < math.inf:
                raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
        if not isinstance(self.bounds, Bounds):
            raise ConfigError(f"bounds must be a Bounds (public configuration), got {type(self.bounds).__name__}")
        split_label_budget(self.epsilon, self.labels, self.label_fraction)  # validates the NCC label options

    # ------------------------------------------------------------------ shared configuration
    @property
    def n_attributes(self) -> int:
        return self.bounds.d * (self.n_bins - 1)

    @property
    def release_dim(self) -> int:
        """Length of one release vector (per owner for stump/LR, per row for NCC)."""
        if self.base == "stump":
            return self.n_attributes * 2 * self.n_classes
        if self.base == "ncc":
            return self.bounds.d + 1
        return n_parameters(self.n_classes, self.bounds.d)

    @cached_property
    def release_mechanism(self):
        """The ε-LDP mechanism of a release (ε for the features under NCC's label split)."""
        eps = split_label_budget(self.epsilon, self.labels, self.label_fraction)[0] if self.base == "ncc" \
            else float(self.epsilon)
        return make_mechanism(self.mechanism, epsilon=eps, d=self.release_dim)

    def label_rr(self) -> KaryRandomizedResponse | None:
        """NCC with ``labels="rr"`` and finite ε: the labels' randomized response; else None."""
        eps_l = split_label_budget(self.epsilon, self.labels, self.label_fraction)[1]
        if self.base != "ncc" or self.labels != "rr" or not math.isfinite(eps_l):
            return None
        return KaryRandomizedResponse(epsilon=eps_l, n_classes=self.n_classes)

    # ------------------------------------------------------------------ owner side
    def owner_release(self, X, y, w, *, rng: np.random.Generator):
        """Owner side, once per run (Alg. 2 lines 6-9): the perturbed share for the base learner.

        Returns a stump table vector (``A * 2 * K``), an :class:`NccShare`, or an LR parameter vector.
        """
        mech = self.release_mechanism
        if self.base == "stump":
            return stump_share(X, y, w, bounds=self.bounds, n_bins=self.n_bins, n_classes=self.n_classes,
                               weight_bound=self.weight_bound, mechanism=mech, rng=rng)
        if self.base == "ncc":
            return ncc_share(X, y, bounds=self.bounds, mechanism=mech, label_rr=self.label_rr(), rng=rng,
                             sample_weight=w, weight_bound=self.weight_bound)
        theta = fit_local_logistic(X, y, bounds=self.bounds, n_classes=self.n_classes, C=self.C, sample_weight=w)
        return lr_share(theta, param_bound=self.param_bound, mechanism=mech, rng=rng)

    def group_release(self, X, y, w, owner_of_row, group, *, rng: np.random.Generator):
        """All releases of ``group`` at once; what ``[owner_release(owner) for owner in group]`` gives."""
        if self.base == "stump":
            t = stump_table_vectors(X, y, w, owner_of_row, group, bounds=self.bounds, n_bins=self.n_bins,
                                    n_classes=self.n_classes, weight_bound=self.weight_bound)
            return self.release_mechanism.privatize(t, rng)
        if self.base == "ncc":  # row-wise mechanism: one call over the group's rows = one call per owner
            rows = np.flatnonzero(np.isin(owner_of_row, group))
            return self.owner_release(X[rows], y[rows], w[rows], rng=rng)
        return np.stack([self.owner_release(X[owner_of_row == o], y[owner_of_row == o], w[owner_of_row == o],
                                            rng=rng) for o in group])

    # ------------------------------------------------------------------ coordinator side
    def coordinator_select(self, releases):
        """Coordinator side (Alg. 2 line 10): aggregate one group's releases into the base learner."""
        if self.base == "stump":
            tables = stump_aggregate(np.atleast_2d(releases), weight_bound=self.weight_bound,
                                     n_attributes=self.n_attributes, n_classes=self.n_classes)
            return select_stump(tables, bounds=self.bounds, n_bins=self.n_bins)
        if self.base == "ncc":
            return NearestCentroidModel(ncc_centroids(releases, n_classes=self.n_classes, bounds=self.bounds,
                                                      label_rr=self.label_rr()))
        return lr_aggregate(np.atleast_2d(releases), param_bound=self.param_bound, n_classes=self.n_classes,
                            bounds=self.bounds)

    def coordinator_decide(self, err_total: float, weight_total: float, n_kept: int) -> SammeDecision | None:
        """SAMME weight and stop rules from the secure sums (SPEC §5); ``None``: skip this round's learner.

        Raises
        ------
        PrivfedError
            ``on_reject="stop"`` and the first learner is no better than chance.
        """
        try:
            decision = samme_decide(err_total, weight_total, self.n_classes, n_kept=n_kept)
        except PrivfedError:
            if self.on_reject == "stop":
                raise
            return None
        if decision.step is SammeStep.DISCARD_AND_STOP and self.on_reject == "skip":
            return None
        return decision

    # ------------------------------------------------------------------ in-process driver
    def fit(self, X, y, *, owners=None, rng: np.random.Generator) -> BoostingRun:
        """Run Alg. 2 with every party in this process.

        Parameters
        ----------
        X, y : arrays (n, d), (n,) of class indices
        owners : list of index arrays, optional
            Rows of each owner (e.g. :func:`privfed.common.datasets.partition`); default one row each.
        rng : numpy.random.Generator
            Groups and noise (seeded for reproducible simulations).
        """
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        y = np.asarray(y)
        n = X.shape[0]
        if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= self.n_classes:
            raise ConfigError(f"y must be {n} class indices in 0..{self.n_classes - 1}")
        owner_of_row = np.arange(n) if owners is None else np.full(n, -1, dtype=np.int64)
        if owners is not None:
            for i, idx in enumerate(owners):
                if np.any(owner_of_row[idx] >= 0):
                    raise ConfigError(f"owner {i} shares rows with another owner; owners must be disjoint")
                owner_of_row[idx] = i
        n_owners = n if owners is None else len(owners)
        group_size = self.group_size or n_owners // self.n_rounds
        groups = sample_groups(n_owners, self.n_rounds, max(group_size, 1), rng)
        mine = owner_of_row >= 0
        w = np.where(mine, 1.0, 0.0)
        n_rows = int(mine.sum())
        fixed_point = boxes = None
        if self.secure_sum == "ring":
            fixed_point = FixedPoint.choose(n_owners, 2.0 * n_rows)  # |err_sum|, w_sum <= sum w = n_rows
            ids = [f"o{i}" for i in range(n_owners)]
            boxes = local_boxes({p: generate_private_key() for p in ids}, partial(ring_peers, ids))
        released = np.zeros(n_owners, dtype=bool)
        learners, alphas, rounds, stop = [], [], [], "n_rounds"
        per_owner = None
        if not self.vectorised:  # rows of each owner, by one stable sort
            order = np.argsort(owner_of_row, kind="stable")[int((~mine).sum()):]
            per_owner = np.split(order, np.cumsum(np.bincount(owner_of_row[mine], minlength=n_owners))[:-1])
        for t, group in enumerate(groups):
            if released[group].any():
                raise LocalProtocolError(f"round {t}: owners {group[released[group]].tolist()} already released")
            released[group] = True
            if self.vectorised:
                releases = self.group_release(X, y, w, owner_of_row, group, rng=rng)
            else:
                releases = [self.owner_release(X[per_owner[o]], y[per_owner[o]], w[per_owner[o]], rng=rng)
                            for o in group]
                releases = NccShare.concat(releases) if self.base == "ncc" else np.stack(releases)
            learner = self.coordinator_select(releases)
            if self.vectorised:
                miss = _misses(learner, X, y) & mine
                sums = np.stack([np.bincount(owner_of_row[mine], weights=(w * miss)[mine], minlength=n_owners),
                                 np.bincount(owner_of_row[mine], weights=w[mine], minlength=n_owners)], axis=1)
            else:
                sums = np.array([owner_local_error(learner, X[idx], y[idx], w[idx]) for idx in per_owner])
            err_total, w_total = secure_total(sums, method=self.secure_sum, fixed_point=fixed_point, boxes=boxes)
            decision = self.coordinator_decide(float(err_total), float(w_total), len(learners))
            if decision is None:
                error = float(err_total / w_total) if w_total > 0 else math.nan
                rounds.append(RoundRecord(t, len(group), learner, error, None, "skip"))
                continue
            if decision.step is SammeStep.DISCARD_AND_STOP:
                rounds.append(RoundRecord(t, len(group), learner, decision.error, None, "stop"))
                stop = "no_better_than_chance"
                break
            learners.append(learner)
            alphas.append(decision.alpha)
            rounds.append(RoundRecord(t, len(group), learner, decision.error, decision.alpha, decision.step.value))
            if decision.step is SammeStep.KEEP_AND_STOP:
                stop = "zero_error"
                break
            if self.vectorised:
                w = np.where(mine, owner_update_weights(learner, decision.alpha, X, y, w, err_total=float(err_total),
                                                        weight_total=float(w_total)), 0.0)
            else:
                for idx in per_owner:
                    w[idx] = owner_update_weights(learner, decision.alpha, X[idx], y[idx], w[idx],
                                                  err_total=float(err_total), weight_total=float(w_total))
        if not learners:
            raise PrivfedError(f"no round of {self.n_rounds} produced a learner better than chance (errors "
                               f"{[round(r.error, 4) for r in rounds]}); use larger groups, a larger epsilon "
                               "or another base learner")
        model = BoostedModel(learners, alphas, n_classes=self.n_classes)
        return BoostingRun(model, rounds, groups, w, stop)
