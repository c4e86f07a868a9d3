"""The methods a FedDPDR-DPML experiment compares (:mod:`privfed.deploy.experiments.feddpdr`; seed 004 §5.1).

Each is fitted by :func:`fit_methods` on the same split and owner partition; every private one is the
federation itself (:func:`~privfed.deploy.experiments.federated.federated_fit`). The paper's competitors (§5.1)
as the paper means them, with the phase-1 basis (``--basis``) and classifier (``--model``) of the run:

* ``Non-Priv``: the reduction and the classifier on all training rows, no noise (epsilon = inf, same code).
* ``DPML``: the DP classifier without the reduction step (k = d), one party (owner 1) alone, whole epsilon.
* ``DPDR-DPML``: each party alone (reduction then classifier on its own rows at the same epsilon); the mean
  accuracy over the N parties. ``DPDR-DPML-best`` is the best single party (the federation must beat it).
* ``DPDR-DPML-pooled``: one owner holding all training rows (central DP; not a competitor of the paper).
* ``FedDPDR-DPML``: N owners (Alg. 1) with ``--basis`` and ``--model``.
* ``FedDPDR-DPML-paper``: the paper's algorithm as written: DP-PCA at epsilon/2, one-vs-rest Huber SVMs
  (epsilon/2 split over the K classes), weighted average; always run, whatever ``--basis``/``--model`` say.
* ``Non-Priv-paper``: the paper's non-private pipeline, PCA to k then a linear SVM (scikit-learn
  ``PCA`` + ``LinearSVC``) on all training rows mapped to [0, 1] by the public bounds.
* chance = 1/K is drawn on the plot and recorded in the report.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.datasets import Dataset
from privfed.common.feddpdr.centroid import class_sums_sigma
from privfed.common.feddpdr.choices import DELTA_MODELS, ovr_epsilons
from privfed.common.feddpdr.model import FedDPDRModel
from privfed.common.feddpdr.pca import NEIGHBOURING_SENSITIVITY
from privfed.common.learners.reference import paper_nonprivate_pipeline
from privfed.deploy.experiments.federated import federated_fit
from privfed.server.strategies.feddpdr import FedDpdrStrategy

METHODS = (
    "Non-Priv",
    "Non-Priv-paper",
    "DPML",
    "DPDR-DPML",
    "DPDR-DPML-best",
    "DPDR-DPML-pooled",
    "FedDPDR-DPML",
    "FedDPDR-DPML-paper",
)
PAPER_BASIS, PAPER_MODEL = "dp-pca", "ovr-huber"
"""``FedDPDR-DPML-paper``: seed 004 Alg. 1-3 as written (the scaling stays the run's)."""


class Parties:
    """Each party alone: ``score`` is ``pick`` (mean or max) of the parties' test accuracies."""

    def __init__(self, models: list[FedDPDRModel], pick: Callable[[list[float]], Any]) -> None:
        self.models, self.pick = models, pick

    def score(self, X: np.ndarray, y: np.ndarray) -> float:
        return float(self.pick([m.score(X, y) for m in self.models]))


def fit_methods(
    train: Dataset, parts_idx: list[np.ndarray], setting: dict[str, Any], args: argparse.Namespace, seed: int
) -> dict[str, tuple[FedDPDRModel | Parties | Any, float]]:
    """Fit every method on one setting; returns {method: (model, seconds)}."""
    bounds, K = train.bounds, train.n_classes
    eps, k = setting["epsilon"], setting["k"]
    parts = [(train.X[i], train.y[i]) for i in parts_idx]
    union = np.concatenate(parts_idx)
    pooled = [(train.X[union], train.y[union])]
    seeds = np.random.SeedSequence([seed, 4]).spawn(len(METHODS))
    rngs = {m: np.random.Generator(np.random.PCG64(s)) for m, s in zip(METHODS, seeds)}

    def fit(
        owners: Sequence[tuple[np.ndarray, np.ndarray]],
        epsilon: float,
        rng: np.random.Generator,
        basis: str = args.basis,
        model: str = args.model,
        k: int = k,
    ) -> FedDPDRModel:
        return federated_fit(
            owners,
            bounds,
            K,
            rng,
            epsilon=epsilon,
            delta=args.delta,
            k=k,
            basis=basis,
            model=model,
            scaling=args.scaling,
            lam=args.lam,
        )

    alone: list[FedDPDRModel] = []  # each party alone, fitted once for the mean and the best

    def each_party(r: np.random.Generator, pick: Callable[[list[float]], Any]) -> Parties:
        if not alone:
            alone.extend(fit([p], eps, rr) for p, rr in zip(parts, r.spawn(len(parts))))
        return Parties(alone, pick)

    jobs: dict[str, Callable[[np.random.Generator], FedDPDRModel | Parties | Any]] = {
        "Non-Priv": lambda r: fit(pooled, math.inf, r),
        "Non-Priv-paper": lambda r: paper_nonprivate_pipeline(*pooled[0], bounds, k),
        "DPML": lambda r: fit(parts[:1], eps, r, basis="identity", k=bounds.d),
        "DPDR-DPML": lambda r: each_party(r, np.mean),
        "DPDR-DPML-best": lambda r: each_party(r, np.max),
        "DPDR-DPML-pooled": lambda r: fit(pooled, eps, r),
        "FedDPDR-DPML": lambda r: fit(parts, eps, r),
        "FedDPDR-DPML-paper": lambda r: fit(parts, eps, r, basis=PAPER_BASIS, model=PAPER_MODEL),
    }
    out = {}
    for name, job in jobs.items():
        start = time.perf_counter()
        model = job(rngs[name])
        out[name] = (model, time.perf_counter() - start)
    return out


def mechanism_notes(
    setting: dict[str, Any], args: argparse.Namespace, bounds: Bounds, n_classes: int, basis: str, model: str
) -> dict:
    """Noise scales behind the numbers, from the strategy's own budget and delta split: the DP-PCA
    sigma, and the phase-2 noise of one party and of all rows."""
    eps, sizes = setting["epsilon"], setting["sizes"]
    k = bounds.d if basis == "identity" else setting["k"]
    strategy = FedDpdrStrategy(
        epsilon=eps, n_classes=n_classes, bounds=bounds, k=k, delta=args.delta, lam=args.lam, model=model, basis=basis
    )
    split, deltas = strategy.budget_split(), strategy.delta_split()
    notes: dict[str, Any] = {"basis": basis, "model": model, "epsilon1": split["pca"] + split["count"]}
    notes.update(epsilon2=split["svm"], delta1=deltas["pca"], delta2=deltas["svm"], count_epsilon=split["count"])
    if basis == "dp-pca":
        from privfed.common.mechanisms.gaussian import gaussian_sigma

        notes["pca_sigma"] = gaussian_sigma(split["pca"], deltas["pca"], NEIGHBOURING_SENSITIVITY["add-remove"])
    eps2, delta2 = split["svm"], deltas["svm"]
    if model == "centroid":
        sigma = class_sums_sigma(eps2, delta2)
        notes["class_sums_sigma"] = sigma
        notes["class_mean_noise_owner1"] = sigma / (int(sizes[0]) / n_classes)
        notes["class_mean_noise_federation"] = math.sqrt(len(sizes)) * sigma / (int(sum(sizes)) / n_classes)
    elif model in DELTA_MODELS:
        from privfed.common.feddpdr.multiclass import mechanism

        notes["objective_perturbation"] = mechanism(eps2, delta2, n_classes, model).calibration()
    else:
        from privfed.common.feddpdr.svm import HUBER_H
        from privfed.common.mechanisms.objective import privacy_adjustment

        eps_class, c = float(ovr_epsilons(eps2, n_classes)[0]), 1.0 / (2.0 * HUBER_H)
        notes["svm_eps_per_class"] = eps_class
        # (noise rate, Delta) at the public row count an owner is sent (its DP count), and at the federation's total
        notes["svm_owner1_rate_Delta"] = privacy_adjustment(eps_class, max(int(sizes[0]), 1), args.lam, c)
        notes["svm_all_rows_rate_Delta"] = privacy_adjustment(eps_class, max(int(sum(sizes)), 1), args.lam, c)
    return notes
