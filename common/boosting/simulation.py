"""Every owner of a boosting run in this process: the owner steps of :func:`~privfed.common.boosting.loop.run_rounds`.

:class:`SimulatedOwners` holds all owners' rows and SAMME weights and applies the owner steps of
:mod:`privfed.common.boosting.federated` to them: with ``vectorised=True`` (default) to all owners
at once (:meth:`~privfed.common.boosting.federated.FederatedBoosting.group_release`: one share call
for a whole group, per-owner sums by ``bincount``), else owner by owner. Every owner step is
row-wise or a per-owner sum and the mechanisms perturb row by row, so both are the computation
each owner's handler does (``privfed.owner``); at ε = ∞ they give identical models, and with a
finite ε the noise draws differ (one generator stream instead of one per owner) but have the
same distribution (tested, also against the real owner handlers over
``privfed.deploy.inprocess``). This is what keeps experiments with 10^4 owners fast.

The secure sum is ``"plain"`` (float64) or ``"ring"`` (the ring state machines in-process,
:func:`~privfed.common.boosting.federated.secure_total`); both add the *noisy* evaluation releases.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from privfed.common.boosting.federated import (
    FederatedBoosting,
    Learner,
    Release,
    _misses,
    concat_releases,
    owner_update_weights,
    secure_total,
)
from privfed.common.boosting.loop import BoostingRun, Evaluation, RoundRecord, plan_rounds, run_rounds
from privfed.common.errors import ConfigError, LocalProtocolError
from privfed.common.secagg.boxes import generate_private_key, local_boxes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.ring import ring_peers


class SimulatedOwners:
    """The owner steps of a run for owners holding ``X[owner_of_row == i]`` (a :class:`RoundSteps`).

    Parameters
    ----------
    fb : FederatedBoosting
    X, y : arrays (n, d), (n,) of class indices
    owners : list of index arrays or None
        Rows of each owner; default one row each.
    rng : numpy.random.Generator
        The owners' noise (seeded for reproducible simulations).
    """

    def __init__(
        self, fb: FederatedBoosting, X: np.ndarray, y: np.ndarray, owners: list | None, rng: np.random.Generator
    ):
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        y = np.asarray(y)
        n = X.shape[0]
        if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= fb.n_classes:
            raise ConfigError(f"y must be {n} class indices in 0..{fb.n_classes - 1}")
        owner_of_row = np.arange(n) if owners is None else np.full(n, -1, dtype=np.int64)
        if owners is not None:
            for i, idx in enumerate(owners):
                if np.any(owner_of_row[idx] >= 0):
                    raise ConfigError(f"owner {i} shares rows with another owner; owners must be disjoint")
                owner_of_row[idx] = i
        self.fb, self.X, self.y, self.rng = fb, X, y, rng
        self.n_owners = n if owners is None else len(owners)
        self.owner_of_row = owner_of_row
        self.mine = owner_of_row >= 0
        self.w = np.where(self.mine, 1.0, 0.0)
        self.released = np.zeros(self.n_owners, dtype=np.int64)  # shares released per owner
        self.per_owner: list[np.ndarray] = []
        if not fb.vectorised:  # rows of each owner, by one stable sort
            order = np.argsort(owner_of_row, kind="stable")[int((~self.mine).sum()) :]
            counts = np.bincount(owner_of_row[self.mine], minlength=self.n_owners)
            self.per_owner = np.split(order, np.cumsum(counts)[:-1])
        self._keys = (
            {f"o{i}": generate_private_key() for i in range(self.n_owners)} if fb.secure_sum == "ring" else None
        )
        self._ring_boxes: dict[int, tuple] = {}  # id(evaluator array) -> (fixed point, boxes) of its ring

    def release(self, round_no: int, group: np.ndarray) -> Release:
        spent = self.released[group] >= self.fb.shares_per_owner
        if spent.any():
            raise LocalProtocolError(
                f"round {round_no}: owners {group[spent].tolist()} already released their "
                f"{self.fb.shares_per_owner} share(s)"
            )
        self.released[group] += 1
        fb, X, y, w = self.fb, self.X, self.y, self.w
        if fb.vectorised:
            return fb.group_release(X, y, w, self.owner_of_row, group, rng=self.rng)
        rows = self.per_owner
        releases = [fb.owner_release(X[rows[o]], y[rows[o]], w[rows[o]], rng=self.rng) for o in group]
        return concat_releases(releases)

    def _sums(self, evals: np.ndarray, learner: Learner) -> np.ndarray:
        """Each evaluator's row-clipped ``(err_sum, w_sum)`` (``FederatedBoosting.evaluation_sums``)."""
        fb, X, y, w = self.fb, self.X, self.y, self.w
        if not fb.vectorised:
            rows = self.per_owner
            return np.array([fb.evaluation_sums(learner, X[rows[o]], y[rows[o]], w[rows[o]]) for o in evals]).reshape(
                -1, 2
            )
        mine, owner = self.mine, self.owner_of_row
        miss = _misses(learner, X, y) & mine
        u = np.minimum(w, fb.eval_row_bound)
        return np.stack(
            [
                np.bincount(owner[mine], weights=(u * miss)[mine], minlength=self.n_owners),
                np.bincount(owner[mine], weights=u[mine], minlength=self.n_owners),
            ],
            axis=1,
        )[evals]

    def evaluate(self, round_no: int, evaluators: np.ndarray, learner: Any) -> Evaluation:
        noisy = self.fb.evaluation_release(self._sums(evaluators, learner), rng=self.rng)  # each owner's release
        fixed_point = boxes = ids = None
        if self._keys is not None:
            ids = [f"o{i}" for i in evaluators]
            if id(evaluators) not in self._ring_boxes:
                self._ring_boxes[id(evaluators)] = (
                    FixedPoint.choose(len(ids), self.fb.contribution_bound),
                    local_boxes({p: self._keys[p] for p in ids}, partial(ring_peers, ids)),
                )
            fixed_point, boxes = self._ring_boxes[id(evaluators)]
        err, wsum = secure_total(noisy, method=self.fb.secure_sum, fixed_point=fixed_point, boxes=boxes, ids=ids)
        return Evaluation(float(err), float(wsum), len(evaluators))

    def keep(self, round_no: int, learner: Any, alpha: float, err_total: float, weight_total: float) -> None:
        fb, X, y = self.fb, self.X, self.y
        if fb.vectorised:
            new = owner_update_weights(learner, alpha, X, y, self.w, err_total=err_total, weight_total=weight_total)
            self.w = np.where(self.mine, new, 0.0)
            return
        for idx in self.per_owner:
            self.w[idx] = owner_update_weights(
                learner, alpha, X[idx], y[idx], self.w[idx], err_total=err_total, weight_total=weight_total
            )

    def decided(self, record: RoundRecord) -> None:
        """Nothing to report: :func:`run_rounds` returns the records."""


def simulate(
    fb: FederatedBoosting, X: np.ndarray, y: np.ndarray, *, owners: list | None = None, rng: np.random.Generator
) -> BoostingRun:
    """:func:`run_rounds` with every owner simulated in this process (:class:`SimulatedOwners`)."""
    steps = SimulatedOwners(fb, X, y, owners, rng)
    run = run_rounds(fb, steps, *plan_rounds(fb, steps.n_owners, rng))
    run.weights = steps.w
    return run
