"""Task kinds of the LDP models (seed 002 §3.5): nearest-centroid rows and a local logistic model.

Both are ε-LDP releases of values clipped to the public bounds, so any input in the mechanism's
domain -- the rows, or the data-independent fallback (the bounds' midpoint, class 0, zero
parameters) -- gives the guarantee.
"""

from __future__ import annotations

import math

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.learners.logistic import fit_local_logistic, lr_share
from privfed.common.learners.ncc import ncc_share
from privfed.common.mechanisms import KaryRandomizedResponse, make_mechanism
from privfed.common.mechanisms.base import Mechanism
from privfed.common.tasks import LR_SHARE, NCC_SHARE, LrShareReply, LrShareTask, NccShareReply, NccShareTask, Task
from privfed.common.validation import check_positive
from privfed.owner.kinds.base import PublicView, TaskKind, check_classes, check_limit, check_schema
from privfed.owner.local import Cached, LocalOwner, PublicConfig


def lr_parameter_count(d: int, n_classes: int) -> int:
    """Length of an owner's logistic-regression parameter vector: ``(d + 1)`` per binary problem,
    one problem for two classes, ``K`` one-vs-rest problems otherwise."""
    return (d + 1) * (1 if n_classes == 2 else n_classes)


def midpoint_rows(bounds: Bounds, n_rows: int) -> np.ndarray:
    """``n_rows`` copies of the bounds' midpoint: the data-independent rows of a fallback release."""
    return np.tile((bounds.lo + bounds.hi) / 2.0, (max(n_rows, 1), 1))


class NccShareKind(TaskKind[NccShareTask]):
    """Every row once through an ε-LDP mechanism, labels by k-RR (or clear, by opt-in)."""

    kind = NCC_SHARE

    def releases_clear_labels(self, spec: NccShareTask) -> bool:
        return spec.labels == "clear"

    def _mechanisms(self, spec: NccShareTask) -> tuple[Mechanism, KaryRandomizedResponse | None]:
        mechanism = make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=spec.bounds.d)
        if spec.labels == "rr" and math.isfinite(spec.label_epsilon):
            return mechanism, KaryRandomizedResponse(epsilon=spec.label_epsilon, n_classes=spec.n_classes)
        if spec.labels == "rr":
            check_positive(spec.label_epsilon, name="label_epsilon", allow_inf=True)
        return mechanism, None

    def validate(self, task: Task, spec: NccShareTask, view: PublicView) -> Cached | None:
        check_schema(spec.bounds, view)
        check_classes(spec.n_classes, view)
        self._mechanisms(spec)
        return None

    def compute(self, task: Task, spec: NccShareTask, owner: LocalOwner) -> NccShareReply:
        mechanism, label_rr = self._mechanisms(spec)
        share = ncc_share(owner.X, owner.y, bounds=spec.bounds, mechanism=mechanism, label_rr=label_rr, rng=owner.rng)
        return NccShareReply(reports=share.reports, labels=share.labels)

    def fallback(
        self, spec: NccShareTask, public: PublicConfig, n_rows: int, rng: np.random.Generator
    ) -> NccShareReply:
        mechanism, label_rr = self._mechanisms(spec)
        rows = midpoint_rows(public.bounds, n_rows)
        share = ncc_share(
            rows,
            np.zeros(rows.shape[0], dtype=np.int64),
            bounds=public.bounds,
            mechanism=mechanism,
            label_rr=label_rr,
            rng=rng,
        )
        return NccShareReply(reports=share.reports, labels=share.labels)


class LrShareKind(TaskKind[LrShareTask]):
    """A local logistic model, clipped to the public parameter bound, through an ε-LDP mechanism."""

    kind = LR_SHARE

    def _mechanism(self, spec: LrShareTask) -> Mechanism:
        return make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=lr_parameter_count(spec.bounds.d, spec.n_classes))

    def validate(self, task: Task, spec: LrShareTask, view: PublicView) -> Cached | None:
        check_schema(spec.bounds, view)
        check_classes(spec.n_classes, view)
        check_positive(spec.param_bound, name="param_bound")
        check_limit("param_bound", spec.param_bound)
        check_positive(spec.c, name="c")
        self._mechanism(spec)
        return None

    def compute(self, task: Task, spec: LrShareTask, owner: LocalOwner) -> LrShareReply:
        theta = fit_local_logistic(owner.X, owner.y, bounds=spec.bounds, n_classes=spec.n_classes, C=spec.c)
        reports = lr_share(theta, param_bound=spec.param_bound, mechanism=self._mechanism(spec), rng=owner.rng)
        return LrShareReply(reports=np.asarray(reports).reshape(1, -1))

    def fallback(self, spec: LrShareTask, public: PublicConfig, n_rows: int, rng: np.random.Generator) -> LrShareReply:
        mechanism = self._mechanism(spec)
        reports = lr_share(np.zeros(mechanism.d), param_bound=spec.param_bound, mechanism=mechanism, rng=rng)
        return LrShareReply(reports=np.asarray(reports).reshape(1, -1))
