"""Task kinds of the LDP models (seed 002 §3.5): nearest-centroid rows and a local logistic model.

Both are ε-LDP releases of values clipped to the public bounds, so any input in the mechanism's
domain -- the rows, or the data-independent fallback (zero parameters; a padded NCC share's public count of
dummies, the bounds' midpoint labelled ⊥ or of weight 0; a clear one's midpoint rows of class 0) -- gives the
guarantee.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import fields
from typing import TypeVar

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.logistic import fit_local_logistic, fit_local_logistic_many, lr_share
from privfed.common.learners.ncc import ncc_share
from privfed.common.learners.ncc_padding import public_count_rows, shuffled
from privfed.common.learners.ncc_rr import dummy_label
from privfed.common.mechanisms import KaryRandomizedResponse, mechanism_of
from privfed.common.mechanisms.base import Mechanism
from privfed.common.tasks import (
    LR_SHARE,
    NCC_SHARE,
    JointNccShareReply,
    LrShareReply,
    LrShareTask,
    NccShareReply,
    NccShareTask,
    Task,
)
from privfed.common.validation import check_positive
from privfed.common.work_rows import pad_rows, work_rows
from privfed.owner.kinds.base import PublicView, TaskKind, check_classes, check_limit, check_schema
from privfed.owner.local import Cached, LocalOwner, PublicConfig, Release


def lr_parameter_count(d: int, n_classes: int) -> int:
    """Length of an owner's logistic-regression parameter vector: ``(d + 1)`` per binary problem,
    one problem for two classes, ``K`` one-vs-rest problems otherwise."""
    return (d + 1) * (1 if n_classes == 2 else n_classes)


#: An NCC share's input for one owner: its rows, labels, weights (``None``: 1 each) and the public count of reports
#: when it is not its rows' (``None``; a spent owner's fallback: no rows and its count of dummies).
OwnerRows = tuple[np.ndarray, np.ndarray, "np.ndarray | None", "int | None"]


def midpoint_rows(bounds: Bounds, n_rows: int) -> np.ndarray:
    """``n_rows`` copies of the bounds' midpoint: the data-independent rows of a fallback release (none for an
    owner of no rows: its fallback is then the release of no data, which it answers, :mod:`privfed.owner.compute`)."""
    return np.full((n_rows, bounds.d), (bounds.lo + bounds.hi) / 2.0)  # np.tile's calls follow n_rows == 0


def same_release(
    tasks: Sequence[Task], owners: Sequence[LocalOwner], key: Callable[[Task, LocalOwner], Hashable]
) -> list[list[int]]:
    """Indices of ``tasks`` grouped by ``key``: the tasks one batched computation can answer."""
    groups: dict[Hashable, list[int]] = {}
    for i, (task, owner) in enumerate(zip(tasks, owners, strict=True)):
        groups.setdefault(key(task, owner), []).append(i)
    return list(groups.values())


_Spec = TypeVar("_Spec", NccShareTask, LrShareTask)


def spec_of(task: Task, cls: type[_Spec]) -> _Spec:
    """``task.spec`` as the kind's spec type (the registry routed it here by that type)."""
    if not isinstance(task.spec, cls):
        raise ConfigError(f"task {task.task_id!r} is not a {cls.__name__}")
    return task.spec


def spec_key(spec: NccShareTask | LrShareTask) -> Hashable:
    """The spec's fields, its bounds as bytes: equal keys, one mechanism for the group."""
    b = spec.bounds
    return (*(v for k, v in vars(spec).items() if k != "bounds"), b.lo.tobytes(), b.hi.tobytes())


class NccShareKind(TaskKind[NccShareTask]):
    """Every row once through an ε-LDP mechanism, labels by k-RR (or clear, by opt-in); under
    ``labels="joint"``, every row's one (label, sign) report at the whole ε
    (:class:`~privfed.common.learners.ncc_joint.JointLabelEncoding`).

    A node's owners asking for the same release are computed together (``compute_many``): their
    rows go through the mechanism in one call, each row its own draw, and each owner gets back
    its own rows' reports. Every row is perturbed once either way, so each owner's release is the
    same ε-LDP release (seed 002 §3.5.1); the draws come from the generator of the group's first
    owner (each owner's generator is the node's own noise stream).
    """

    kind = NCC_SHARE
    batch = 256  # an owner's reports are as large as its rows
    spec_only = True

    def releases_clear_labels(self, spec: NccShareTask) -> bool:
        return spec.labels == "clear"

    def _mechanisms(self, spec: NccShareTask) -> tuple[Mechanism, KaryRandomizedResponse | None]:
        return mechanism_of(spec.mechanism, spec.epsilon, spec.bounds.d), spec.label_response()

    def _rows(
        self, spec: NccShareTask, rows: OwnerRows, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """One owner's rows, labels and weights as its share carries them: under ``labels="joint"`` or ``"rr"``,
        exactly the public ``work_rows(n, max_owner_rows)`` of them, dummies or a subsample, or a fallback's count of
        dummies (:func:`~privfed.common.learners.ncc_padding.public_count_rows`; joint dummies of weight 0, rr dummies
        of label ⊥, :mod:`~privfed.common.learners.ncc_rr`); under ``"clear"`` (or at ε = ∞) its rows, one report per
        row."""
        X, y, w, count = rows
        if not spec.padded():
            return X, y, None
        rows = public_count_rows(
            X,
            y,
            w,
            bound=spec.max_owner_rows,
            bounds=spec.bounds,
            n_classes=spec.n_classes,
            rng=rng,
            dummy_label=dummy_label(spec.label_response(), spec.n_classes),
            count=count,
        )
        return rows if spec.joint_encoding() is not None else (*rows[:2], None)

    def _share(
        self, spec: NccShareTask, X: np.ndarray, y: np.ndarray, w: np.ndarray | None, rng: np.random.Generator
    ) -> NccShareReply | JointNccShareReply:
        """The release of rows ``X, y`` (weights ``w``: joint only): joint reports, or perturbed rows and their labels."""
        encoding = spec.joint_encoding()
        if encoding is not None:
            sampled = encoding.share(X, y, bounds=spec.bounds, rng=rng, sample_weight=w)
            return JointNccShareReply(features=sampled.coordinates[:, 0], reports=sampled.reports[:, 0])
        mechanism, label_rr = self._mechanisms(spec)
        share = ncc_share(X, y, bounds=spec.bounds, mechanism=mechanism, label_rr=label_rr, rng=rng)
        return NccShareReply(reports=share.reports, labels=share.labels)

    def _shares(self, spec: NccShareTask, rows: Sequence[OwnerRows], rng: np.random.Generator) -> list[Release]:
        """The releases of several owners' :data:`OwnerRows` (the share's weights: 1 for a row, 0 for a dummy,
        joint only) in one call of the mechanism: each row its own draw, each owner its own share of its (public
        count of) reports."""
        owned = [self._rows(spec, r, rng) for r in rows]
        X, y = np.concatenate([o[0] for o in owned]), np.concatenate([o[1] for o in owned])
        w = None if owned[0][2] is None else np.concatenate([o[2] for o in owned if o[2] is not None])
        release = self._share(spec, X, y, w, rng)
        sizes = np.array([len(o[1]) for o in owned])
        ends = np.cumsum(sizes)
        pieces = [
            type(release)(*(getattr(release, f.name)[a:b] for f in fields(release))) for a, b in zip(ends - sizes, ends)
        ]
        return [self._ordered(spec, piece, rng) for piece in pieces]

    @staticmethod
    def _ordered(spec: NccShareTask, release: Release, rng: np.random.Generator) -> Release:
        """A padded share's reports shuffled (its dummies are last: :func:`~privfed.common.learners.ncc_padding.shuffled`)."""
        return shuffled(release, rng) if spec.padded() else release

    def validate(self, task: Task, spec: NccShareTask, view: PublicView) -> Cached | None:
        check_schema(spec.bounds, view)
        check_classes(spec.n_classes, view)
        self._mechanisms(spec)
        spec.joint_encoding()  # joint: ε within the mechanisms' floor and ceiling
        return None

    def compute(self, task: Task, spec: NccShareTask, owner: LocalOwner) -> Release:
        return self._shares(spec, [(owner.X, owner.y, None, None)], owner.rng)[0]

    def compute_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        out: list[Release] = [NccShareReply(np.empty((0, 0)), np.empty(0, np.int64))] * len(tasks)
        for group in same_release(tasks, owners, lambda t, o: spec_key(spec_of(t, NccShareTask))):
            spec = spec_of(tasks[group[0]], NccShareTask)
            rows = [(owners[i].X, owners[i].y, None, None) for i in group]
            for i, release in zip(group, self._shares(spec, rows, owners[group[0]].rng), strict=True):
                out[i] = release
        return out

    def _fallback_rows(self, spec: NccShareTask, n_rows: int) -> OwnerRows:
        """The rows of the data-independent fallback of an owner of ``n_rows`` rows. A padded share's: no rows, and
        its public count ``work_rows(n_rows, max_owner_rows)`` of dummies (⊥, or a uniform class under the K-ary
        k-RR, weight 0), a function of its length alone; ``n_rows`` midpoint rows of class 0 among ``m - n_rows``
        dummies told ``n_rows`` by their labels (``tests/adversary/test_ncc_fallback_row_count.py``). Else (clear
        labels, ε = ∞: one report per row, the length is ``n_rows``) ``n_rows`` midpoint rows of class 0."""
        if not spec.padded():
            return midpoint_rows(spec.bounds, n_rows), np.zeros(n_rows, dtype=np.int64), None, None
        no_rows = np.zeros((0, spec.bounds.d)), np.zeros(0, dtype=np.int64), None
        return (*no_rows, work_rows(n_rows, spec.max_owner_rows))

    def fallback(self, spec: NccShareTask, public: PublicConfig, n_rows: int, rng: np.random.Generator) -> Release:
        return self._shares(spec, [self._fallback_rows(spec, n_rows)], rng)[0]

    def fallback_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        out: list[Release] = [NccShareReply(np.empty((0, 0)), np.empty(0, np.int64))] * len(tasks)
        for group in same_release(tasks, owners, lambda t, o: spec_key(spec_of(t, NccShareTask))):
            spec = spec_of(tasks[group[0]], NccShareTask)
            rng = owners[group[0]].rng
            rows = [self._fallback_rows(spec, owners[i].n_rows) for i in group]
            for i, release in zip(group, self._shares(spec, rows, rng), strict=True):
                out[i] = release
        return out


class LrShareKind(TaskKind[LrShareTask]):
    """A local logistic model, clipped to the public parameter bound, through an ε-LDP mechanism.

    A node's owners asking for the same release whose row counts lie in one public cell
    (:func:`~privfed.common.work_rows.work_rows`) are fitted together, their rows padded to the cell with
    rows of zero weight (``compute_many``: :func:`fit_local_logistic_many`, the same optimum; grouping by
    the private count itself made one fit for equal counts and two for unequal ones), and their parameter
    vectors go through the mechanism in one call, one independent draw per owner, from the
    generator of the group's first owner (as for :class:`NccShareKind`).
    """

    kind = LR_SHARE
    batch = 1024  # a release is one parameter vector, whatever the rows
    spec_only = True

    def _mechanism(self, spec: LrShareTask) -> Mechanism:
        return mechanism_of(spec.mechanism, spec.epsilon, lr_parameter_count(spec.bounds.d, spec.n_classes))

    def validate(self, task: Task, spec: LrShareTask, view: PublicView) -> Cached | None:
        check_schema(spec.bounds, view)
        check_classes(spec.n_classes, view)
        check_positive(spec.param_bound, name="param_bound")
        check_limit("param_bound", spec.param_bound)
        check_positive(spec.c, name="c")
        check_limit("C", spec.c)
        self._mechanism(spec)
        return None

    def compute(self, task: Task, spec: LrShareTask, owner: LocalOwner) -> LrShareReply:
        theta = fit_local_logistic(owner.X, owner.y, bounds=spec.bounds, n_classes=spec.n_classes, C=spec.c)
        reports = lr_share(theta, param_bound=spec.param_bound, mechanism=self._mechanism(spec), rng=owner.rng)
        return LrShareReply(reports=np.asarray(reports).reshape(1, -1))

    def compute_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        out: list[Release] = [LrShareReply(np.empty((0, 0)))] * len(tasks)
        for group in same_release(tasks, owners, lambda t, o: (spec_key(spec_of(t, LrShareTask)), work_rows(o.n_rows))):
            spec = spec_of(tasks[group[0]], LrShareTask)
            rows = [owners[i] for i in group]
            cell = work_rows(rows[0].n_rows)
            X = np.stack([pad_rows(o.X, cell) for o in rows])
            y = np.stack([pad_rows(o.y, cell, axis=-1) for o in rows])
            theta = fit_local_logistic_many(
                X, y, bounds=spec.bounds, n_classes=spec.n_classes, C=spec.c, n_rows=[o.n_rows for o in rows]
            )
            reports = lr_share(theta, param_bound=spec.param_bound, mechanism=self._mechanism(spec), rng=rows[0].rng)
            for j, i in enumerate(group):
                out[i] = LrShareReply(reports=reports[j : j + 1])
        return out

    def fallback(self, spec: LrShareTask, public: PublicConfig, n_rows: int, rng: np.random.Generator) -> LrShareReply:
        mechanism = self._mechanism(spec)
        reports = lr_share(np.zeros(mechanism.d), param_bound=spec.param_bound, mechanism=mechanism, rng=rng)
        return LrShareReply(reports=np.asarray(reports).reshape(1, -1))

    def fallback_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        out: list[Release] = [LrShareReply(np.empty((0, 0)))] * len(tasks)
        for group in same_release(tasks, owners, lambda t, o: spec_key(spec_of(t, LrShareTask))):
            spec = spec_of(tasks[group[0]], LrShareTask)
            mechanism = self._mechanism(spec)
            zeros = np.zeros((len(group), mechanism.d))
            reports = lr_share(zeros, param_bound=spec.param_bound, mechanism=mechanism, rng=owners[group[0]].rng)
            for j, i in enumerate(group):
                out[i] = LrShareReply(reports=reports[j : j + 1])
        return out
