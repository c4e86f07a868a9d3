"""FedDPDR-DPML (seed 004 Alg. 1): DP-PCA round, then the objective-perturbed SVM round."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RoundFailed
from privfed.common.feddpdr.subspace import aggregate_subspaces, owner_weights
from privfed.common.feddpdr.svm import (
    DEFAULT_SVM_MODEL,
    DELTA_MODELS,
    SVM_MODELS,
    FedDPDRModel,
    aggregate_classifier,
    ovr_epsilons,
)
from privfed.common.messages import PcaShareReply, PcaShareTask, SvmShareReply, SvmShareTask
from privfed.server.strategies.base import Transport, new_tasks


@dataclass
class FedDpdrStrategy:
    """FedDPDR-DPML (seed 004 Alg. 1): phase 1 DP-PCA subspaces aggregated by the weighted
    projector average (SPEC §9); phase 2 the classifier ``model`` on rows projected onto the
    broadcast U_global (:data:`privfed.common.feddpdr.svm.SVM_MODELS`), combined by
    :func:`privfed.common.feddpdr.svm.aggregate_classifier`.

    Budget: ε₁ = ε₂ = ε/2 (the paper's split, §5.2). Within ε₁, a share ``count_fraction``
    (5 % by default) pays for each owner's row count through the two-sided geometric mechanism
    and the rest, ``(1 - count_fraction) ε/2``, for DP-PCA. δ: with a model of
    :data:`~privfed.common.feddpdr.svm.DELTA_MODELS` (the default ``centroid``: DP class sums, one
    Gaussian release for all K classes, summed by the coordinator) DP-PCA and the classifier get
    δ/2 each, so every owner spends at most (ε, δ); with ``ovr-huber`` (the seed's one-vs-rest
    Huber SVMs, pure ε₂/K per class) DP-PCA gets all of δ. The weights ``n_i / Σn`` use the noisy
    counts, clipped to ≥ 1 (post-processing): the count is released once, in phase 1, and reused
    for phase 2, and the exact ``n_i`` never leaves an owner (issue 9, contract 7). Phase 2 goes
    only to owners whose count was received. At ε = ∞ every part is exact (the non-private reference).

    Owners scale rows with :data:`privfed.common.feddpdr.pca.DEFAULT_ROW_SCALING` and the model
    applies the same map.
    """

    epsilon: float
    n_classes: int
    bounds: Bounds
    k: int = 20
    delta: float = 1e-5
    lam: float = 0.01
    count_fraction: float = 0.05
    model: str = DEFAULT_SVM_MODEL

    def __post_init__(self):
        if not 1 <= self.k <= self.bounds.d:
            raise ConfigError(f"k must be in [1, d={self.bounds.d}], got {self.k}")
        if not 0 < self.count_fraction < 1:
            raise ConfigError(f"count_fraction must be in (0, 1), got {self.count_fraction}")
        if self.model not in SVM_MODELS:
            raise ConfigError(f"model must be one of {SVM_MODELS}, got {self.model!r}")

    def budget_split(self) -> dict[str, float]:
        """ε of each part: DP-PCA, the row count, and the classifier phase."""
        half = self.epsilon / 2
        count = math.inf if math.isinf(half) else half * self.count_fraction
        pca = math.inf if math.isinf(half) else half - count
        return {"pca": pca, "count": count, "svm": half}

    def delta_split(self) -> dict[str, float]:
        """δ of DP-PCA and of the classifier phase; they add up to ``delta``."""
        svm = self.delta / 2 if self.model in DELTA_MODELS else 0.0
        return {"pca": self.delta - svm, "svm": svm}

    def run(self, owner_ids: list[str], transport: Transport) -> FedDPDRModel:
        split, deltas = self.budget_split(), self.delta_split()
        pca = {
            r.owner_id: r.payload
            for r in transport.run_tasks(
                new_tasks(
                    owner_ids,
                    "pca",
                    PcaShareTask(
                        epsilon=split["pca"],
                        delta=deltas["pca"],
                        k=self.k,
                        bounds=self.bounds,
                        count_epsilon=split["count"],
                    ),
                )
            )
            if isinstance(r.payload, PcaShareReply)
        }
        if not pca:
            raise RoundFailed("no owner released a DP-PCA subspace")
        counts = {o: max(1, int(p.noisy_count)) for o, p in pca.items()}
        U, eigenvalues = aggregate_subspaces(
            [p.subspace for p in pca.values()], owner_weights([counts[o] for o in pca])
        )
        svm = {
            r.owner_id: r.payload
            for r in transport.run_tasks(
                new_tasks(
                    [o for o in owner_ids if o in pca],
                    "svm",
                    SvmShareTask(
                        epsilon=split["svm"],
                        lam=self.lam,
                        n_classes=self.n_classes,
                        bounds=self.bounds,
                        subspace=U,
                        delta=deltas["svm"],
                        model=self.model,
                    ),
                )
            )
            if isinstance(r.payload, SvmShareReply)
        }
        if not svm:
            raise RoundFailed("no owner released an SVM")
        coef = aggregate_classifier(
            [p.coef for p in svm.values()],
            owner_weights([counts[o] for o in svm]),
            model=self.model,
            epsilon=split["svm"],
            delta=deltas["svm"],
        )
        per_problem = ovr_epsilons(split["svm"], self.n_classes) if self.model == "ovr-huber" else [split["svm"]]
        return FedDPDRModel(
            bounds=self.bounds,
            components=U,
            coef=coef,
            eigenvalues=eigenvalues,
            owner_sizes=tuple(counts[o] for o in svm),
            per_class_epsilon=np.asarray(per_problem, dtype=np.float64),
        )
