"""Logistic regression from perturbed local models (seed 002 §3.5.2), one round."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import RoundFailed
from privfed.common.learners.logistic import LinearModel, lr_aggregate
from privfed.common.mechanisms import MECHANISMS
from privfed.common.tasks import LrShareReply, LrShareTask, Result
from privfed.common.validation import check_choice
from privfed.server.strategies.base import SingleRound, shares_of


@dataclass
class LrStrategy(SingleRound):
    """Logistic regression from perturbed local models (seed 002 §3.5.2): every owner fits an
    L2-regularised model, clips it to ``param_bound`` and perturbs it; the coordinator averages."""

    mechanism: str
    epsilon: float
    n_classes: int
    bounds: Bounds
    param_bound: float = 4.0
    C: float = 1.0

    def __post_init__(self) -> None:
        check_choice(self.mechanism, name="mechanism", allowed=MECHANISMS)

    def spec(self) -> LrShareTask:
        return LrShareTask(
            mechanism=self.mechanism,
            epsilon=self.epsilon,
            param_bound=self.param_bound,
            c=self.C,
            n_classes=self.n_classes,
            bounds=self.bounds,
        )

    def aggregate(self, results: list[Result]) -> LinearModel:
        replies = shares_of(results, LrShareReply)
        if not replies:
            raise RoundFailed("no owner released a share: cannot fit logistic regression")
        reports = np.concatenate([r.reports.reshape(1, -1) for r in replies])
        return lr_aggregate(reports, param_bound=self.param_bound, n_classes=self.n_classes, bounds=self.bounds)
