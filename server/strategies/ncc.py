"""Nearest centroid from perturbed samples (seed 002 §3.5.1), one round."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, EpsilonOutOfRange, RoundFailed
from privfed.common.learners.ncc import (
    LABEL_FRACTION,
    NccShare,
    resolve_labels,
    split_label_budget,
)
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.ncc_rr import debiased_class_totals
from privfed.common.learners.stump_sampled_encoding import SampledReports
from privfed.common.mechanisms import MECHANISMS
from privfed.common.mechanisms.factory import mechanism_of
from privfed.common.tasks import JointNccShareReply, NccShareReply, NccShareTask, Result
from privfed.common.validation import check_choice
from privfed.server.strategies.base import SingleRound, shares_of


@dataclass
class NccStrategy(SingleRound):
    """Nearest centroid from perturbed samples (seed 002 §3.5.1): every owner releases its
    rows once; the coordinator averages them per (reported) class. ``labels="joint"``: one (label, sign)
    report per row at the whole ε, the centroids from their unbiased class sums (issue 22)."""

    mechanism: str
    epsilon: float
    n_classes: int
    bounds: Bounds
    #: private by default: "auto" is joint or rr by ε (resolve_labels); "clear" is answered only by owners that
    #: opted in (contract 6)
    labels: str = "auto"
    label_fraction: float = LABEL_FRACTION
    #: the job's public bound on an owner's rows (``JobConfig.owner_rows_bound``): a joint or rr share's length is
    #: ``min(2^ceil(log2 n), max_owner_rows)`` (``NccShareTask``)
    max_owner_rows: int | None = None

    def __post_init__(self) -> None:
        check_choice(self.mechanism, name="mechanism", allowed=MECHANISMS)
        self.labels = resolve_labels(self.labels, self.epsilon)
        self.eps_features, self.eps_labels = split_label_budget(self.epsilon, self.labels, self.label_fraction)
        spec = self.spec()
        try:  # the mechanisms every owner builds from the task: a share out of range fails here, in the job's terms
            if spec.joint_encoding() is None and math.isfinite(spec.epsilon):
                mechanism_of(spec.mechanism, spec.epsilon, self.bounds.d)
            spec.label_response()
        except EpsilonOutOfRange as exc:
            labels = f" and the labels {self.eps_labels:g} (--labels rr)" if self.labels == "rr" else ""
            raise ConfigError(
                f"ncc at epsilon {self.epsilon:g} gives the rows {self.eps_features:g}{labels}: {exc}"
            ) from exc

    def spec(self) -> NccShareTask:
        return NccShareTask(
            mechanism=self.mechanism,
            epsilon=self.eps_features,
            labels=self.labels,
            label_epsilon=self.eps_labels,
            n_classes=self.n_classes,
            bounds=self.bounds,
            max_owner_rows=self.max_owner_rows,
        )

    def running(self) -> RunningClassSums:
        return RunningClassSums(self)


class RunningClassSums:
    """Per-class sums of the released rows and counts of the released labels, as the replies come.

    The rows are added in the order they are folded, each to its reported class (``np.add.at``),
    as :func:`~privfed.common.learners.ncc.ncc_class_sums` adds the rows of all shares at once: in
    the same order, the centroids are :func:`~privfed.common.learners.ncc.ncc_centroids`'s bit for
    bit. Randomized-response labels are debiased once, on the totals (the debiasing is linear), the ⊥ of the
    dummies dropped (:mod:`~privfed.common.learners.ncc_rr`; the strategy reads the rule off the task it sent).
    Under ``labels="joint"`` each batch's unbiased class sums and weight totals
    (:meth:`~privfed.common.learners.ncc_joint.JointLabelEncoding.class_sums`, linear in the reports) are added up,
    and the centroids are :meth:`~privfed.common.learners.ncc_joint.JointLabelEncoding.centroids`' of all reports
    (up to the rounding of the additions).
    """

    def __init__(self, strategy: NccStrategy) -> None:
        self._strategy = strategy
        self._label_rr = strategy.spec().label_response()  # rr: K + 1 values with ⊥ unless max_owner_rows == 1
        values = strategy.n_classes if self._label_rr is None else self._label_rr.n_classes
        self._totals = np.zeros((values, strategy.bounds.d))
        self._labels = np.zeros(values, dtype=np.int64)
        self._weights = np.zeros(strategy.n_classes)  # joint: the estimated class weight totals
        self._rows = 0  # joint: the reports received
        self._joint = strategy.spec().joint_encoding()
        self._replies = 0

    def add(self, results: list[Result]) -> None:
        if self._joint is not None:
            joint = shares_of(results, JointNccShareReply)
            if joint:
                sampled = SampledReports.concat(r.sampled(self._joint) for r in joint)
                sums, weights = self._joint.class_sums(sampled)
                self._totals += sums
                self._weights += weights
                self._rows += len(sampled)
                self._replies += len(joint)
            return
        replies = shares_of(results, NccShareReply)
        if not replies:
            return
        share = NccShare.concat(NccShare(reports=r.reports, labels=r.labels) for r in replies)
        np.add.at(self._totals, share.labels, share.reports)
        self._labels += np.bincount(share.labels, minlength=self._labels.shape[0])
        self._replies += len(replies)

    def model(self) -> NearestCentroidModel:
        s = self._strategy
        if not self._replies:
            raise RoundFailed("no owner released a share: cannot fit nearest centroids")
        sums, counts = self._totals, self._labels.astype(np.float64)
        cap: float | np.ndarray = counts
        if self._joint is not None:  # as JointLabelEncoding.centroids caps: the rows reported
            counts, cap = self._weights, float(self._rows)
        elif self._label_rr is not None:  # as ncc_class_sums and ncc_centroids debias (⊥ dropped) and cap
            cap = float(counts.sum())  # every report, dummies too: a looser cap, still one
            sums, counts = debiased_class_totals(self._label_rr, sums, counts, s.n_classes)
        # scale-aware, with the class priors from the same totals (issue 22)
        return NearestCentroidModel.from_sums(sums, counts, cap, s.bounds, np.arange(s.n_classes))
