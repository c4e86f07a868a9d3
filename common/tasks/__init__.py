"""The registry of task kinds (issue 25 item 1) and the messages coordinator and owners exchange.

Every kind is one :class:`~privfed.common.tasks.base.Kind` (its name, spec and reply types, ledger
entries, reply contract), declared once in its family's module and listed here in :data:`KINDS`.
The other layers attach to a kind by its name, each in one table: ``proto/serde.py`` (its
``to_proto``/``from_proto`` pair), ``privfed.owner.kinds`` (the owner's validate, debits, compute,
fallback). Nothing dispatches on task types any other way; ``tests/unit/test_task_kinds.py`` runs
one contract test over every kind and fails when a kind lacks any part.

These frozen dataclasses are what strategies and the owner core see; ``proto/serde.py`` maps them
to and from protobuf. The boosting types import scipy only once a boosting task needs them.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from privfed.common.errors import ConfigError
from privfed.common.tasks.base import (
    REFUSAL_CODES,
    REFUSAL_TEXTS,
    Kind,
    LedgerEntries,
    OwnerInfo,
    Payload,
    Refusal,
    Result,
    Task,
    TaskSpec,
    total_budget,
)
from privfed.common.tasks.boosting import (
    BOOST_EVALUATE,
    BOOST_SHARE,
    BoostEvaluateTask,
    BoostShareReply,
    BoostShareTask,
    JointNccReply,
    LrParametersReply,
    NccRowsReply,
    SampledStumpShareReply,
    StumpShareReply,
    boost_release_epsilons,
    share_reply,
    share_reply_type,
)
from privfed.common.tasks.contract import ContractViolation, PublicLimits
from privfed.common.tasks.feddpdr import PCA_SHARE, SVM_SHARE, PcaShareReply, PcaShareTask, SvmShareReply, SvmShareTask
from privfed.common.tasks.gradient import LR_GRADIENT, LrGradientReply, LrGradientTask, gradient_release_id
from privfed.common.tasks.naive_bayes import NB_REPORT, NbReportReply, NbReportTask, nb_release_id
from privfed.common.tasks.shares import (
    LR_SHARE,
    NCC_SHARE,
    JointNccShareReply,
    LrShareReply,
    LrShareTask,
    NccShareReply,
    NccShareTask,
)
from privfed.common.tasks.steps import (
    RING_MESSAGE,
    SECAGG_KEYS,
    SECAGG_UNMASK,
    PeerKey,
    RingJoined,
    RingMessageTask,
    RingSpec,
    RingTotal,
    SecAggKeysTask,
    SecAggUnmaskTask,
)

S = TypeVar("S", bound=TaskSpec)

#: Every task kind, in wire order.
KINDS: tuple[Kind[Any], ...] = (
    NCC_SHARE,
    LR_SHARE,
    PCA_SHARE,
    SVM_SHARE,
    BOOST_SHARE,
    BOOST_EVALUATE,
    RING_MESSAGE,
    SECAGG_KEYS,
    SECAGG_UNMASK,
    LR_GRADIENT,
    NB_REPORT,
)
BY_SPEC: dict[type, Kind[Any]] = {kind.spec: kind for kind in KINDS}
BY_NAME: dict[str, Kind[Any]] = {kind.name: kind for kind in KINDS}


def kind_of(spec: S) -> Kind[S]:
    """The kind of a task spec; :class:`ConfigError` for an object that is none."""
    kind = BY_SPEC.get(type(spec))
    if kind is None:
        raise ConfigError(f"{type(spec).__name__} is no task kind; known: {sorted(BY_NAME)}")
    return cast("Kind[S]", kind)  # BY_SPEC maps each spec type to the kind declared with it


def check_reply(spec: TaskSpec, payload: Payload, limits: PublicLimits) -> None:
    """Raise :class:`ContractViolation` unless ``payload`` is a refusal, or one of the replies of the
    task's kind that its contract allows."""
    if isinstance(payload, Refusal):
        return
    kind = kind_of(spec)
    if not isinstance(payload, kind.replies):
        expected = ", ".join(t.__name__ for t in kind.replies) or "no reply of its own"
        raise ContractViolation(
            "wrong_kind", f"a {kind.name} task is answered by {expected}, got {type(payload).__name__}"
        )
    kind.contract(spec, payload, limits)


__all__ = [
    "BY_NAME",
    "BY_SPEC",
    "KINDS",
    "REFUSAL_CODES",
    "REFUSAL_TEXTS",
    "BoostEvaluateTask",
    "BoostShareReply",
    "BoostShareTask",
    "ContractViolation",
    "JointNccReply",
    "JointNccShareReply",
    "Kind",
    "LedgerEntries",
    "LrGradientReply",
    "LrGradientTask",
    "LrParametersReply",
    "LrShareReply",
    "LrShareTask",
    "NbReportReply",
    "NbReportTask",
    "NccRowsReply",
    "NccShareReply",
    "NccShareTask",
    "OwnerInfo",
    "Payload",
    "PcaShareReply",
    "PcaShareTask",
    "PeerKey",
    "PublicLimits",
    "Refusal",
    "Result",
    "RingJoined",
    "RingMessageTask",
    "RingSpec",
    "RingTotal",
    "SampledStumpShareReply",
    "SecAggKeysTask",
    "SecAggUnmaskTask",
    "StumpShareReply",
    "SvmShareReply",
    "SvmShareTask",
    "Task",
    "TaskSpec",
    "boost_release_epsilons",
    "check_reply",
    "gradient_release_id",
    "kind_of",
    "nb_release_id",
    "share_reply",
    "share_reply_type",
    "total_budget",
]
