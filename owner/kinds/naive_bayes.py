"""The owner's part of LDP naive Bayes (:mod:`privfed.common.tasks.naive_bayes`; issue 22 item 3).

``validate`` reads the task and public configuration only: the schema's bounds and classes, ``n_bins``
against the public limit :data:`~privfed.common.tasks.naive_bayes.MAX_NB_BINS`, and the oracle's ε range
(the encoding is built from the public parameters); the core then refuses a second report of the run (its
release id is the run's, :func:`~privfed.common.tasks.nb_release_id`) and a release the budget does not
cover. The debit is committed before a row is read. ``compute`` is :func:`share_owners` of
the owner's rows (one sampled feature, one sampled row, one oracle report; only the sampled row is read, so the
work does not grow with the private row count); every row has a cell
whatever its values (they are clipped to the bounds), so any input is in the oracle's domain, and the
fallback (the core's totality, and an owner holding no row) is a uniformly drawn cell through the same
oracle.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.learners.naive_bayes import NaiveBayesEncoding
from privfed.common.ledger import Debit
from privfed.common.tasks import NB_REPORT, NbReportReply, NbReportTask, Task, nb_release_id
from privfed.common.tasks.naive_bayes import MAX_NB_BINS
from privfed.common.validation import check_int
from privfed.owner.kinds.base import PublicView, Refused, TaskKind, check_classes, check_schema
from privfed.owner.kinds.shares import same_release
from privfed.owner.local import Cached, LocalOwner, PublicConfig, Release


def _spec(task: Task) -> NbReportTask:
    if not isinstance(task.spec, NbReportTask):
        raise ConfigError(f"task {task.task_id!r} is not an NbReportTask")
    return task.spec


def _key(task: Task) -> Hashable:
    """Tasks one batched computation answers: the same encoding (ε, bins, classes, bounds)."""
    s = _spec(task)
    return (s.epsilon, s.n_bins, s.n_classes, s.bounds.lo.tobytes(), s.bounds.hi.tobytes())


class NbReportKind(TaskKind[NbReportTask]):
    """One (feature, bin, class) report per owner and run (module docstring).

    A node's owners asked for the same encoding are computed together (``compute_many``): one
    :func:`share_owners` over their rows, one
    independent draw per owner from the generator of the group's first owner
    (as :class:`~privfed.owner.kinds.gradient.LrGradientKind`).
    """

    kind = NB_REPORT
    batch = 1024  # a release is one report, whatever the rows

    def validate(self, task: Task, spec: NbReportTask, view: PublicView) -> Cached | None:
        check_schema(spec.bounds, view)
        check_classes(spec.n_classes, view)
        check_int(spec.n_bins, name="n_bins", minimum=2)
        if spec.n_bins > MAX_NB_BINS:
            raise Refused("invalid_task", f"n_bins={spec.n_bins} is above the public limit {MAX_NB_BINS}")
        spec.encoding  # noqa: B018 - its public ε range and oracle
        return None

    def debits(self, task: Task, spec: NbReportTask) -> list[Debit]:
        """The one entry of the release, under the run's release id: one report per owner and run."""
        ((eps, delta, purpose),) = spec.ledger_entries()
        return [Debit(task.owner_id, eps, delta, f"{purpose}:{task.round_id}", nb_release_id(task.round_id))]

    def compute(self, task: Task, spec: NbReportTask, owner: LocalOwner) -> NbReportReply:
        if owner.n_rows == 0:
            return _uniform_report(spec, owner.rng)
        features, reports = share_owners(spec.encoding, [(owner.X, owner.y)], owner.rng)
        return NbReportReply(features=features, reports=reports.reshape(1, -1))

    def compute_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        if any(o.n_rows == 0 for o in owners):
            return None  # one by one: an owner of no row answers its fallback
        out: list[Release] = [NbReportReply(np.empty(0), np.empty((0, 0)))] * len(tasks)
        for group in same_release(tasks, owners, lambda task, owner: _key(task)):
            spec, rows = _spec(tasks[group[0]]), [owners[i] for i in group]
            features, reports = share_owners(spec.encoding, [(o.X, o.y) for o in rows], rows[0].rng)
            reports = reports.reshape(len(rows), -1)
            for j, i in enumerate(group):
                out[i] = NbReportReply(features=features[j : j + 1], reports=reports[j : j + 1])
        return out

    def fallback(
        self, spec: NbReportTask, public: PublicConfig, n_rows: int, rng: np.random.Generator
    ) -> NbReportReply:
        return _uniform_report(spec, rng)

    def fallback_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        out: list[Release] = [NbReportReply(np.empty(0), np.empty((0, 0)))] * len(tasks)
        for group in same_release(tasks, owners, lambda task, owner: _key(task)):
            many = _uniform_report(_spec(tasks[group[0]]), owners[group[0]].rng, len(group))
            for j, i in enumerate(group):
                out[i] = NbReportReply(features=many.features[j : j + 1], reports=many.reports[j : j + 1])
        return out


def share_owners(
    enc: NaiveBayesEncoding, owners: Sequence[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`~privfed.common.learners.naive_bayes.NaiveBayesEncoding.share` of owners ``(X_i, y_i)`` of at least
    one row each, with no pass over an owner's rows (:meth:`~privfed.common.learners.naive_bayes.
    NaiveBayesEncoding.owner_reports`: each owner's row drawn by its index, only that row read), and without
    stacking them: for one generator, the reports ``share`` gives of their rows stacked (``tests/unit/test_nb_kind.py``)."""
    count = np.array([np.asarray(y).shape[0] for _, y in owners], dtype=np.int64)

    def drawn(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = np.array([np.asarray(x)[i] for (x, _), i in zip(owners, index, strict=True)]).reshape(len(owners), enc.d)
        y = np.array([np.asarray(y)[i] for (_, y), i in zip(owners, index, strict=True)], dtype=np.int64)
        return X, y

    return enc.owner_reports(count, drawn, rng)


def _uniform_report(spec: NbReportTask, rng: np.random.Generator, owners: int = 1) -> NbReportReply:
    """A uniformly drawn cell of a uniformly drawn feature through the same oracle (data-independent), for
    each of ``owners`` owners (one row of ``reports`` each)."""
    enc = spec.encoding
    feature = rng.integers(0, enc.d, size=owners).astype(np.int64)
    cell = rng.integers(0, enc.domain, size=owners).astype(np.int64)
    reports = enc.frequency_oracle.privatize(cell, rng) if np.isfinite(spec.epsilon) else cell
    return NbReportReply(features=feature, reports=np.asarray(reports, dtype=np.int64).reshape(owners, -1))
