"""LDP naive Bayes over the public bins, one round (issue 22 item 3; :mod:`privfed.common.learners.naive_bayes`).

Every owner is asked once for one (feature, bin, class) report (:class:`~privfed.common.tasks.NbReportTask`,
the run's id as round id: one report per owner and run). Each reply is folded into running per-feature
counts as it is read (:meth:`NaiveBayesEncoding.counts` of the one report, O(d B K) memory whatever the
number of owners), and the coordinator fits :func:`~privfed.common.learners.naive_bayes.fit_naive_bayes`
with its own ``smoothing`` (never on the wire). The served model is a
:class:`~privfed.common.learners.naive_bayes.NaiveBayesModel`. ``--task bdt --release marginals`` is the same
round with another fit (:meth:`NbStrategy.fit`; :mod:`privfed.server.strategies.marginal_boost`).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import RoundFailed
from privfed.common.learners.naive_bayes import NB_BINS, SMOOTHING, fit_naive_bayes
from privfed.common.tasks import NbReportReply, NbReportTask, Result
from privfed.common.validation import check_positive
from privfed.server.strategies.base import Transport, new_tasks, refusal_codes
from privfed.server.strategies.result import Parameter, PrivacySplit, RoundReport, StrategyResult


@dataclass
class NbStrategy:
    """``--task nb`` (module docstring)."""

    #: The round id's prefix: the logs' and the owners' ledger entries' name of the run (``nb-report:nb-...``).
    ROUND: ClassVar[str] = "nb"
    epsilon: float
    n_classes: int
    bounds: Bounds
    n_bins: int = NB_BINS
    smoothing: float = SMOOTHING

    def __post_init__(self) -> None:
        check_positive(self.smoothing, name="smoothing")
        self.spec().encoding  # noqa: B018 - the public parameters' checks, before any owner is asked

    def spec(self) -> NbReportTask:
        return NbReportTask(epsilon=self.epsilon, n_bins=self.n_bins, n_classes=self.n_classes, bounds=self.bounds)

    def privacy(self) -> PrivacySplit:
        """One report per owner, through the oracle the public parameters derive (``exact`` at ε = ∞)."""
        spec = self.spec()
        parameters: dict[str, Parameter] = {
            "oracle": str(spec.encoding.oracle) if np.isfinite(self.epsilon) else "exact",
            "n_bins": self.n_bins,
            "smoothing": self.smoothing,
        }
        return PrivacySplit.from_entries([(spec.ledger_entries(), 1)], parameters=parameters | self.fit_parameters())

    def fit_parameters(self) -> dict[str, Parameter]:
        """The coordinator's own fit parameters beyond the smoothing (none for naive Bayes)."""
        return {}

    def fit(self, counts: np.ndarray, n_reports: int) -> Any:
        """The model from the summed counts of ``n_reports`` owners: naive Bayes (post-processing)."""
        return fit_naive_bayes(counts, n_reports, self.bounds, smoothing=self.smoothing)

    def check_feasible(self, n_owners: int) -> None:
        """Any number of owners can report once."""

    def run(self, owner_ids: list[str], transport: Transport) -> StrategyResult[Any]:
        t0 = time.perf_counter()
        spec = self.spec()
        enc = spec.encoding
        counts, n_reports, refused = np.zeros((enc.d, enc.n_bins, enc.n_classes)), 0, dict[str, str]()

        def fold(results: list[Result]) -> None:  # each batch as it comes: memory is the counts', not the replies'
            nonlocal counts, n_reports
            refused.update(refusal_codes(results))
            for r in results:
                if isinstance(r.payload, NbReportReply):
                    reports = r.payload.reports if np.isfinite(self.epsilon) else r.payload.reports.reshape(-1)
                    counts += enc.counts(r.payload.features, reports)
                    n_reports += 1

        transport.fold_tasks(new_tasks(owner_ids, f"{self.ROUND}-{secrets.token_hex(6)}", spec), fold)
        transport.progressed(1, 1)
        if not n_reports:
            raise RoundFailed("no owner released a report: nothing to fit")
        model = self.fit(counts, n_reports)
        record = RoundReport(1, "share", len(owner_ids), n_reports, time.perf_counter() - t0)
        return StrategyResult(model, self.privacy(), (record,), refused=refused)
