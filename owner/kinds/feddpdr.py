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

from privfed.common.mechanisms import GeometricMechanism
from privfed.common.messages import PcaShareReply, PcaShareTask, SvmShareReply, SvmShareTask, Task
from privfed.common.validation import check_positive
from privfed.owner.kinds.base import PublicView, Refused, TaskKind, check_classes, check_limit, check_schema
from privfed.owner.local import Cached, LocalOwner, PublicConfig


def _noisy_count(n: int, count_epsilon: float, rng: np.random.Generator) -> int:
    if math.isinf(count_epsilon):
        return n
    return int(GeometricMechanism(epsilon=count_epsilon).privatize(np.int64(n), rng))


class PcaShareKind(TaskKind[PcaShareTask]):
    """DP-PCA (analytic Gaussian on ``X^T X``) and a two-sided geometric row count."""

    name = "pca_share"
    spec_type = PcaShareTask

    def validate(self, task: Task, spec: PcaShareTask, view: PublicView) -> Cached | None:
        from privfed.common.feddpdr.pca import gaussian_sigma  # lazily: scipy only for the tasks that need it

        check_schema(spec.bounds, view)
        check_positive(spec.epsilon, name="epsilon", allow_inf=True)
        if not 0 <= spec.delta < 1:
            raise Refused("invalid_task", f"delta={spec.delta!r} must be in [0, 1)")
        if not 1 <= spec.k <= spec.bounds.d:
            raise Refused("invalid_task", f"k={spec.k} must be in [1, {spec.bounds.d}]")
        gaussian_sigma(spec.epsilon, spec.delta)
        if math.isfinite(spec.count_epsilon):
            GeometricMechanism(epsilon=spec.count_epsilon)
        return None

    def compute(self, task: Task, spec: PcaShareTask, owner: LocalOwner) -> PcaShareReply:
        from privfed.common.feddpdr.pca import owner_pca_release

        U, n = owner_pca_release(
            owner.X, spec.bounds, spec.k, spec.epsilon, spec.delta, owner.rng, scaling=spec.scaling
        )
        return PcaShareReply(subspace=U, noisy_count=_noisy_count(n, spec.count_epsilon, owner.rng))

    def fallback(
        self, spec: PcaShareTask, public: PublicConfig, n_rows: int, rng: np.random.Generator
    ) -> PcaShareReply:
        from privfed.common.feddpdr.pca import gaussian_sigma, symmetric_gaussian_noise, top_k_eigenvectors

        d = public.n_features
        C = symmetric_gaussian_noise(d, gaussian_sigma(spec.epsilon, spec.delta), rng)
        U, _ = top_k_eigenvectors(C, spec.k)
        return PcaShareReply(subspace=U, noisy_count=_noisy_count(0, spec.count_epsilon, rng))


class SvmShareKind(TaskKind[SvmShareTask]):
    """The phase-2 classifier (:data:`privfed.common.feddpdr.choices.SVM_MODELS`) on projected rows."""

    name = "svm_share"
    spec_type = SvmShareTask

    def validate(self, task: Task, spec: SvmShareTask, view: PublicView) -> Cached | None:
        from privfed.common.feddpdr.choices import DELTA_MODELS, SVM_MODELS

        check_schema(spec.bounds, view)
        check_classes(spec.n_classes, view)
        check_positive(spec.epsilon, name="epsilon", allow_inf=True)
        check_positive(spec.lam, name="lam")
        check_limit("lam", spec.lam)
        if spec.model not in SVM_MODELS:
            raise Refused("invalid_task", f"model={spec.model!r} must be one of {SVM_MODELS}")
        if spec.model in DELTA_MODELS:
            delta_ok = 0 < spec.delta < 1 or (spec.delta == 0 and math.isinf(spec.epsilon))
        else:
            delta_ok = spec.delta == 0  # pure epsilon-DP: a delta would be debited for nothing
        if not delta_ok:
            raise Refused("invalid_task", f"delta={spec.delta!r} does not fit model {spec.model!r}")
        U, d = spec.subspace, spec.bounds.d
        if U is not None and (
            U.ndim != 2
            or U.shape[0] != d
            or U.shape[1] < 1
            or not np.all(np.isfinite(U))
            or not np.allclose(U.T @ U, np.eye(U.shape[1]), atol=1e-8)
        ):
            raise Refused("invalid_task", f"subspace of shape {U.shape} must be ({d}, k) with orthonormal columns")
        self._noise(spec, view.config)
        return None

    def _noise(self, spec: SvmShareTask, public: PublicConfig) -> tuple[int, float, float]:
        """(k + 1, noise parameter, regulariser) of the fallback; computing them checks the privacy
        parameters: the Gaussian scale of the class sums or of the multiclass objective's noise
        (:mod:`privfed.common.feddpdr.multiclass`), or the one-vs-rest ``eps'`` (Chaudhuri et al.)."""
        from privfed.common.feddpdr.centroid import class_sums_sigma
        from privfed.common.feddpdr.choices import ovr_epsilons

        width = (public.n_features if spec.subspace is None else spec.subspace.shape[1]) + 1
        if spec.model == "centroid":
            return width, class_sums_sigma(spec.epsilon, spec.delta), 0.0
        if spec.model == "ovr-huber":
            from privfed.common.feddpdr.svm import privacy_adjustment

            eps_prime, Delta = privacy_adjustment(ovr_epsilons(spec.epsilon, spec.n_classes)[0], 1, spec.lam)
            return width, eps_prime, spec.lam + Delta
        from privfed.common.feddpdr.multiclass import noise_sigma, privacy_split

        split = privacy_split(spec.epsilon, spec.model)
        return width, noise_sigma(split["epsilon_B"], spec.delta, spec.n_classes), split["Lambda"]

    def compute(self, task: Task, spec: SvmShareTask, owner: LocalOwner) -> SvmShareReply:
        from privfed.common.feddpdr.svm import owner_svm_release

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
        )
        return SvmShareReply(coef=W)

    def fallback(
        self, spec: SvmShareTask, public: PublicConfig, n_rows: int, rng: np.random.Generator
    ) -> SvmShareReply:
        """Zero class sums plus their Gaussian noise (``centroid``); else the minimiser ``-b / reg`` of
        the perturbed objective of no data: ``b`` the mechanism's noise (Gaussian for the one-budget
        models; Chaudhuri et al.'s at the public stand-in n = 1, per one-vs-rest problem)."""
        from privfed.common.feddpdr.svm import sample_b

        width, noise, reg = self._noise(spec, public)
        K = spec.n_classes
        if spec.model != "ovr-huber":
            B = rng.normal(0.0, noise, size=(K, width)) if noise > 0 else np.zeros((K, width))
            return SvmShareReply(coef=B if spec.model == "centroid" else -B / reg)
        F = -sample_b(width, noise, rng, size=1 if K == 2 else K) / reg
        return SvmShareReply(coef=np.vstack([-F[0], F[0]]) if K == 2 else F)
