"""Round logic as objects (STYLE rule 12): build tasks, aggregate replies.

A strategy never sends anything: :class:`~privfed.server.dispatcher.Dispatcher` does. The
aggregation calls the same ``privfed.common.learners`` functions an in-process simulation uses.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RoundFailed
from privfed.common.learners.logistic import lr_aggregate
from privfed.common.learners.ncc import NccShare, ncc_centroids, split_label_budget, NearestCentroidModel
from privfed.common.mechanisms import KaryRandomizedResponse, MECHANISMS
from privfed.common.dpsvm import FedDPDRModel, ovr_epsilons
from privfed.common.messages import (
    LrShareReply, LrShareTask, NccShareReply, NccShareTask, PcaShareReply, PcaShareTask, Refusal, Result,
    SvmShareReply, SvmShareTask, Task,
)
from privfed.common.subspace import aggregate_subspaces, owner_weights, weighted_average
from privfed.server.config import JobConfig



def _new_tasks(owner_ids, round_id, spec) -> list[Task]:
    return [Task(task_id=f"{round_id}-{secrets.token_hex(6)}", owner_id=o, round_id=round_id, spec=spec)
            for o in owner_ids]


def _shares(results: list[Result], kind) -> list:
    return [r.payload for r in results if isinstance(r.payload, kind)]


class SingleRound:
    """A strategy whose job is one round: every owner releases once, then aggregate."""

    def run(self, owner_ids, execute):
        return self.aggregate(execute(self.configure(owner_ids, "r1")))


@dataclass
class NccStrategy(SingleRound):
    """Nearest centroid from perturbed samples (seed 002 §3.5.1): every owner releases its
    rows once; the coordinator averages them per (reported) class."""

    mechanism: str
    epsilon: float
    n_classes: int
    bounds: Bounds
    labels: str = "rr"      # private by default; "clear" is answered only by owners that opted in (contract 6)
    label_fraction: float = 0.2

    def __post_init__(self):
        if self.mechanism not in MECHANISMS:
            raise ConfigError(f"mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")
        self.eps_features, self.eps_labels = split_label_budget(self.epsilon, self.labels, self.label_fraction)

    def configure(self, owner_ids, round_id: str) -> list[Task]:
        spec = NccShareTask(mechanism=self.mechanism, epsilon=self.eps_features, labels=self.labels,
                            label_epsilon=self.eps_labels, n_classes=self.n_classes, bounds=self.bounds)
        return _new_tasks(owner_ids, round_id, spec)

    def aggregate(self, results: list[Result]) -> NearestCentroidModel:
        replies = _shares(results, NccShareReply)
        if not replies:
            raise RoundFailed("no owner released a share: cannot fit nearest centroids")
        shares = [NccShare(reports=r.reports, labels=r.labels) for r in replies]
        label_rr = (KaryRandomizedResponse(epsilon=self.eps_labels, n_classes=self.n_classes)
                    if self.labels == "rr" and np.isfinite(self.eps_labels) else None)
        centroids = ncc_centroids(shares, n_classes=self.n_classes, bounds=self.bounds, label_rr=label_rr)
        return NearestCentroidModel(centroids, np.arange(self.n_classes))


@dataclass
class LrStrategy(SingleRound):
    """Logistic regression from perturbed local models (seed 002 §3.5.2): every owner fits an
    L2-regularised model, clips it to ``param_bound`` and perturbs it; the coordinator averages."""

    mechanism: str
    epsilon: float
    n_classes: int
    bounds: Bounds
    param_bound: float = 4.0
    c: float = 1.0

    def __post_init__(self):
        if self.mechanism not in MECHANISMS:
            raise ConfigError(f"mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")

    def configure(self, owner_ids, round_id: str) -> list[Task]:
        spec = LrShareTask(mechanism=self.mechanism, epsilon=self.epsilon, param_bound=self.param_bound,
                           c=self.c, n_classes=self.n_classes, bounds=self.bounds)
        return _new_tasks(owner_ids, round_id, spec)

    def aggregate(self, results: list[Result]):
        replies = _shares(results, LrShareReply)
        if not replies:
            raise RoundFailed("no owner released a share: cannot fit logistic regression")
        reports = np.concatenate([r.reports.reshape(1, -1) for r in replies])
        return lr_aggregate(reports, param_bound=self.param_bound, n_classes=self.n_classes, bounds=self.bounds)


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

    Owners scale rows with :data:`privfed.common.dppca.DEFAULT_ROW_SCALING` (each row by its own norm
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

    def run(self, owner_ids, execute):
        split = self.budget_split()
        pca = {r.owner_id: r.payload for r in execute(_new_tasks(owner_ids, "pca", PcaShareTask(
            epsilon=split["pca"], delta=self.delta, k=self.k, bounds=self.bounds, count_epsilon=split["count"])))
            if isinstance(r.payload, PcaShareReply)}
        if not pca:
            raise ConfigError("no owner released a DP-PCA subspace")
        counts = {o: max(1, int(p.noisy_count)) for o, p in pca.items()}
        U, eigenvalues = aggregate_subspaces([p.subspace for p in pca.values()],
                                             owner_weights([counts[o] for o in pca]))
        svm = {r.owner_id: r.payload for r in execute(_new_tasks([o for o in owner_ids if o in pca], "svm", SvmShareTask(
            epsilon=split["svm"], lam=self.lam, n_classes=self.n_classes, bounds=self.bounds, subspace=U)))
            if isinstance(r.payload, SvmShareReply)}
        if not svm:
            raise ConfigError("no owner released an SVM")
        coef = weighted_average([p.coef for p in svm.values()], owner_weights([counts[o] for o in svm]))
        return FedDPDRModel(bounds=self.bounds, components=U, coef=coef, eigenvalues=eigenvalues,
                            owner_sizes=tuple(counts[o] for o in svm),
                            per_class_epsilon=ovr_epsilons(split["svm"], self.n_classes))


def refusals(results: list[Result]) -> dict[str, str]:
    """owner_id -> refusal message, for the report."""
    return {r.owner_id: f"{r.payload.code}: {r.payload.message}" for r in results if isinstance(r.payload, Refusal)}


def make_strategy(config: JobConfig | str, /, *, n_classes: int, bounds: Bounds, **options):
    """Build the round logic of ``config.task`` for a federation with this public schema.

    Parameters
    ----------
    config : JobConfig or str
        The job; a task name is shorthand for ``JobConfig(task=config, **options)`` (options left
        out or None keep :class:`JobConfig`'s defaults), as tests and benchmarks use it.
    n_classes, bounds : int, Bounds
        The data set's public number of classes and feature bounds.

    Boosting gets :attr:`JobConfig.share_weight_bound` as its share weight bound, and a group
    sampler seeded by ``config.seed`` (group sampling is public: it needs no secrecy).
    """
    if isinstance(config, str):
        config = JobConfig(task=config, **{k: v for k, v in options.items() if v is not None})
    elif options:
        raise TypeError(f"make_strategy(JobConfig, ...) takes only n_classes and bounds, got {sorted(options)}")
    if config.task == "ncc":
        return NccStrategy(mechanism=config.mechanism, epsilon=config.epsilon, n_classes=n_classes, bounds=bounds,
                           labels=config.labels, label_fraction=config.label_fraction)
    if config.task == "lr":
        return LrStrategy(mechanism=config.mechanism, epsilon=config.epsilon, n_classes=n_classes, bounds=bounds,
                          param_bound=config.param_bound, c=config.c)
    if config.task == "feddpdr":
        return FedDpdrStrategy(epsilon=config.epsilon, n_classes=n_classes, bounds=bounds, k=config.k,
                               delta=config.delta, lam=config.lam)
    from privfed.common.boosting import FederatedBoosting
    from privfed.server.boosting import BoostingStrategy

    booster = FederatedBoosting(
        base=config.base, epsilon=config.epsilon, mechanism=config.mechanism, n_classes=n_classes, bounds=bounds,
        n_rounds=config.n_rounds, group_size=config.group_size, n_bins=config.n_bins,
        weight_bound=config.share_weight_bound, labels=config.labels, label_fraction=config.label_fraction,
        C=config.c, param_bound=config.param_bound, eval_fraction=config.eval_fraction,
        eval_row_bound=config.eval_row_bound, max_owner_rows=config.max_owner_rows)
    rng = np.random.Generator(np.random.PCG64(config.seed))
    return BoostingStrategy(booster, rng, ring_timeout=config.ring_timeout)
