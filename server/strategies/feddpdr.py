"""FedDPDR-DPML (seed 004 Alg. 1): DP-PCA round, then the objective-perturbed SVM round."""

from __future__ import annotations

import math
from dataclasses import dataclass

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RoundFailed
from privfed.common.feddpdr.subspace import aggregate_subspaces, owner_weights, weighted_average
from privfed.common.feddpdr.svm import FedDPDRModel, ovr_epsilons
from privfed.common.messages import PcaShareReply, PcaShareTask, SvmShareReply, SvmShareTask
from privfed.server.strategies.base import Transport, new_tasks


@dataclass
class FedDpdrStrategy:
    """FedDPDR-DPML (seed 004 Alg. 1): phase 1 DP-PCA subspaces aggregated by the weighted
    projector average (SPEC §9); phase 2 objective-perturbed one-vs-rest Huber SVMs on rows
    projected onto the broadcast U_global, averaged with the same weights.

    Budget: ε₁ = ε₂ = ε/2 (the paper's split, §5.2). Within ε₁, a share ``count_fraction``
    (5 % by default) pays for each owner's row count through the two-sided geometric mechanism
    and the rest, ``(1 - count_fraction) ε/2`` with δ, for DP-PCA. The weights ``n_i / Σn`` of
    both phases use these noisy counts, clipped to ≥ 1 (post-processing): the count is released
    once, in phase 1, and reused for phase 2, and the exact ``n_i`` never leaves an owner
    (issue 9, contract 7). Phase 2 goes only to owners whose count was received. At ε = ∞ every
    part is exact (the non-private reference).

    Owners scale rows with :data:`privfed.common.feddpdr.pca.DEFAULT_ROW_SCALING` (each row by its own norm
    after the public bounds) and the model applies the same map. Phase 2 is the seed's one-vs-rest
    Huber SVM (pure ε, ε₂/K per class) because ``SvmShareTask`` carries no δ to debit; the one-budget
    multiclass mechanism (``fit_dp_softmax``, issue 13) needs ``SvmShareTask.delta`` and a ``model``
    field passed to ``owner_svm_release(..., delta=, model="softmax")`` first.
    """

    epsilon: float
    n_classes: int
    bounds: Bounds
    k: int = 20
    delta: float = 1e-5
    lam: float = 0.01
    count_fraction: float = 0.05

    def __post_init__(self):
        if not 1 <= self.k <= self.bounds.d:
            raise ConfigError(f"k must be in [1, d={self.bounds.d}], got {self.k}")
        if not 0 < self.count_fraction < 1:
            raise ConfigError(f"count_fraction must be in (0, 1), got {self.count_fraction}")

    def budget_split(self) -> dict[str, float]:
        """ε of each part: DP-PCA, the row count, and the SVM phase (which ``ovr_epsilons`` splits per class)."""
        half = self.epsilon / 2
        count = math.inf if math.isinf(half) else half * self.count_fraction
        pca = math.inf if math.isinf(half) else half - count
        return {"pca": pca, "count": count, "svm": half}

    def run(self, owner_ids: list[str], transport: Transport) -> FedDPDRModel:
        split = self.budget_split()
        pca = {
            r.owner_id: r.payload
            for r in transport.run_tasks(
                new_tasks(
                    owner_ids,
                    "pca",
                    PcaShareTask(
                        epsilon=split["pca"],
                        delta=self.delta,
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
                        epsilon=split["svm"], lam=self.lam, n_classes=self.n_classes, bounds=self.bounds, subspace=U
                    ),
                )
            )
            if isinstance(r.payload, SvmShareReply)
        }
        if not svm:
            raise RoundFailed("no owner released an SVM")
        coef = weighted_average([p.coef for p in svm.values()], owner_weights([counts[o] for o in svm]))
        return FedDPDRModel(
            bounds=self.bounds,
            components=U,
            coef=coef,
            eigenvalues=eigenvalues,
            owner_sizes=tuple(counts[o] for o in svm),
            per_class_epsilon=ovr_epsilons(split["svm"], self.n_classes),
        )
