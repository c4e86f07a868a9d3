"""``--task bdt --release marginals``: federated SAMME over stumps from one marginal report per owner (issue 22).

The owners' side is ``--task nb``'s exactly (:class:`~privfed.server.strategies.naive_bayes.NbStrategy`: one
:class:`~privfed.common.tasks.NbReportTask` per owner and run, one debited (feature, bin, class) report through
the frequency oracle, refused the second time). Only the coordinator's fit differs: SAMME over BDT's stumps on
the product model the counts estimate (:func:`~privfed.common.learners.marginal_boost.fit_marginal_boost`),
post-processing with no ε per round. The served model is BDT's
:class:`~privfed.common.learners.samme.BoostedModel` of stumps, served and exported like ``--release shares``'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from privfed.common.learners.marginal_boost import MARGINAL_ROUNDS, MARGINAL_SMOOTHING, fit_marginal_boost
from privfed.common.validation import check_int
from privfed.server.strategies.naive_bayes import NbStrategy
from privfed.server.strategies.result import Parameter


@dataclass
class MarginalBoostStrategy(NbStrategy):
    """``--task bdt --release marginals`` (module docstring); ``n_rounds``: SAMME's rounds on the coordinator."""

    ROUND: ClassVar[str] = "bdt-marginals"  # a bdt job's logs and ledger entries say so, not nb's

    n_rounds: int = MARGINAL_ROUNDS
    smoothing: float = MARGINAL_SMOOTHING

    def __post_init__(self) -> None:
        check_int(self.n_rounds, name="n_rounds", minimum=1)
        super().__post_init__()

    def fit_parameters(self) -> dict[str, Parameter]:
        return {"release": "marginals", "n_rounds": self.n_rounds}

    def fit(self, counts: np.ndarray, n_reports: int) -> Any:
        return fit_marginal_boost(counts, n_reports, self.bounds, n_rounds=self.n_rounds, smoothing=self.smoothing)
