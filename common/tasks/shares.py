"""Task kinds of the LDP models (seed 002 §3.5): nearest-centroid rows and a local logistic model.

What one owner can move (the bound the contracts enforce, tested in ``tests/unit/test_contracts.py``):

* nearest centroid: at most ``max_rows`` reports (``JobConfig.owner_rows_bound``, public), each a
  possible output of the task's mechanism with a label in ``0..K-1`` (``0..K`` under ``labels="rr"`` with ⊥:
  :meth:`NccShareTask.label_response`), as many as an honest owner sends (a padded share: a power of two within
  the task's bound, or the bound: :meth:`NccShareTask.check_public_count`): exactly what an honest owner of
  ``max_rows`` rows could send. A class centroid is a mean of such reports, so one owner moves class k's
  estimated sum by at most ``max_rows * max_abs_output`` per coordinate (times ``(1 - q) / (p - q)`` after the
  k-RR's debiasing) and its
  count by at most ``max_rows`` (likewise). Under ``labels="joint"`` (:class:`JointNccShareReply`) at most
  ``max_rows`` pairs of a feature in ``0..d-1`` and a k-RR report in ``0..2K``, so one owner moves
  ``S_cj`` by at most ``max_rows * d / (p - q)`` and ``U_c`` by ``max_rows * (1 - 2q) / (p - q)``
  (:class:`~privfed.common.mechanisms.label_sign.LabelSignResponse`'s estimator), as an honest owner could;
* logistic regression: one parameter vector of the task's width, each value a possible mechanism
  output, so the average of ``n`` owners moves by at most ``2 * max_abs_output / n`` per
  coordinate, as one honest owner's extreme draw could.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.logistic import n_parameters
from privfed.common.learners.ncc import LABEL_SCHEMES
from privfed.common.learners.ncc_joint import JointLabelEncoding, joint_encoding
from privfed.common.learners.ncc_rr import label_response
from privfed.common.learners.stump_sampled_encoding import SampledReports
from privfed.common.mechanisms import KaryRandomizedResponse, mechanism_of
from privfed.common.tasks.base import Kind, LedgerEntries, Payload
from privfed.common.tasks.contract import (
    ContractViolation,
    PublicLimits,
    check_labels,
    check_matrix,
    check_reports,
    check_rows,
    reply_of,
)
from privfed.common.validation import check_choice, check_int


@dataclass(frozen=True)
class NccShareTask:
    """Release every row once, perturbed, for nearest-centroid learning (seed 002 §3.5.1).

    ``labels`` (:data:`~privfed.common.learners.ncc.LABEL_SCHEMES`): ``"rr"``, the rows through ``mechanism``
    at ``epsilon`` and the labels by k-RR at ``label_epsilon``; ``"clear"``, the labels unperturbed (owner
    opt-in); ``"joint"``, one (label, sign) report per row at the whole ``epsilon``
    (:class:`~privfed.common.learners.ncc_joint.JointLabelEncoding`; ``label_epsilon`` unused; at ε = ∞ the exact
    rows and labels, as ``"rr"`` sends them there).

    ``max_owner_rows``: the job's public bound on an owner's rows (``JobConfig.owner_rows_bound``; None: none).
    A joint or rr share carries ``min(2^ceil(log2 n), max_owner_rows)`` reports, its rows and dummies or a
    subsample (:func:`~privfed.common.learners.ncc_padding.public_count_rows`), so its length does not show ``n``: a
    joint dummy has weight 0, an rr dummy the label ⊥ = ``K`` of a ``K + 1``-ary k-RR whenever a dummy may be
    needed (:meth:`label_response`, :mod:`~privfed.common.learners.ncc_rr`). A ``"clear"`` share is one report per
    row: its length is ``n`` (the owner opted in to clear labels).
    """

    mechanism: str
    epsilon: float
    labels: str
    label_epsilon: float
    n_classes: int
    bounds: Bounds
    max_owner_rows: int | None = None

    def __post_init__(self) -> None:
        check_choice(self.labels, name="labels", allowed=LABEL_SCHEMES)
        if self.max_owner_rows is not None:
            check_int(self.max_owner_rows, name="max_owner_rows", minimum=1)

    def ledger_entries(self) -> LedgerEntries:
        if self.labels == "joint":
            return [(self.epsilon, 0.0, "ncc-joint")]
        entries = [(self.epsilon, 0.0, "ncc-features")]
        if self.labels == "rr":
            entries.append((self.label_epsilon, 0.0, "ncc-labels"))
        return entries

    def label_response(self) -> KaryRandomizedResponse | None:
        """The labels' k-RR under ``labels="rr"`` at a finite ``label_epsilon``: over ``K + 1`` values (⊥ = ``K``,
        a dummy's) unless ``max_owner_rows == 1`` (:func:`~privfed.common.learners.ncc_rr.label_response`: one
        rule, from the task's public fields, for the owner that pads and the coordinator that debiases); else None."""
        if self.labels != "rr":
            return None
        return label_response(self.label_epsilon, self.n_classes, self.max_owner_rows)

    def label_values(self) -> int:
        """How many label values a reply may carry: ``K``, or ``K + 1`` under :meth:`label_response`'s ⊥."""
        rr = self.label_response()
        return self.n_classes if rr is None else rr.n_classes

    def joint_encoding(self) -> JointLabelEncoding | None:
        """The rows' (label, sign) encoding under ``labels="joint"`` at a finite ε; else None (rows and labels)."""
        if self.labels != "joint":
            return None
        return joint_encoding(self.epsilon, self.n_classes, self.bounds.d)

    def padded(self) -> bool:
        """Whether the share carries the public ``work_rows(n, max_owner_rows)`` reports (joint, or rr through its
        k-RR at a finite ε); else (clear labels, ε = ∞) one report per row."""
        return self.joint_encoding() is not None or self.label_response() is not None

    def check_public_count(self, m: int) -> None:
        """A padded share's ``m`` reports must be a count an honest owner sends, ``work_rows(n, max_owner_rows)``
        for some ``n``: a power of two (at least 1, an owner of no rows sends one dummy) within the bound, or the
        bound itself; ContractViolation ``shape`` otherwise (``tests/adversary/test_ncc_rr_hostile_reply.py``)."""
        bound = self.max_owner_rows
        power = m >= 1 and m & (m - 1) == 0 and (bound is None or m <= bound)
        if self.padded() and not (power or m == bound):
            raise ContractViolation(
                "shape", f"{m} reports: a padded share carries a power of two, or the bound {bound}"
            )


@dataclass(frozen=True)
class NccShareReply:
    reports: np.ndarray  # (m, d) perturbed rows in [-1, 1]-space
    labels: np.ndarray  # (m,) clear or randomized-response labels


@dataclass(frozen=True)
class JointNccShareReply:
    """An NCC share under ``labels="joint"``: per row the feature it sampled and its k-RR report in ``0..2K``."""

    features: np.ndarray  # (m,) int, drawn independently of the rows
    reports: np.ndarray  # (m,) int

    def sampled(self, encoding: JointLabelEncoding) -> SampledReports:
        """The reports as the encoding's estimator takes them; ConfigError outside its support."""
        features, reports = np.asarray(self.features), np.asarray(self.reports)
        return encoding.reports_of(features.reshape(-1, 1), reports.reshape(-1, 1))


def check_ncc_reply(spec: NccShareTask, payload: Payload, limits: PublicLimits) -> None:
    encoding = spec.joint_encoding()
    if encoding is not None:
        joint = reply_of(payload, JointNccShareReply)
        check_rows(int(np.asarray(joint.reports).size), limits, "report rows")
        spec.check_public_count(int(np.asarray(joint.reports).size))
        try:
            joint.sampled(encoding)
        except ConfigError as exc:
            raise ContractViolation("shape", str(exc)) from exc
        return
    reply = reply_of(payload, NccShareReply)
    d = spec.bounds.d
    reports = check_matrix(reply.reports, "reports", (None, d))
    check_rows(reports.shape[0], limits, "report rows")
    spec.check_public_count(reports.shape[0])
    check_labels(reply.labels, reports.shape[0], spec.label_values())
    check_reports(reports, mechanism_of(spec.mechanism, spec.epsilon, d))


NCC_SHARE = Kind(
    "ncc_share", NccShareTask, (NccShareReply, JointNccShareReply), check_ncc_reply, contribution=True, tasks=("ncc",)
)


@dataclass(frozen=True)
class LrShareTask:
    """Release one perturbed local logistic-regression model (seed 002 §3.5.2)."""

    mechanism: str
    epsilon: float
    param_bound: float
    c: float
    n_classes: int
    bounds: Bounds

    def ledger_entries(self) -> LedgerEntries:
        return [(self.epsilon, 0.0, "lr-model")]


@dataclass(frozen=True)
class LrShareReply:
    reports: np.ndarray  # (1, p) perturbed parameter vector in [-1, 1]-space


def check_lr_reply(spec: LrShareTask, payload: Payload, limits: PublicLimits) -> None:
    reply = reply_of(payload, LrShareReply)
    p = n_parameters(spec.n_classes, spec.bounds.d)
    reports = check_matrix(reply.reports, "parameter vector", (1, p))
    check_reports(reports, mechanism_of(spec.mechanism, spec.epsilon, p))


LR_SHARE = Kind("lr_share", LrShareTask, (LrShareReply,), check_lr_reply, contribution=True, tasks=("lr",))
