"""Task kinds of FedDPDR-DPML (seed 004 Alg. 1): the DP-PCA subspace with a DP row count, and the
phase-2 classifier on projected rows.

Every privacy parameter is checked when the task is validated, by computing the noise scale it
implies (public numbers only), so a task the mechanism cannot serve is refused before anything is
debited. After the debit the release is made whatever the solver does: a DP-PCA or an SVM that
fails is replaced by its fallback, the same noise around a data-independent value (zero
second-moment matrix, zero class sums, the minimiser of the perturbed objective of an empty data
set at the public stand-in n = 1).
"""

from __future__ import annotations

import math

import numpy as np

from privfed.common.mechanisms import GeometricMechanism, noisy_count
from privfed.common.tasks import (
    PCA_SHARE,
    SVM_SHARE,
    PcaShareReply,
    PcaShareTask,
    SvmShareReply,
    SvmShareTask,
    Task,
)
from privfed.common.validation import check_positive
from privfed.owner.kinds.base import PublicView, Refused, TaskKind, check_classes, check_limit, check_schema
from privfed.owner.local import Cached, LocalOwner, PublicConfig


class PcaShareKind(TaskKind[PcaShareTask]):
    """DP-PCA (analytic Gaussian on ``X^T X``) and a two-sided geometric row count."""

    kind = PCA_SHARE

    def validate(self, task: Task, spec: PcaShareTask, view: PublicView) -> Cached | None:
        from privfed.common.feddpdr.pca import covariance_release  # lazily: scipy only for the tasks that need it

        check_schema(spec.bounds, view)
        check_positive(spec.epsilon, name="epsilon", allow_inf=True)
        if not 0 <= spec.delta < 1:
            raise Refused("invalid_task", f"delta={spec.delta!r} must be in [0, 1)")
        if not 1 <= spec.k <= spec.bounds.d:
            raise Refused("invalid_task", f"k={spec.k} must be in [1, {spec.bounds.d}]")
        covariance_release(spec.epsilon, spec.delta)  # its ε floor and ceiling and σ bounds refuse here
        if math.isfinite(spec.count_epsilon):
            GeometricMechanism(epsilon=spec.count_epsilon)
        return None

    def compute(self, task: Task, spec: PcaShareTask, owner: LocalOwner) -> PcaShareReply:
        from privfed.common.feddpdr.pca import owner_pca_release

        U, n = owner_pca_release(
            owner.X, spec.bounds, spec.k, spec.epsilon, spec.delta, owner.rng, scaling=spec.scaling
        )
        return PcaShareReply(subspace=U, noisy_count=noisy_count(n, epsilon=spec.count_epsilon, rng=owner.rng))

    def fallback(
        self, spec: PcaShareTask, public: PublicConfig, n_rows: int, rng: np.random.Generator
    ) -> PcaShareReply:
        """The same release of no rows (the Gaussian mechanism on a zero covariance, a count of 0), drawn by
        the same code as :meth:`compute`, so a fallback's outputs range over what a release's do."""
        from privfed.common.feddpdr.pca import owner_pca_release

        empty = np.zeros((0, public.n_features))
        U, n = owner_pca_release(empty, spec.bounds, spec.k, spec.epsilon, spec.delta, rng, scaling=spec.scaling)
        return PcaShareReply(subspace=U, noisy_count=noisy_count(n, epsilon=spec.count_epsilon, rng=rng))


class SvmShareKind(TaskKind[SvmShareTask]):
    """The phase-2 classifier (:data:`privfed.common.feddpdr.choices.SVM_MODELS`) on projected rows."""

    kind = SVM_SHARE

    def validate(self, task: Task, spec: SvmShareTask, view: PublicView) -> Cached | None:
        from privfed.common.feddpdr.release import check_svm_release

        check_schema(spec.bounds, view)
        check_classes(spec.n_classes, view)
        check_positive(spec.epsilon, name="epsilon", allow_inf=True)
        check_positive(spec.lam, name="lam")
        check_limit("lam", spec.lam)
        check_limit("svm_rows", spec.rows)
        check_svm_release(spec.model, spec.epsilon, spec.delta, spec.n_classes)  # every mechanism's public range
        U, d = spec.subspace, spec.bounds.d
        if U is not None and (
            U.ndim != 2
            or U.shape[0] != d
            or U.shape[1] < 1
            or not np.all(np.isfinite(U))
            or not np.allclose(U.T @ U, np.eye(U.shape[1]), atol=1e-8)
        ):
            raise Refused("invalid_task", f"subspace of shape {U.shape} must be ({d}, k) with orthonormal columns")
        return None

    def compute(self, task: Task, spec: SvmShareTask, owner: LocalOwner) -> SvmShareReply:
        from privfed.common.feddpdr.release import owner_svm_release

        W, _, _ = owner_svm_release(
            owner.X,
            owner.y,
            spec.bounds,
            spec.subspace,
            spec.n_classes,
            spec.epsilon,
            spec.lam,
            owner.rng,
            delta=spec.delta,
            model=spec.model,
            scaling=spec.scaling,
            rows=spec.rows,
        )
        return SvmShareReply(coef=W)

    def fallback(
        self, spec: SvmShareTask, public: PublicConfig, n_rows: int, rng: np.random.Generator
    ) -> SvmShareReply:
        """The same release of no rows: zero class sums plus their noise (``centroid``), else the minimiser
        of the perturbed objective of no data, drawn by the same code as :meth:`compute` (the solvers are
        total on an empty set), so a fallback's outputs range over what a release's do."""
        from privfed.common.feddpdr.release import owner_svm_release

        W, _, _ = owner_svm_release(
            np.zeros((0, public.n_features)),
            np.zeros(0, dtype=np.int64),
            spec.bounds,
            spec.subspace,
            spec.n_classes,
            spec.epsilon,
            spec.lam,
            rng,
            delta=spec.delta,
            model=spec.model,
            scaling=spec.scaling,
            rows=spec.rows,
        )
        return SvmShareReply(coef=W)
