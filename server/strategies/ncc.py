"""Nearest centroid from perturbed samples (seed 002 §3.5.1), one round."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import RoundFailed
from privfed.common.learners.ncc import (
    LABEL_FRACTION,
    NccShare,
    NearestCentroidModel,
    ncc_centroids,
    split_label_budget,
)
from privfed.common.mechanisms import MECHANISMS, KaryRandomizedResponse
from privfed.common.tasks import NccShareReply, NccShareTask, Result
from privfed.common.validation import check_choice
from privfed.server.strategies.base import SingleRound, shares_of


@dataclass
class NccStrategy(SingleRound):
    """Nearest centroid from perturbed samples (seed 002 §3.5.1): every owner releases its
    rows once; the coordinator averages them per (reported) class."""

    mechanism: str
    epsilon: float
    n_classes: int
    bounds: Bounds
    labels: str = "rr"  # private by default; "clear" is answered only by owners that opted in (contract 6)
    label_fraction: float = LABEL_FRACTION

    def __post_init__(self) -> None:
        check_choice(self.mechanism, name="mechanism", allowed=MECHANISMS)
        self.eps_features, self.eps_labels = split_label_budget(self.epsilon, self.labels, self.label_fraction)

    def spec(self) -> NccShareTask:
        return NccShareTask(
            mechanism=self.mechanism,
            epsilon=self.eps_features,
            labels=self.labels,
            label_epsilon=self.eps_labels,
            n_classes=self.n_classes,
            bounds=self.bounds,
        )

    def aggregate(self, results: list[Result]) -> NearestCentroidModel:
        replies = shares_of(results, NccShareReply)
        if not replies:
            raise RoundFailed("no owner released a share: cannot fit nearest centroids")
        shares = [NccShare(reports=r.reports, labels=r.labels) for r in replies]
        label_rr = (
            KaryRandomizedResponse(epsilon=self.eps_labels, n_classes=self.n_classes)
            if self.labels == "rr" and np.isfinite(self.eps_labels)
            else None
        )
        centroids = ncc_centroids(shares, n_classes=self.n_classes, bounds=self.bounds, label_rr=label_rr)
        return NearestCentroidModel(centroids, np.arange(self.n_classes), bounds=self.bounds)  # scale-aware (issue 22)
