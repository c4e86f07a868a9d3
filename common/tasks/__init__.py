"""The registry of task kinds (issue 25 item 1) and the messages coordinator and owners exchange.

Every kind is one :class:`~privfed.common.tasks.base.Kind` (its name, spec and reply types, ledger
entries, reply contract), declared once in its family's module and listed here in :data:`DECLARED`.
The other layers attach to a kind by its name, each in one table: ``proto/serde.py`` (its
``to_proto``/``from_proto`` pair), ``privfed.owner.kinds`` (the owner's validate, debits, compute,
fallback). Nothing dispatches on task types any other way; ``tests/unit/test_task_kinds.py`` runs
one contract test over every kind and fails when a kind lacks any part.

These frozen dataclasses are what strategies and the owner core see; ``proto/serde.py`` maps them
to and from protobuf.

The registry is lazy (PEP 562; issue 27, item 3): :data:`DECLARED` knows every kind's name (the
field of ``pb.Task``'s ``oneof`` that carries it) and the family module that declares it without
importing that module, and a family's module -- with the learners and mechanisms its contracts
use -- is imported the first time one of its names is read: an idle node holds none. ``KINDS``,
``BY_SPEC`` and ``BY_NAME`` import every family. Kinds are public, so which families a process has
imported says nothing about any owner's data.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, TypeVar, cast

from privfed.common.errors import ConfigError
from privfed.common.tasks.base import (
    POLICY_DECLINED,
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
    refusal_parts,
    total_budget,
)

if TYPE_CHECKING:
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
    from privfed.common.tasks.feddpdr import (
        PCA_SHARE,
        SVM_SHARE,
        PcaShareReply,
        PcaShareTask,
        SvmShareReply,
        SvmShareTask,
    )
    from privfed.common.tasks.gradient import LR_GRADIENT, LrGradientReply, LrGradientTask, gradient_release_id
    from privfed.common.tasks.join import JOIN, JoinAccepted, JoinTask
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

    KINDS: tuple[Kind[Any], ...]
    BY_SPEC: dict[type, Kind[Any]]
    BY_NAME: dict[str, Kind[Any]]

S = TypeVar("S", bound=TaskSpec)

#: Every task kind, in wire order: its name -> (the family module declaring it, the constant it is bound to).
DECLARED: dict[str, tuple[str, str]] = {
    "ncc_share": ("shares", "NCC_SHARE"),
    "lr_share": ("shares", "LR_SHARE"),
    "pca_share": ("feddpdr", "PCA_SHARE"),
    "svm_share": ("feddpdr", "SVM_SHARE"),
    "boost_share": ("boosting", "BOOST_SHARE"),
    "boost_evaluate": ("boosting", "BOOST_EVALUATE"),
    "ring_message": ("steps", "RING_MESSAGE"),
    "secagg_keys": ("steps", "SECAGG_KEYS"),
    "secagg_unmask": ("steps", "SECAGG_UNMASK"),
    "lr_gradient": ("gradient", "LR_GRADIENT"),
    "nb": ("naive_bayes", "NB_REPORT"),
    "join": ("join", "JOIN"),
}

#: Every other public name -> the module (of this package) that defines it, imported on first read.
_LAZY: dict[str, str] = {
    **{const: family for family, const in DECLARED.values()},
    **dict.fromkeys(
        [
            "BoostEvaluateTask",
            "BoostShareReply",
            "BoostShareTask",
            "JointNccReply",
            "LrParametersReply",
            "NccRowsReply",
            "SampledStumpShareReply",
            "StumpShareReply",
            "boost_release_epsilons",
            "share_reply",
            "share_reply_type",
        ],
        "boosting",
    ),
    "ContractViolation": "contract",
    "PublicLimits": "contract",
    **dict.fromkeys(["PcaShareReply", "PcaShareTask", "SvmShareReply", "SvmShareTask"], "feddpdr"),
    **dict.fromkeys(["JoinAccepted", "JoinTask"], "join"),
    **dict.fromkeys(["LrGradientReply", "LrGradientTask", "gradient_release_id"], "gradient"),
    **dict.fromkeys(["NbReportReply", "NbReportTask", "nb_release_id"], "naive_bayes"),
    **dict.fromkeys(["JointNccShareReply", "LrShareReply", "LrShareTask", "NccShareReply", "NccShareTask"], "shares"),
    **dict.fromkeys(
        [
            "PeerKey",
            "RingJoined",
            "RingMessageTask",
            "RingSpec",
            "RingTotal",
            "SecAggKeysTask",
            "SecAggUnmaskTask",
        ],
        "steps",
    ),
}


def _kind_named(name: str) -> Kind[Any]:
    """The kind called ``name``, importing its family's module if need be; KeyError for no such kind."""
    family, const = DECLARED[name]
    kind = getattr(importlib.import_module(f"{__name__}.{family}"), const)
    return cast("Kind[Any]", kind)


#: Spec type -> kind, for the kinds whose family is imported (a spec object's family always is).
_BY_SPEC: dict[type, Kind[Any]] = {}


def kind_of(spec: S) -> Kind[S]:
    """The kind of a task spec; :class:`ConfigError` for an object that is none."""
    kind = _BY_SPEC.get(type(spec))
    if kind is None:
        # a spec's class lives in its family's module, imported before the object could exist
        family = type(spec).__module__.rpartition(".")[2] if type(spec).__module__.startswith(__name__ + ".") else ""
        for name, (declared_in, _) in DECLARED.items():
            if declared_in == family:
                found = _kind_named(name)
                _BY_SPEC[found.spec] = found
        kind = _BY_SPEC.get(type(spec))
    if kind is None:
        raise ConfigError(f"{type(spec).__name__} is no task kind; known: {sorted(DECLARED)}")
    return cast("Kind[S]", kind)  # _BY_SPEC maps each spec type to the kind declared with it


def check_reply(spec: TaskSpec, payload: Payload, limits: PublicLimits) -> None:
    """Raise :class:`ContractViolation` unless ``payload`` is a refusal, or one of the replies of the
    task's kind that its contract allows."""
    if isinstance(payload, Refusal):
        return
    kind = kind_of(spec)
    if not isinstance(payload, kind.replies):
        from privfed.common.tasks.contract import ContractViolation

        expected = ", ".join(t.__name__ for t in kind.replies) or "no reply of its own"
        raise ContractViolation(
            "wrong_kind", f"a {kind.name} task is answered by {expected}, got {type(payload).__name__}"
        )
    kind.contract(spec, payload, limits)


def __getattr__(name: str) -> Any:
    """PEP 562: a family's names on first read; ``KINDS``/``BY_SPEC``/``BY_NAME`` (every family)."""
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    elif name == "KINDS":
        value = tuple(_kind_named(kind) for kind in DECLARED)
    elif name == "BY_SPEC":
        value = {kind.spec: kind for kind in __getattr__("KINDS")}
    elif name == "BY_NAME":
        value = {kind.name: kind for kind in __getattr__("KINDS")}
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [
    "BOOST_EVALUATE",
    "BOOST_SHARE",
    "JOIN",
    "LR_GRADIENT",
    "LR_SHARE",
    "NB_REPORT",
    "NCC_SHARE",
    "PCA_SHARE",
    "RING_MESSAGE",
    "SECAGG_KEYS",
    "SECAGG_UNMASK",
    "SVM_SHARE",
    "BY_NAME",
    "BY_SPEC",
    "DECLARED",
    "KINDS",
    "POLICY_DECLINED",
    "REFUSAL_CODES",
    "REFUSAL_TEXTS",
    "BoostEvaluateTask",
    "BoostShareReply",
    "BoostShareTask",
    "ContractViolation",
    "JoinAccepted",
    "JoinTask",
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
    "refusal_parts",
    "share_reply",
    "share_reply_type",
    "total_budget",
]
