"""Task kinds of LDP boosting (seed 002 Alg. 2): an owner's share for the round's base learner, and its
evaluation release into a secure sum.

A share's reply is typed by the run's public configuration (:func:`share_reply_type`): a stump share
in a row encoding (:class:`StumpShareReply`) or a sampled one (:class:`SampledStumpShareReply`),
logistic-regression parameters (:class:`LrParametersReply`), weighted nearest-centroid rows with
their labels (:class:`NccRowsReply`) or joint (label, sign) reports (:class:`JointNccReply`). Each
knows how it is made from an owner's release (``of``), what the coordinator's selection takes from
it (``release``) and what an honest owner's can be (``check``: the contract).

What one owner can move (the contract): a share of the run's encoding, rows bounded as for nearest
centroid, sampled encodings checked by the encodings' own ``reports_of``, values within the share
mechanism's range; an evaluation, a ring member's join or a leader's total of at most ``n_parties``
contributions within the public ``max_abs`` (a pairwise-mask input is checked by the sum).

The boosting types (``BoostConfig``, ``ReleasePlan``, ``CoordinatorSteps``) import scipy: only once a task needs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, get_args

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.learners.ncc import NccShare
from privfed.common.learners.stump_row_encoding import RowEncoding
from privfed.common.learners.stump_sampled_encoding import SampledReports
from privfed.common.secagg.messages import InputRequest, MaskedInput
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
from privfed.common.tasks.steps import RingJoined, RingSpec, RingTotal

if TYPE_CHECKING:
    from privfed.common.boosting.coordinator import CoordinatorSteps
    from privfed.common.boosting.owner import Release
    from privfed.common.boosting.releases import ReleasePlan
    from privfed.common.boosting.wire import BoostConfig, BoostHistory, Learner

T = TypeVar("T")


def boost_release_epsilons(config: BoostConfig) -> LedgerEntries:
    """Ledger entries of one boosting share (seed 002 Alg. 2): the share part of the run's ε, or 1/T of it.

    ``BoostingParams.share_round_epsilon``: ``(1 - eval_fraction) ε`` for the one share of an owner,
    ``1/T`` of it for each of the T shares under ``share_groups="all"``. NCC splits it between features
    and labels by :func:`~privfed.common.learners.ncc.split_label_budget`, the one split the share's
    mechanisms use too (``ReleasePlan.release_mechanism``, ``label_rr``); at ε = ∞ both parts
    are ∞, never NaN.
    """
    from privfed.common.learners.ncc import split_label_budget

    fb = config.params
    if fb.base != "ncc":
        return [(fb.share_round_epsilon, 0.0, "boost-share")]
    features, labels = split_label_budget(fb.share_round_epsilon, fb.labels, fb.label_fraction)
    if fb.labels != "rr":
        return [(features, 0.0, "boost-share")]
    return [(features, 0.0, "boost-share-features"), (labels, 0.0, "boost-share-labels")]


@dataclass(frozen=True, eq=False)
class BoostShareTask:
    """Release one perturbed share for this round's base learner, with SAMME weights the owner
    computes from the public ``history``.

    An owner releases in at most one round of a run (T under ``share_groups="all"``), the run its
    config names; the task's round id must be that run id (an owner refuses another: ``invalid_task``,
    audit 22). A coordinator that sends another run gets another release, and it is debited like any
    other -- the owner's ledger bounds the total over all runs, nothing bounds the number of runs.
    """

    config: BoostConfig
    history: BoostHistory

    @property
    def release_id(self) -> str:
        """This share's key: ``boost-share:<run id>``, with ``#r<round>`` when every owner shares in every round
        (``share_groups="all"``). The same in every run of a resumed job: the owner keeps its share under it and, with
        ``#r<round>``, its ledger entries (``privfed.owner.kinds.boosting``); the coordinator's job book counts and
        carries the release by it (:mod:`privfed.server.rounds`)."""
        if self.config.params.shares_per_owner == 1:
            return f"boost-share:{self.config.run_id}"
        return f"boost-share:{self.config.run_id}#r{self.history.round}"

    def ledger_entries(self) -> LedgerEntries:
        return boost_release_epsilons(self.config)


def _share_as(share: object, kind: type[T]) -> T:
    """An owner's release as the ``kind`` its run's configuration makes it."""
    if not isinstance(share, kind):
        raise ConfigError(f"expected a {kind.__name__} share, got {type(share).__name__}")
    return share


def _one_row(share: object) -> np.ndarray:
    return np.asarray(_share_as(share, np.ndarray), dtype=np.float64).reshape(1, -1)


@dataclass(frozen=True)
class StumpShareReply:
    """A stump share in a row encoding (``pair``, ``table``; every encoding at ε = ∞): one vector (1, dim)."""

    reports: np.ndarray

    @classmethod
    def of(cls, share: Release) -> StumpShareReply:
        return cls(_one_row(share))

    def release(self, steps: CoordinatorSteps) -> Release:
        return steps.stump_reports(self.reports, np.zeros((0, 0), dtype=np.int64))

    def check(self, steps: CoordinatorSteps, limits: PublicLimits) -> None:
        reports = check_matrix(self.reports, "share reports", (1, None))
        self.release(steps)  # the encoding's own format checks
        encoding = steps.plan.share_encoding
        if isinstance(encoding, RowEncoding) and encoding.mechanism is not None:
            check_reports(reports, encoding.mechanism)


@dataclass(frozen=True)
class SampledStumpShareReply:
    """A stump share in a sampled encoding (``signs``, ``cells``): the coordinates the owner sampled (1, m)
    and the frequency oracle's report of them (1, report_width), integers."""

    coordinates: np.ndarray
    reports: np.ndarray

    @classmethod
    def of(cls, share: Release) -> SampledStumpShareReply:
        sampled = _share_as(share, SampledReports)
        return cls(sampled.coordinates, sampled.reports)

    def release(self, steps: CoordinatorSteps) -> Release:
        return steps.stump_reports(self.reports, self.coordinates)

    def check(self, steps: CoordinatorSteps, limits: PublicLimits) -> None:
        self.release(steps)  # the encoding's shapes, distinct coordinates in range, the oracle's domain


@dataclass(frozen=True)
class LrParametersReply:
    """A logistic-regression share: the perturbed, clipped parameter vector (1, p)."""

    reports: np.ndarray

    @classmethod
    def of(cls, share: Release) -> LrParametersReply:
        return cls(_one_row(share))

    def release(self, steps: CoordinatorSteps) -> Release:
        return self.reports

    def check(self, steps: CoordinatorSteps, limits: PublicLimits) -> None:
        plan = steps.plan
        check_reports(check_matrix(self.reports, "share reports", (1, plan.release_dim)), plan.release_mechanism)


@dataclass(frozen=True)
class NccRowsReply:
    """A nearest-centroid share: perturbed weighted rows (m, d + 1) and their (randomized-response) labels (m,)."""

    reports: np.ndarray
    labels: np.ndarray

    @classmethod
    def of(cls, share: Release) -> NccRowsReply:
        rows = _share_as(share, NccShare)
        return cls(rows.reports, rows.labels)

    def release(self, steps: CoordinatorSteps) -> Release:
        return steps.ncc_reports(self.reports, self.labels, np.zeros((0, 0), dtype=np.int64))

    def check(self, steps: CoordinatorSteps, limits: PublicLimits) -> None:
        plan = steps.plan
        reports = check_matrix(self.reports, "share reports", (None, plan.release_dim))
        check_rows(reports.shape[0], limits, "report rows")
        check_labels(self.labels, reports.shape[0], plan.params.n_classes)
        check_reports(reports, plan.release_mechanism)


@dataclass(frozen=True)
class JointNccReply:
    """A nearest-centroid share under ``labels="joint"``: per row the feature it sampled and one k-RR
    report of its (label, sign) pair in ``0..2K`` (:class:`~privfed.common.learners.ncc_joint.JointLabelEncoding`)."""

    features: np.ndarray  # (m,) int
    reports: np.ndarray  # (m,) int

    @classmethod
    def of(cls, share: Release) -> JointNccReply:
        sampled = _share_as(share, SampledReports)
        return cls(sampled.coordinates.reshape(-1), sampled.reports.reshape(-1))

    def release(self, steps: CoordinatorSteps) -> Release:
        return steps.ncc_reports(self.reports.reshape(-1, 1), np.zeros(0, dtype=np.int64), self.features.reshape(-1, 1))

    def check(self, steps: CoordinatorSteps, limits: PublicLimits) -> None:
        check_rows(int(np.asarray(self.reports).size), limits, "report rows")
        self.release(steps)  # the encoding's shapes, features in range, reports in 0..2K


BoostShareReply = StumpShareReply | SampledStumpShareReply | LrParametersReply | NccRowsReply | JointNccReply


def share_reply_type(plan: ReleasePlan) -> type[BoostShareReply]:
    """The reply a share of a run with these releases is (module docstring)."""
    base = plan.params.base
    if base == "lr":
        return LrParametersReply
    if base == "ncc":
        return NccRowsReply if plan.joint_encoding is None else JointNccReply
    return StumpShareReply if isinstance(plan.share_encoding, RowEncoding) else SampledStumpShareReply


def share_reply(plan: ReleasePlan, share: Release) -> BoostShareReply:
    """An owner's share (:func:`privfed.common.boosting.owner.share`) as its typed reply."""
    return share_reply_type(plan).of(share)


def check_boost_share_reply(spec: BoostShareTask, payload: Payload, limits: PublicLimits) -> None:
    from privfed.common.boosting.coordinator import CoordinatorSteps  # scipy: only once a boosting job runs

    plan = spec.config.releases
    reply = reply_of(payload, share_reply_type(plan))
    try:
        reply.check(CoordinatorSteps(plan), limits)
    except ConfigError as exc:
        raise ContractViolation("shape", str(exc)) from exc


BOOST_SHARE = Kind(
    "boost_share", BoostShareTask, get_args(BoostShareReply), check_boost_share_reply, contribution=True, tasks=("bdt",)
)


@dataclass(frozen=True, eq=False)
class BoostEvaluateTask:
    """The new learner's local weighted error and weight sum, noised and debited, into a secure sum.

    The pair is a release (issue 9, contract 4): every row's weight clipped to the run's
    ``eval_row_bound`` b, noise at ε = ``BoostingParams.eval_round_epsilon`` (row-level DP, LDP for
    a one-row owner; :attr:`privfed.common.boosting.releases.ReleasePlan.evaluation`), debited under :attr:`release_id`
    before the sum's first message. One release per (run, round) -- per run under
    ``eval_groups="disjoint"`` -- whatever ring it is asked for; a re-formed ring gets the same
    noisy pair. ``history.round`` is the 0-based round.
    """

    config: BoostConfig
    history: BoostHistory
    learner: Learner
    ring: RingSpec
    #: Pairwise-mask secure sum: this round's step-2 request (``ring.ring`` and ``ring.peers`` empty,
    #: ``ring.session_id`` the secagg session); None for the ring.
    secagg: InputRequest | None = None

    @property
    def round(self) -> int:
        return self.history.round

    @property
    def release_id(self) -> str:
        """The ledger key of this evaluation release: ``boost-eval:<run id>:<round>`` (or ``:once``)."""
        slot = self.round if self.config.params.eval_groups == "all" else "once"
        return f"boost-eval:{self.config.run_id}:{slot}"

    def ledger_entries(self) -> LedgerEntries:
        return [(self.config.params.eval_round_epsilon, 0.0, "boost-eval")]


def check_boost_evaluate_reply(spec: BoostEvaluateTask, payload: Payload, limits: PublicLimits) -> None:
    """A ring member's join, or the leader's total of the ring: two sums of at most ``n_parties``
    contributions, each within the public ``max_abs``; a pairwise-mask input is checked by the sum."""
    if isinstance(payload, RingJoined | MaskedInput):
        return
    total = reply_of(payload, RingTotal)
    values = check_matrix(total.values, "ring total", (2,))
    top = spec.ring.n_parties * spec.ring.max_abs
    if float(np.max(np.abs(values))) > top:
        raise ContractViolation("out_of_range", f"ring total {values.tolist()} beyond ±{top:.6g} (n × max_abs)")


BOOST_EVALUATE = Kind(
    "boost_evaluate",
    BoostEvaluateTask,
    (RingJoined, RingTotal, MaskedInput),
    check_boost_evaluate_reply,
    tasks=("bdt",),
)
