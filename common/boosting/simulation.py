"""Every owner of a boosting run in this process: the in-process driver of :func:`~privfed.common.boosting.loop.run_rounds`.

:func:`simulate` runs Alg. 2 with every party in this process (the experiments, ``privfed experiment
bdt-error`` and the estimators). :class:`SimulatedOwners` holds all owners' rows and SAMME weights and
applies the owner steps of :mod:`privfed.common.boosting.owner` to them: with ``vectorised=True`` (default)
to all owners at once (:func:`~privfed.common.boosting.owner.group_shares`: one share call for a whole
group, per-owner sums by ``bincount``), else owner by owner. Every owner step is row-wise or a per-owner sum
and the mechanisms perturb row by row, so both are the computation each owner's task kind does
(``privfed.owner``); at ε = ∞ they give identical models, and with a finite ε the noise draws differ (one
generator stream instead of one per owner) but have the same distribution (tested, also against the real
owner cores over ``privfed.deploy.inprocess``). This is what keeps experiments with 10^4 owners fast.

Secure sum. ``secure_sum="ring"`` runs :func:`~privfed.common.secagg.inprocess.run_ring_in_process` (the
networked state machines, AES-GCM hops) on the fixed-point values; ``"plain"`` adds the same per-owner
values in float64. Both sum the owners' *noisy* evaluation releases, so a measured utility is the deployed
one. The ring is exact in Z_2^64, so the two differ only by the fixed-point rounding, at most ``N 2^(-f-1)``
(SPEC §11.1; tested): ``"plain"`` keeps runs with 10^4 owners fast. Both are the simulation's own choices,
not public parameters of the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

import numpy as np

from privfed.common.boosting.coordinator import CoordinatorSteps, concat_releases
from privfed.common.boosting.loop import BoostingRun, Evaluation, RoundRecord, plan_rounds, run_rounds
from privfed.common.boosting.owner import (
    Learner,
    Release,
    evaluation_release,
    evaluation_sums,
    group_shares,
    misses,
    share,
    update_weights,
)
from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.releases import ReleasePlan
from privfed.common.errors import ConfigError, LocalProtocolError
from privfed.common.secagg.boxes import generate_private_key, local_boxes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.inprocess import run_ring_in_process
from privfed.common.secagg.ring_topology import ring_peers
from privfed.common.validation import check_choice

SECURE_SUMS = ("plain", "ring")


def secure_total(
    values: Any,
    *,
    method: str = "plain",
    fixed_point: FixedPoint | None = None,
    boxes: Any = None,
    ids: Iterable[str] | None = None,
) -> np.ndarray:
    """Sum per-owner vectors: ``values`` (N, m) -> (m,).

    ``"plain"``: float64 sum. ``"ring"``: :func:`run_ring_in_process` over parties ``ids`` (default
    ``"o0"..``) with ``fixed_point`` (required) and optional cached ``boxes``; exact in Z_2^64, so it
    differs from the plain sum by at most ``fixed_point.error_bound`` (SPEC §11.1).
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if check_choice(method, name="method", allowed=SECURE_SUMS) == "plain":
        return values.sum(axis=0)
    if fixed_point is None:
        raise ConfigError("secure_total(method='ring') needs fixed_point (FixedPoint.choose(n_parties, max_abs))")
    ids = [f"o{i}" for i in range(values.shape[0])] if ids is None else list(ids)
    return run_ring_in_process(dict(zip(ids, values)), fixed_point, boxes)


class SimulatedOwners:
    """The owner steps of a run for owners holding ``X[owner_of_row == i]`` (a :class:`RoundSteps`).

    Parameters
    ----------
    plan : ReleasePlan
        The run's public parameters and releases.
    X, y : arrays (n, d), (n,) of class indices
    owners : list of index arrays or None
        Rows of each owner; default one row each.
    rng : numpy.random.Generator
        The owners' noise (seeded for reproducible simulations).
    secure_sum : {"plain", "ring"}
        How the evaluations are summed (module docstring).
    vectorised : bool
        Apply the owner steps to all owners at once (module docstring).
    """

    def __init__(
        self,
        plan: ReleasePlan,
        X: np.ndarray,
        y: np.ndarray,
        owners: list | None,
        rng: np.random.Generator,
        *,
        secure_sum: str = "plain",
        vectorised: bool = True,
    ):
        check_choice(secure_sum, name="secure_sum", allowed=SECURE_SUMS)
        p = plan.params
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        y = np.asarray(y)
        n = X.shape[0]
        if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= p.n_classes:
            raise ConfigError(f"y must be {n} class indices in 0..{p.n_classes - 1}")
        owner_of_row = np.arange(n) if owners is None else np.full(n, -1, dtype=np.int64)
        if owners is not None:
            for i, idx in enumerate(owners):
                if np.any(owner_of_row[idx] >= 0):
                    raise ConfigError(f"owner {i} shares rows with another owner; owners must be disjoint")
                owner_of_row[idx] = i
        self.plan, self.X, self.y, self.rng = plan, X, y, rng
        self.secure_sum, self.vectorised = secure_sum, bool(vectorised)
        self.n_owners = n if owners is None else len(owners)
        self.owner_of_row = owner_of_row
        self.mine = owner_of_row >= 0
        self.w = np.where(self.mine, 1.0, 0.0)
        self.released = np.zeros(self.n_owners, dtype=np.int64)  # shares released per owner
        self.per_owner: list[np.ndarray] = []
        if not self.vectorised:  # rows of each owner, by one stable sort
            order = np.argsort(owner_of_row, kind="stable")[int((~self.mine).sum()) :]
            counts = np.bincount(owner_of_row[self.mine], minlength=self.n_owners)
            self.per_owner = np.split(order, np.cumsum(counts)[:-1])
        self._keys = {f"o{i}": generate_private_key() for i in range(self.n_owners)} if secure_sum == "ring" else None
        self._ring_boxes: dict[int, tuple] = {}  # id(evaluator array) -> (fixed point, boxes) of its ring

    def release(self, round_no: int, group: np.ndarray) -> Release:
        allowed = self.plan.params.shares_per_owner
        spent = self.released[group] >= allowed
        if spent.any():
            raise LocalProtocolError(
                f"round {round_no}: owners {group[spent].tolist()} already released their {allowed} share(s)"
            )
        self.released[group] += 1
        plan, X, y, w = self.plan, self.X, self.y, self.w
        if self.vectorised:
            return group_shares(plan, X, y, w, self.owner_of_row, group, rng=self.rng)
        rows = self.per_owner
        return concat_releases([share(plan, X[rows[o]], y[rows[o]], w[rows[o]], rng=self.rng) for o in group])

    def _sums(self, evals: np.ndarray, learner: Learner) -> np.ndarray:
        """Each evaluator's row-clipped ``(err_sum, w_sum)`` (:func:`~privfed.common.boosting.owner.evaluation_sums`)."""
        plan, X, y, w = self.plan, self.X, self.y, self.w
        if not self.vectorised:
            rows = self.per_owner
            return np.array(
                [evaluation_sums(plan, learner, X[rows[o]], y[rows[o]], w[rows[o]]) for o in evals]
            ).reshape(-1, 2)
        mine, owner = self.mine, self.owner_of_row
        miss = misses(learner, X, y) & mine
        u = np.minimum(w, plan.params.eval_row_bound)
        return np.stack(
            [
                np.bincount(owner[mine], weights=(u * miss)[mine], minlength=self.n_owners),
                np.bincount(owner[mine], weights=u[mine], minlength=self.n_owners),
            ],
            axis=1,
        )[evals]

    def evaluate(self, round_no: int, evaluators: np.ndarray, learner: Any) -> Evaluation:
        noisy = evaluation_release(self.plan, self._sums(evaluators, learner), rng=self.rng)  # each owner's release
        fixed_point = boxes = ids = None
        if self._keys is not None:
            ids = [f"o{i}" for i in evaluators]
            if id(evaluators) not in self._ring_boxes:
                self._ring_boxes[id(evaluators)] = (
                    FixedPoint.choose(len(ids), self.plan.contribution_bound),
                    local_boxes({p: self._keys[p] for p in ids}, partial(ring_peers, ids)),
                )
            fixed_point, boxes = self._ring_boxes[id(evaluators)]
        err, wsum = secure_total(noisy, method=self.secure_sum, fixed_point=fixed_point, boxes=boxes, ids=ids)
        return Evaluation(float(err), float(wsum), len(evaluators))

    def keep(self, round_no: int, learner: Any, alpha: float, err_total: float, weight_total: float) -> None:
        X, y = self.X, self.y
        if self.vectorised:
            new = update_weights(learner, alpha, X, y, self.w, err_total=err_total, weight_total=weight_total)
            self.w = np.where(self.mine, new, 0.0)
            return
        for idx in self.per_owner:
            self.w[idx] = update_weights(
                learner, alpha, X[idx], y[idx], self.w[idx], err_total=err_total, weight_total=weight_total
            )

    def decided(self, record: RoundRecord) -> None:
        """Nothing to report: :func:`run_rounds` returns the records."""


def simulate(
    params: BoostingParams,
    X: np.ndarray,
    y: np.ndarray,
    *,
    owners: list | None = None,
    rng: np.random.Generator,
    secure_sum: str = "plain",
    vectorised: bool = True,
    on_reject: str = "skip",
) -> BoostingRun:
    """Run Alg. 2 with every owner simulated in this process: :func:`run_rounds` over :class:`SimulatedOwners`.

    Parameters
    ----------
    params : BoostingParams
        The run's public configuration.
    X, y : arrays (n, d), (n,) of class indices
    owners : list of index arrays, optional
        Rows of each owner (e.g. :func:`privfed.common.datasets.partition`); default one row each.
    rng : numpy.random.Generator
        Groups and noise (seeded for reproducible simulations).
    secure_sum, vectorised : the simulation's own choices (:class:`SimulatedOwners`).
    on_reject : {"skip", "stop"}
        The coordinator's rule for a learner no better than chance
        (:class:`~privfed.common.boosting.coordinator.CoordinatorSteps`).
    """
    plan = ReleasePlan(params)
    coordinator = CoordinatorSteps(plan, on_reject=on_reject)
    steps = SimulatedOwners(plan, X, y, owners, rng, secure_sum=secure_sum, vectorised=vectorised)
    run = run_rounds(coordinator, steps, *plan_rounds(params, steps.n_owners, rng))
    run.weights = steps.w
    return run
