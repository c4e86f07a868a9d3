"""FedDPDR-DPML (seed 004 Alg. 1): DP-PCA round, then the objective-perturbed SVM round."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RoundFailed
from privfed.common.feddpdr.basis import BASES, PUBLIC_BASES, public_basis
from privfed.common.feddpdr.choices import (
    DEFAULT_ROW_SCALING,
    DEFAULT_SVM_MODEL,
    DELTA_MODELS,
    ROW_SCALINGS,
    SVM_MODELS,
    ovr_epsilons,
)
from privfed.common.feddpdr.model import ClassifierSum, FedDPDRModel, delta_split
from privfed.common.feddpdr.subspace import ProjectorSum
from privfed.common.tasks import PcaShareReply, PcaShareTask, Result, SvmShareReply, SvmShareTask
from privfed.common.validation import check_choice, check_fraction, check_int
from privfed.server.strategies.base import Transport, new_tasks, refusal_codes
from privfed.server.strategies.result import PrivacySplit, RoundReport, StrategyResult


@dataclass
class FedDpdrStrategy:
    """FedDPDR-DPML (seed 004 Alg. 1): phase 1 DP-PCA subspaces aggregated by the weighted
    projector average (SPEC §9); phase 2 the classifier ``model`` on rows projected onto the
    broadcast U_global (:data:`privfed.common.feddpdr.choices.SVM_MODELS`), combined by
    :func:`privfed.common.feddpdr.model.aggregate_classifier`, each phase's replies folded into running
    sums as they come (:class:`~privfed.common.feddpdr.subspace.ProjectorSum`,
    :class:`~privfed.common.feddpdr.model.ClassifierSum`; issue 27). This is the only FedDPDR loop: the
    networked job runs it over gRPC, the experiments over the in-process transport.

    Budget with ``basis="dp-pca"`` (the paper's, the default): ε₁ = ε₂ = ε/2 (§5.2). Within ε₁, a
    share ``count_fraction`` (5 % by default) pays for each owner's row count through the two-sided
    geometric mechanism and the rest, ``(1 - count_fraction) ε/2``, for DP-PCA. δ is split by
    :func:`privfed.common.feddpdr.model.delta_split`: with a model of
    :data:`~privfed.common.feddpdr.choices.DELTA_MODELS` (one (ε, δ) release for all K classes) DP-PCA
    and the classifier get δ/2 each, so every owner spends at most (ε, δ); with ``ovr-huber`` (the
    seed's one-vs-rest Huber SVMs, pure ε₂/K per class) DP-PCA gets all of δ. The weights ``n_i / Σn`` use the noisy
    counts, clipped to ≥ 1 (post-processing): the count is released once, in phase 1, and reused
    for phase 2, and the exact ``n_i`` never leaves an owner (issue 9, contract 7). Phase 2 goes
    only to owners whose count was received. At ε = ∞ every part is exact (the non-private reference).

    With a public basis (``basis="dct"`` or ``"identity"``, :mod:`privfed.common.feddpdr.basis`) there is
    no phase 1: the coordinator computes the basis itself (it reads no row), sends it with the
    phase-2 task, and the classifier gets all of (ε, δ). No count is released, so models that are
    averaged get equal weights; class sums need none (they are summed).

    Owners scale rows with ``scaling`` (:data:`privfed.common.feddpdr.choices.ROW_SCALINGS`), named in
    every task, and the model applies the same map.
    """

    epsilon: float
    n_classes: int
    bounds: Bounds
    k: int = 20
    delta: float = 1e-5
    lam: float = 0.01
    count_fraction: float = 0.05
    model: str = DEFAULT_SVM_MODEL
    basis: str = "dp-pca"
    scaling: str = DEFAULT_ROW_SCALING

    def __post_init__(self) -> None:
        check_int(self.k, name="k", minimum=1, maximum=self.bounds.d)
        check_fraction(self.count_fraction, name="count_fraction")
        check_choice(self.model, name="model", allowed=SVM_MODELS)
        check_choice(self.basis, name="basis", allowed=BASES)
        check_choice(self.scaling, name="scaling", allowed=ROW_SCALINGS)
        if self.model in DELTA_MODELS and math.isfinite(self.epsilon) and not 0 < self.delta < 1:
            raise ConfigError(
                f"model {self.model!r} is (epsilon, delta)-DP: delta must be in (0, 1), got {self.delta!r}"
            )
        if self.basis in PUBLIC_BASES:
            public_basis(self.basis, self.bounds.d, self.k)  # refuses a k the basis cannot have

    def budget_split(self) -> dict[str, float]:
        """ε of each part: DP-PCA, the row count, and the classifier phase."""
        if self.basis in PUBLIC_BASES:
            return {"pca": 0.0, "count": 0.0, "svm": self.epsilon}
        half = self.epsilon / 2
        count = math.inf if math.isinf(half) else half * self.count_fraction
        pca = math.inf if math.isinf(half) else half - count
        return {"pca": pca, "count": count, "svm": half}

    def delta_split(self) -> dict[str, float]:
        """δ of DP-PCA and of the classifier phase; they add up to at most ``delta``."""
        pca, svm = delta_split(self.delta, basis=self.basis, model=self.model)
        return {"pca": pca, "svm": svm}

    def _pca_task(self) -> PcaShareTask:
        split, deltas = self.budget_split(), self.delta_split()
        return PcaShareTask(
            epsilon=split["pca"],
            delta=deltas["pca"],
            k=self.k,
            bounds=self.bounds,
            count_epsilon=split["count"],
            scaling=self.scaling,
        )

    def _svm_task(self, subspace: np.ndarray | None, rows: int = 1) -> SvmShareTask:
        """Phase 2's task; ``rows``: the owner's DP count from phase 1 (``ovr-huber``'s public row count)."""
        return SvmShareTask(
            epsilon=self.budget_split()["svm"],
            lam=self.lam,
            n_classes=self.n_classes,
            bounds=self.bounds,
            subspace=subspace,
            delta=self.delta_split()["svm"],
            model=self.model,
            scaling=self.scaling,
            rows=rows,
        )

    def privacy(self) -> PrivacySplit:
        """Phase 1 (DP-PCA and the row count; none with a public basis), then the phase-2 classifier."""
        phases = [] if self.basis in PUBLIC_BASES else [(self._pca_task().ledger_entries(), 1)]
        return PrivacySplit.from_entries([*phases, (self._svm_task(None).ledger_entries(), 1)])

    def check_feasible(self, n_owners: int) -> None:
        """Any number of owners can release once per phase."""

    def _phase1(
        self, owner_ids: list[str], transport: Transport, rounds: list[RoundReport], refused: dict[str, str]
    ) -> tuple[np.ndarray | None, np.ndarray, dict[str, int]]:
        """(U_global, eigenvalues, noisy counts by owner): DP-PCA over the federation, or the public basis."""
        if self.basis in PUBLIC_BASES:
            return public_basis(self.basis, self.bounds.d, self.k), np.zeros(0), {o: 1 for o in owner_ids}
        t0 = time.perf_counter()
        projectors = ProjectorSum(self.bounds.d, self.k)
        counts: dict[str, int] = {}  # owner -> its noisy count, clipped to >= 1 (phase 2's weights)

        def fold(results: list[Result]) -> None:
            refused.update(refusal_codes(results))
            pca = [(r.owner_id, r.payload) for r in results if isinstance(r.payload, PcaShareReply)]
            batch = [max(1, int(p.noisy_count)) for _, p in pca]
            projectors.add([p.subspace for _, p in pca], batch)
            counts.update(zip((o for o, _ in pca), batch))

        transport.fold_tasks(new_tasks(owner_ids, "pca", self._pca_task()), fold)
        rounds.append(RoundReport(len(rounds) + 1, "pca", len(owner_ids), len(counts), time.perf_counter() - t0))
        transport.progressed(1, 2)
        if not counts:
            raise RoundFailed("no owner released a DP-PCA subspace")
        U, eigenvalues = projectors.result()
        return U, eigenvalues, counts

    def run(self, owner_ids: list[str], transport: Transport) -> StrategyResult[FedDPDRModel]:
        """Both phases over ``transport``; the fitted model (post-processing of the owners' releases)."""
        split, deltas = self.budget_split(), self.delta_split()
        rounds: list[RoundReport] = []
        refused: dict[str, str] = {}
        U, eigenvalues, counts = self._phase1(owner_ids, transport, rounds, refused)
        asked = [o for o in owner_ids if o in counts]
        t0 = time.perf_counter()
        classifier = ClassifierSum(model=self.model, epsilon=split["svm"], delta=deltas["svm"])
        sizes: list[int] = []  # the noisy counts of the owners whose classifier came, in order

        def fold(results: list[Result]) -> None:
            refused.update(refusal_codes(results))
            svm = [(r.owner_id, r.payload) for r in results if isinstance(r.payload, SvmShareReply)]
            batch = [counts[o] for o, _ in svm]
            classifier.add([p.coef for _, p in svm], batch)
            sizes.extend(batch)

        transport.fold_tasks(new_tasks(asked, "svm", lambda o: self._svm_task(U, counts[o])), fold)
        rounds.append(RoundReport(len(rounds) + 1, "svm", len(asked), len(sizes), time.perf_counter() - t0))
        transport.progressed(2, 2)
        if not sizes:
            raise RoundFailed("no owner released an SVM")
        coef = classifier.coef()
        per_problem = ovr_epsilons(split["svm"], self.n_classes) if self.model not in DELTA_MODELS else [split["svm"]]
        model = FedDPDRModel(
            bounds=self.bounds,
            components=U,
            coef=coef,
            eigenvalues=eigenvalues,
            owner_sizes=() if self.basis in PUBLIC_BASES else tuple(sizes),
            per_class_epsilon=np.asarray(per_problem, dtype=np.float64),
            scaling=self.scaling,
            model=self.model,
        )
        return StrategyResult(model, self.privacy(), tuple(rounds), refused=refused)
