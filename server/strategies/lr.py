"""Logistic regression from perturbed local models (seed 002 §3.5.2), one round."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import RoundFailed
from privfed.common.learners.logistic import LinearModel, lr_aggregate, n_parameters
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

    def running(self) -> RunningMean:
        return RunningMean(self)


class RunningMean:
    """The sum of the released parameter vectors and their number, as the replies come.

    Each vector is added to the sum one after the other, as numpy's column mean of the stacked
    vectors adds its rows: in the order the replies are folded, the sum and the model are those of
    :func:`lr_aggregate` over all the vectors at once, bit for bit (the in-process transport folds
    in task order; over gRPC the replies come in the order the nodes answer, and the model differs
    from the task-ordered one by float rounding only, ``tests/unit/test_streaming.py``).
    """

    def __init__(self, strategy: LrStrategy) -> None:
        self._strategy = strategy
        self._total = np.zeros(n_parameters(strategy.n_classes, strategy.bounds.d))
        self._count = 0

    def add(self, results: list[Result]) -> None:
        for reply in shares_of(results, LrShareReply):
            self._total += reply.reports[0]
            self._count += 1

    def model(self) -> LinearModel:
        if not self._count:
            raise RoundFailed("no owner released a share: cannot fit logistic regression")
        s = self._strategy
        mean = (self._total / self._count).reshape(1, -1)  # lr_aggregate's column mean of one row is that row
        return lr_aggregate(mean, param_bound=s.param_bound, n_classes=s.n_classes, bounds=s.bounds)
