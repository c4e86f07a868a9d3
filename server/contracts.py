"""The public contract of every owner reply, checked before the reply is used (issue 23, item 1).

An owner is trusted with nothing the coordinator aggregates: a reply is used only if it has the
shape, the value range, the support and the labels that the task's own public parameters allow
an honest owner's release to have. A reply that breaks its contract is never aggregated; the
job excludes that owner and names it in the report under ``rejected_owners`` with a reason code
(:data:`REJECTION_CODES`), and goes on.

One contract per task kind, in :data:`CONTRACTS` keyed by the task spec's type: a pure function
of (task spec, reply payload, :class:`PublicLimits`) that returns None or raises
:class:`ContractViolation`. Ranges are read from the mechanism objects the task names
(``Mechanism.max_abs_output``, and each mechanism's support), never hard-coded here.

What one owner can move (the bound the contracts enforce, tested in ``tests/unit/test_contracts.py``):

* nearest centroid: at most ``max_rows`` reports (``JobConfig.owner_rows_bound``, public), each a
  possible output of the task's mechanism with a label in ``0..K-1``: exactly what an honest
  owner of ``max_rows`` rows could send. A class centroid is a mean of such reports, so one owner
  moves class k's estimated sum by at most ``max_rows * max_abs_output`` per coordinate and its
  count by at most ``max_rows``;
* logistic regression: one parameter vector of the task's width, each value a possible mechanism
  output, so the average of ``n`` owners moves by at most ``2 * max_abs_output / n`` per
  coordinate, as one honest owner's extreme draw could;
* FedDPDR-DPML phase 1: an orthonormal (d, k) basis (a projector of norm 1 whatever it holds)
  weighted by a count no larger than ``max_rows`` plus the count noise's public tail
  (:func:`count_limit`); phase 2: the task's shape, finite (its noise has no public range yet);
* boosting shares: the base learner's share format (rows bounded as for nearest centroid, sampled
  encodings checked by the encodings' own ``reports_of``), values within the share mechanism's range.

The ``2**-20`` output grid of the continuous mechanisms needs no check here: reports travel as
int64 indices on that grid (``proto/serde.py``), so whatever arrives is on it, and a coarser
power-of-two grid is a subset of it. Supports finer than a range are checked where a mechanism
has one: Duchi's reports are ``±B`` only, and Piecewise Algorithm 4 reports at most ``k`` non-zero
values per row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.learners.logistic import n_parameters
from privfed.common.mechanisms import GeometricMechanism, IdentityMechanism, Mechanism, make_mechanism
from privfed.common.mechanisms.base import SNAP_STEP
from privfed.common.mechanisms.piecewise import PiecewiseMultidim
from privfed.common.messages import (
    BoostEvaluateTask,
    BoostShareReply,
    BoostShareTask,
    LrShareReply,
    LrShareTask,
    NccShareReply,
    NccShareTask,
    Payload,
    PcaShareReply,
    PcaShareTask,
    Refusal,
    RingJoined,
    RingTotal,
    SvmShareReply,
    SvmShareTask,
    TaskSpec,
)
from privfed.common.secagg.messages import MaskedInput

#: Why a reply was rejected: the codes the report's ``rejected_owners`` uses.
REJECTION_CODES = {
    "undecodable": "the reply could not be decoded (malformed message, or non-finite values on the wire)",
    "wrong_kind": "the reply is not the kind of release the task asked for",
    "shape": "the reply's shape does not fit the task (columns, rows, dimensions)",
    "too_many_rows": "more rows than the public bound on an owner's rows",
    "not_finite": "the reply holds NaN or infinite values",
    "out_of_range": "values outside the mechanism's public output range or support",
    "label_out_of_range": "labels outside the task's classes",
    "no_answer": "the owner's node stayed connected but never answered within the round timeout",
}
#: Values may pass a mechanism's bound by the wire's rounding to its grid (half a step).
RANGE_TOLERANCE = SNAP_STEP / 2
#: Probability, under the public noise law, that an honest count passes :func:`count_limit`.
COUNT_TAIL = 2.0**-40
#: How far an orthonormal basis' Gram matrix may be from the identity (float rounding of an SVD).
ORTHONORMAL_TOLERANCE = 1e-6


@dataclass(frozen=True)
class PublicLimits:
    """The public configuration a contract needs beyond the task itself.

    ``max_rows``: the bound on the rows one owner holds (``JobConfig.owner_rows_bound``).
    """

    max_rows: int


@dataclass(frozen=True)
class Rejection:
    """An owner's answer to one task that the job does not use: the reason ``code``
    (:data:`REJECTION_CODES`) and a one-line ``detail`` built from the reply and public configuration."""

    task_id: str
    owner_id: str
    code: str
    detail: str

    def line(self) -> str:
        return f"{self.code}: {self.detail}"


class ContractViolation(Exception):
    """A reply broke its task's contract: ``code`` (:data:`REJECTION_CODES`) and a one-line ``detail``."""

    def __init__(self, code: str, detail: str):
        if code not in REJECTION_CODES:
            raise ValueError(f"unknown rejection code {code!r}; one of {sorted(REJECTION_CODES)}")
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def _kind(payload: Payload, kind: type) -> Any:
    if not isinstance(payload, kind):
        raise ContractViolation("wrong_kind", f"expected {kind.__name__}, got {type(payload).__name__}")
    return payload


def _matrix(a: Any, what: str, shape: tuple[int | None, ...]) -> np.ndarray:
    """``a`` as a float64 array of ``shape`` (None: any length there), every value finite."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "iuf":
        raise ContractViolation("shape", f"{what} must be numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != len(shape) or any(want is not None and got != want for got, want in zip(arr.shape, shape)):
        want = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ")"
        raise ContractViolation("shape", f"{what} of shape {arr.shape}, expected {want}")
    if not np.all(np.isfinite(arr)):
        raise ContractViolation("not_finite", f"{what} holds {int(np.sum(~np.isfinite(arr)))} non-finite value(s)")
    return arr


def _rows(n: int, limits: PublicLimits, what: str) -> None:
    if n > limits.max_rows:
        raise ContractViolation(
            "too_many_rows", f"{n} {what}; an owner holds at most {limits.max_rows} rows (public bound)"
        )


def _labels(labels: Any, n: int, n_classes: int) -> None:
    y = np.asarray(labels)
    if y.shape != (n,) or (n and y.dtype.kind not in "iu"):
        raise ContractViolation("shape", f"labels of shape {y.shape} and dtype {y.dtype}, expected ({n},) integers")
    if n and (int(y.min()) < 0 or int(y.max()) >= n_classes):
        raise ContractViolation(
            "label_out_of_range",
            f"labels in [{int(y.min())}, {int(y.max())}], the task's classes are 0..{n_classes - 1}",
        )


def check_reports(reports: np.ndarray, mechanism: Mechanism) -> None:
    """Every report row a possible output of ``mechanism``: within ``max_abs_output``, and on its
    support where it has one finer than a range (module docstring)."""
    if not reports.size:
        return
    bound = float(mechanism.max_abs_output)
    top = float(np.max(np.abs(reports)))
    if top > bound + RANGE_TOLERANCE:
        raise ContractViolation(
            "out_of_range", f"|value| up to {top:.6g}, beyond {type(mechanism).__name__}'s output bound {bound:.6g}"
        )
    if isinstance(mechanism, IdentityMechanism):
        return
    if type(mechanism).__name__ == "DuchiMultidim":  # by name: the Duchi module imports scipy
        if np.any(np.abs(np.abs(reports) - bound) > RANGE_TOLERANCE):
            raise ContractViolation("out_of_range", f"Duchi reports are ±{bound:.6g} only")
    elif isinstance(mechanism, PiecewiseMultidim) and mechanism.k < mechanism.d:
        most = int(np.max(np.count_nonzero(reports, axis=1)))
        if most > mechanism.k:
            raise ContractViolation(
                "out_of_range", f"a row with {most} non-zero values; this mechanism reports {mechanism.k} per row"
            )


def count_limit(max_rows: int, count_epsilon: float) -> int:
    """The largest row count an honest owner's noisy count reaches but with probability :data:`COUNT_TAIL`:
    ``max_rows`` plus the two-sided geometric noise's tail ``t`` with ``P(|Z| > t) <= COUNT_TAIL``
    (``P(|Z| > t) = 2 a^(t+1) / (1 + a)``, ``a = exp(-epsilon)``); ``max_rows`` for an exact count."""
    if math.isinf(count_epsilon):
        return max_rows
    mech = GeometricMechanism(epsilon=count_epsilon)
    tail = math.log(COUNT_TAIL * (1.0 + mech.alpha) / 2.0) / math.log(mech.alpha) - 1.0
    return max_rows + max(0, math.ceil(tail))


# ----------------------------------------------------------------------------- one contract per task kind
def _ncc(spec: NccShareTask, payload: Payload, limits: PublicLimits) -> None:
    reply = _kind(payload, NccShareReply)
    d = spec.bounds.d
    reports = _matrix(reply.reports, "reports", (None, d))
    _rows(reports.shape[0], limits, "report rows")
    _labels(reply.labels, reports.shape[0], spec.n_classes)
    check_reports(reports, make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=d))


def _lr(spec: LrShareTask, payload: Payload, limits: PublicLimits) -> None:
    reply = _kind(payload, LrShareReply)
    p = n_parameters(spec.n_classes, spec.bounds.d)
    reports = _matrix(reply.reports, "parameter vector", (1, p))
    check_reports(reports, make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=p))


def _pca(spec: PcaShareTask, payload: Payload, limits: PublicLimits) -> None:
    reply = _kind(payload, PcaShareReply)
    U = _matrix(reply.subspace, "subspace", (spec.bounds.d, spec.k))
    gap = float(np.max(np.abs(U.T @ U - np.eye(spec.k))))
    if gap > ORTHONORMAL_TOLERANCE:
        raise ContractViolation("out_of_range", f"subspace columns are not orthonormal (|UᵀU - I| = {gap:.3g})")
    top = count_limit(limits.max_rows, spec.count_epsilon)
    if not -top <= int(reply.noisy_count) <= top:
        raise ContractViolation(
            "out_of_range", f"row count {int(reply.noisy_count)} beyond ±{top} (the public row bound and count noise)"
        )


def _svm(spec: SvmShareTask, payload: Payload, limits: PublicLimits) -> None:
    reply = _kind(payload, SvmShareReply)
    k = spec.bounds.d if spec.subspace is None else int(np.asarray(spec.subspace).shape[1])
    _matrix(reply.coef, "classifier release", (spec.n_classes, k + 1))


def _boost_evaluate(spec: BoostEvaluateTask, payload: Payload, limits: PublicLimits) -> None:
    """A ring member's join, or the leader's total of the ring: two sums of at most ``n_parties``
    contributions, each within the public ``max_abs``; a pairwise-mask input is checked by the sum."""
    if isinstance(payload, (RingJoined, MaskedInput)):
        return
    total = _kind(payload, RingTotal)
    values = _matrix(total.values, "ring total", (2,))
    top = spec.ring.n_parties * spec.ring.max_abs
    if float(np.max(np.abs(values))) > top:
        raise ContractViolation("out_of_range", f"ring total {values.tolist()} beyond ±{top:.6g} (n × max_abs)")


def _boost_share(spec: BoostShareTask, payload: Payload, limits: PublicLimits) -> None:
    from privfed.common.boosting.coordinator import CoordinatorSteps  # scipy: only once a boosting job runs

    reply = _kind(payload, BoostShareReply)
    plan = spec.config.releases
    fb, decode = plan.params, CoordinatorSteps(plan)
    reports = _matrix(reply.reports, "share reports", (None, None))
    coordinates = np.asarray(reply.coordinates)
    try:
        if fb.base == "stump":
            if reports.shape[0] != 1:
                raise ContractViolation("shape", f"a stump share is one row per owner, got {reports.shape[0]}")
            decode.stump_reports(reports, coordinates)  # the encoding's own format and domain checks
            encoding = plan.share_encoding
            mechanism = getattr(encoding, "mechanism", None)
            if mechanism is not None:
                check_reports(reports, mechanism)
            return
        if fb.base == "lr":
            _matrix(reports, "share reports", (1, plan.release_dim))
            check_reports(reports, plan.release_mechanism)
            return
        _rows(reports.shape[0], limits, "report rows")
        if plan.joint_encoding is not None:
            decode.ncc_reports(
                reports, reply.labels, coordinates
            )  # joint (label, sign) reports: the encoding checks them
            return
        _matrix(reports, "share reports", (None, plan.release_dim))
        _labels(reply.labels, reports.shape[0], fb.n_classes)
        if coordinates.size:
            raise ContractViolation("shape", "an NCC share with separate labels has no sampled coordinates")
        check_reports(reports, plan.release_mechanism)
    except ConfigError as exc:
        raise ContractViolation("shape", str(exc)) from exc


Contract = Callable[[Any, Payload, PublicLimits], None]

#: The contract of each task kind's reply, keyed by the task spec's type. A kind without an entry
#: (ring and secure-sum steps) is checked by its own state machine, not here.
CONTRACTS: dict[type, Contract] = {
    NccShareTask: _ncc,
    LrShareTask: _lr,
    PcaShareTask: _pca,
    SvmShareTask: _svm,
    BoostShareTask: _boost_share,
    BoostEvaluateTask: _boost_evaluate,
}
#: The task kinds each owner answers on its own: one unanswered by a live node is a stalling owner
#: (``no_answer``). A ring leader's answer waits for the other members, so it is not among them.
ANSWERED_ALONE = (NccShareTask, LrShareTask, PcaShareTask, SvmShareTask, BoostShareTask)


def check_reply(spec: TaskSpec, payload: Payload, limits: PublicLimits) -> None:
    """Raise :class:`ContractViolation` unless ``payload`` is a refusal or a reply ``spec``'s contract allows."""
    if isinstance(payload, Refusal):
        return
    contract = CONTRACTS.get(type(spec))
    if contract is not None:
        contract(spec, payload, limits)
