"""Task kind of LDP naive Bayes over the public bins (issue 22 item 3; :mod:`privfed.common.learners.naive_bayes`).

The coordinator asks every owner once; each draws one feature ``j`` uniformly (independently of its data),
one of its rows uniformly, and reports that row's (bin, class) cell of ``j`` through the frequency oracle
with the least count variance for the ``B K`` cells at ε (:meth:`NaiveBayesEncoding.share`; the oracle is
derived from ε, ``n_bins`` and ``n_classes``, public, on both sides, so the task does not name it). The
smoothing of the fit is the coordinator's alone and does not travel. An owner releases one report per run:
its ledger entry's release id is the run's (:func:`nb_release_id`, the task's round id), as a gradient's.

What one owner can move (the contract): one sampled feature in ``0..d-1`` and one report in the oracle's
output space (a cell for k-RR, a bit vector for OUE, coefficients below the hash prime and a bucket below
``g`` for OLH; the exact cell at ε = ∞), so one owner moves one feature's counts by at most what one honest
owner's report could.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.naive_bayes import NaiveBayesEncoding
from privfed.common.mechanisms.frequency import HASH_PRIME, OptimizedLocalHashing
from privfed.common.tasks.base import Kind, LedgerEntries, Payload
from privfed.common.tasks.contract import ContractViolation, PublicLimits, reply_of

#: Ledger purpose of a naive Bayes report.
NB_PURPOSE = "nb-report"
#: Public limit on the bins per feature a task may ask for (the oracle's domain is ``n_bins * n_classes``).
MAX_NB_BINS = 64


def nb_release_id(round_id: str) -> str:
    """The ledger release id of an owner's one naive Bayes report in the run ``round_id`` (module docstring)."""
    return f"{NB_PURPOSE}:{round_id}"


@dataclass(frozen=True, eq=False)
class NbReportTask:
    """Release one (feature, bin, class) report (module docstring); ``epsilon`` may be ``inf`` (the exact cell)."""

    epsilon: float
    n_bins: int
    n_classes: int
    bounds: Bounds

    @cached_property
    def encoding(self) -> NaiveBayesEncoding:
        """The owner's and the coordinator's encoding (its oracle derived from the public parameters)."""
        return NaiveBayesEncoding(
            epsilon=self.epsilon, bounds=self.bounds, n_classes=self.n_classes, n_bins=self.n_bins
        )  # fmt: skip

    @property
    def report_width(self) -> int:
        """Integers per report: the oracle's, or one (the exact cell) at ε = ∞."""
        return self.encoding.frequency_oracle.report_width if np.isfinite(self.epsilon) else 1

    def ledger_entries(self) -> LedgerEntries:
        return [(self.epsilon, 0.0, NB_PURPOSE)]


@dataclass(frozen=True)
class NbReportReply:
    features: np.ndarray  # (1,): the sampled feature
    reports: np.ndarray  # (1, report_width): the oracle's report (the exact cell at ε = ∞)


def check_oracle_reports(spec: NbReportTask, reports: np.ndarray) -> None:
    """Every report a possible output of the task's oracle (module docstring); ``out_of_range`` if not."""
    enc = spec.encoding
    if not np.isfinite(spec.epsilon):
        if reports.size and (reports.min() < 0 or reports.max() >= enc.domain):
            raise ContractViolation("out_of_range", f"exact cells must lie in 0..{enc.domain - 1}")
        return
    oracle = enc.frequency_oracle
    try:
        oracle.supports(reports)  # k-RR: a value of the domain; OUE: bits
    except ConfigError as exc:
        raise ContractViolation("out_of_range", str(exc)) from None
    if isinstance(oracle, OptimizedLocalHashing):
        coef, bucket = reports[:, :3], reports[:, 3]
        if coef.size and (coef.min() < 0 or coef.max() >= HASH_PRIME or bucket.min() < 0 or bucket.max() >= oracle.g):
            raise ContractViolation(
                "out_of_range", f"OLH reports are 3 coefficients < 2^31 - 1 and a bucket < {oracle.g}"
            )


def check_nb_reply(spec: NbReportTask, payload: Payload, limits: PublicLimits) -> None:
    reply = reply_of(payload, NbReportReply)
    features, reports = np.asarray(reply.features), np.asarray(reply.reports)
    width = spec.report_width
    if features.shape != (1,) or reports.shape != (1, width) or features.dtype.kind not in "iu":
        raise ContractViolation(
            "shape",
            f"a naive Bayes report is 1 feature and (1, {width}) integers, got {features.shape}, {reports.shape}",
        )
    if reports.dtype.kind not in "iu":
        raise ContractViolation("shape", f"oracle reports must be integers, got dtype {reports.dtype}")
    if not 0 <= int(features[0]) < spec.bounds.d:
        raise ContractViolation("out_of_range", f"sampled feature {int(features[0])} outside 0..{spec.bounds.d - 1}")
    check_oracle_reports(spec, reports.astype(np.int64))


NB_REPORT = Kind("nb", NbReportTask, (NbReportReply,), check_nb_reply, contribution=True, tasks=("nb", "bdt"))
