"""The owner's part of LDP gradient descent (:mod:`privfed.common.tasks.gradient`; Wang et al. ICDE 2019 §V).

``validate`` reads the task and public configuration only: the schema's bounds and classes, the public
range of ``param_bound``, the iterate θ (finite, of the shape the schema gives, inside the public box
``|θ_j| <= param_bound``) and the mechanism's ε range; the core then refuses a second gradient of the run
(its release id is the run's, :func:`~privfed.common.tasks.gradient_release_id`) and a release the budget
does not cover. The debit is committed before a row is read. ``compute`` is the mean gradient of the rows
at θ through the mechanism (:func:`~privfed.common.learners.ldp_gd.gradient_shares`); every coordinate of
a gradient lies in ``[-1, 1]`` whatever the rows and θ, so any input is in the mechanism's domain, and the
fallback (the core's totality) is the gradient 0 through the same mechanism.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.learners.ldp_gd import gd_mechanism, gradient_shares, n_outputs
from privfed.common.ledger import Debit
from privfed.common.mechanisms.base import Mechanism
from privfed.common.tasks import LR_GRADIENT, LrGradientReply, LrGradientTask, Task, gradient_release_id
from privfed.common.validation import check_positive
from privfed.common.work_rows import pad_rows, work_rows
from privfed.owner.kinds.base import PublicView, Refused, TaskKind, check_classes, check_limit, check_schema
from privfed.owner.kinds.shares import same_release
from privfed.owner.local import Cached, LocalOwner, PublicConfig, Release


def _mechanism(spec: LrGradientTask) -> Mechanism:
    return gd_mechanism(spec.mechanism, epsilon=spec.epsilon, p=spec.p)


def _spec(task: Task) -> LrGradientTask:
    if not isinstance(task.spec, LrGradientTask):
        raise ConfigError(f"task {task.task_id!r} is not an LrGradientTask")
    return task.spec


def _key(task: Task, owner: LocalOwner) -> Hashable:
    """Tasks one batched computation answers: the same release (θ, ε, mechanism, bounds...) and the same public
    row cell (:func:`~privfed.common.work_rows.work_rows`): owners are batched, and padded, by their cell, not by
    their counts (a batch per distinct count told a coordinator timing a node which of its owners hold as many
    rows; audit 10)."""
    s = _spec(task)
    theta = np.ascontiguousarray(s.theta, dtype=np.float64)
    b = s.bounds
    return (s.mechanism, s.epsilon, s.n_classes, theta.shape, theta.tobytes(), b.lo.tobytes(), b.hi.tobytes(),
            work_rows(owner.n_rows))  # fmt: skip


def _shares(spec: LrGradientTask, rows: Sequence[LocalOwner]) -> np.ndarray:
    """The reports of owners of one row cell, each on the cell's rows (its own, then zero rows masked out)."""
    cell = work_rows(rows[0].n_rows)
    return gradient_shares(
        spec.theta, np.stack([pad_rows(o.X, cell) for o in rows]), np.stack([pad_rows(o.y, cell, axis=-1) for o in rows]),
        bounds=spec.bounds, n_classes=spec.n_classes, mechanism=_mechanism(spec), rng=rows[0].rng,
        counts=[o.n_rows for o in rows],
    )  # fmt: skip


class LrGradientKind(TaskKind[LrGradientTask]):
    """One perturbed gradient per owner and run (module docstring).

    A node's owners asked for the same gradient and holding as many rows are computed together
    (``compute_many``), one independent draw per owner from the generator of the group's first owner
    (as :class:`~privfed.owner.kinds.shares.LrShareKind`).
    """

    kind = LR_GRADIENT
    batch = 1024  # a release is one gradient vector, whatever the rows

    def validate(self, task: Task, spec: LrGradientTask, view: PublicView) -> Cached | None:
        check_schema(spec.bounds, view)
        check_classes(spec.n_classes, view)
        check_positive(spec.param_bound, name="param_bound")
        check_limit("param_bound", spec.param_bound)
        theta = np.asarray(spec.theta)
        shape = (n_outputs(spec.n_classes), spec.bounds.d + 1)
        if theta.shape != shape or theta.dtype.kind not in "iuf":
            raise Refused("invalid_task", f"theta of shape {theta.shape}; this schema's model is {shape}")
        if not np.all(np.isfinite(theta)):
            raise Refused("invalid_task", "theta holds non-finite values")
        if np.max(np.abs(theta)) > spec.param_bound:
            raise Refused("invalid_task", f"theta leaves the public box |theta_j| <= param_bound={spec.param_bound:g}")
        _mechanism(spec)  # its public epsilon range
        return None

    def debits(self, task: Task, spec: LrGradientTask) -> list[Debit]:
        """The one entry of the release, under the run's release id: one gradient per owner and run."""
        ((eps, delta, purpose),) = spec.ledger_entries()
        return [Debit(task.owner_id, eps, delta, f"{purpose}:{task.round_id}", gradient_release_id(task.round_id))]

    def compute(self, task: Task, spec: LrGradientTask, owner: LocalOwner) -> LrGradientReply:
        return LrGradientReply(reports=_shares(spec, [owner]))

    def compute_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        out: list[Release] = [LrGradientReply(np.empty((0, 0)))] * len(tasks)
        for group in same_release(tasks, owners, _key):
            reports = _shares(_spec(tasks[group[0]]), [owners[i] for i in group])
            for j, i in enumerate(group):
                out[i] = LrGradientReply(reports=reports[j : j + 1])
        return out

    def fallback_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        out: list[Release] = [LrGradientReply(np.empty((0, 0)))] * len(tasks)
        for group in same_release(tasks, owners, _key):
            spec, g = _spec(tasks[group[0]]), len(group)
            reports = gradient_shares(
                spec.theta, np.zeros((g, 0, spec.bounds.d)), np.zeros((g, 0), dtype=np.int64), bounds=spec.bounds,
                n_classes=spec.n_classes, mechanism=_mechanism(spec), rng=owners[group[0]].rng,
            )  # fmt: skip
            for j, i in enumerate(group):
                out[i] = LrGradientReply(reports=reports[j : j + 1])
        return out

    def fallback(
        self, spec: LrGradientTask, public: PublicConfig, n_rows: int, rng: np.random.Generator
    ) -> LrGradientReply:
        """The gradient 0 (of no rows) through the same mechanism."""
        empty = np.zeros((1, 0, public.n_features))
        reports = gradient_shares(
            spec.theta, empty, np.zeros((1, 0), dtype=np.int64), bounds=spec.bounds, n_classes=spec.n_classes,
            mechanism=_mechanism(spec), rng=rng,
        )  # fmt: skip
        return LrGradientReply(reports=reports)
