"""Pairs of ``x_to_proto`` / ``x_from_proto`` between domain messages and protobuf.

The only place that knows both worlds (STYLE rule 10). ``*_from_proto`` validates what a
peer sent and raises :class:`RemoteProtocolError` on anything malformed.

A task travels in ``pb.Task``'s ``oneof``, under its kind's name (``common/tasks``): :data:`TASKS`
holds one serde pair per kind, keyed by that name. A reply travels in ``pb.Result``'s ``oneof``:
:data:`REPLIES` holds one pair per reply type. Both are dictionary lookups; the families' pairs
live in ``serde_shares``, ``serde_boosting`` and ``serde_steps``, the arrays and enums they are
built from in ``serde_arrays``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.tasks import REFUSAL_CODES, OwnerInfo, Payload, Refusal, Result, Task, kind_of
from privfed.proto import privfed_pb2 as pb
from privfed.proto.serde_arrays import (
    GRID_BITS,
    MAX_MATRIX_VALUES,
    LastEncoded,
    WireEnum,
    bounds_from_proto,
    bounds_to_proto,
    decoded_once,
    matrix_from_proto,
    matrix_to_proto,
    reports_from_proto,
    reports_to_proto,
)

if TYPE_CHECKING:
    from privfed.proto.serde_boosting import (
        boost_config_from_proto,
        boost_config_to_proto,
        boost_history_from_proto,
        boost_history_to_proto,
        kept_round_to_proto,
        learner_from_proto,
        learner_to_proto,
    )

    TASKS: Mapping[str, Pair]
    REPLIES: Mapping[type, Pair]

#: Names of ``serde_boosting`` this module re-exports, imported on first read (PEP 562).
_BOOSTING_NAMES = frozenset(
    {
        "boost_config_from_proto",
        "boost_config_to_proto",
        "boost_history_from_proto",
        "boost_history_to_proto",
        "kept_round_to_proto",
        "learner_from_proto",
        "learner_to_proto",
    }
)

__all__ = [
    "GRID_BITS",
    "MAX_MATRIX_VALUES",
    "REPLIES",
    "TASKS",
    "boost_config_from_proto",
    "boost_config_to_proto",
    "boost_history_from_proto",
    "boost_history_to_proto",
    "bounds_from_proto",
    "bounds_to_proto",
    "kept_round_to_proto",
    "learner_from_proto",
    "learner_to_proto",
    "matrix_from_proto",
    "matrix_to_proto",
    "owner_info_from_proto",
    "owner_info_to_proto",
    "reports_from_proto",
    "reports_to_proto",
    "result_from_proto",
    "result_to_proto",
    "task_from_proto",
    "task_or_refusal",
    "task_to_proto",
    "wire_enums",
]


def owner_info_to_proto(o: OwnerInfo) -> pb.OwnerInfo:
    return pb.OwnerInfo(owner_id=o.owner_id, x25519_public_key=o.x25519_public_key, key_signature=o.key_signature)


def owner_info_from_proto(m: pb.OwnerInfo) -> OwnerInfo:
    if not m.owner_id:
        raise RemoteProtocolError("owner_id is empty")
    return OwnerInfo(
        owner_id=m.owner_id, x25519_public_key=bytes(m.x25519_public_key), key_signature=bytes(m.key_signature)
    )


REFUSAL_CODE = WireEnum(pb.RefusalCode, REFUSAL_CODES)


def refusal_to_proto(p: Refusal) -> pb.Refusal:
    return pb.Refusal(code=REFUSAL_CODE.to_proto(p.code), message=p.message, accused=p.accused)


#: The most characters of a refusal's message a peer's answer keeps: an honest owner sends its code's fixed
#: text and a short detail (contract 3); the coordinator puts the message in a job's report and log.
MAX_REFUSAL_MESSAGE = 1000


def refusal_from_proto(m: pb.Refusal, owner_id: str) -> Refusal:
    """A peer's refusal: its message cut to :data:`MAX_REFUSAL_MESSAGE` characters on one line (control
    characters become spaces), so a hostile node neither fills a report nor writes lines of its own to a log."""
    text = m.message[:MAX_REFUSAL_MESSAGE]
    message = "".join(" " if ch.isspace() or not ch.isprintable() else ch for ch in text)
    code = REFUSAL_CODE.from_proto(m.code, "refusal code")
    accused = m.accused if code == "unopened" else ""  # an id, checked by the coordinator against the run's graph
    if len(accused) > MAX_REFUSAL_MESSAGE:
        raise RemoteProtocolError(f"a refusal names an owner of {len(accused)} characters")
    return Refusal(code=code, message=message, accused=accused)


def wire_enums() -> list[WireEnum[Any]]:
    """Every enum of the wire and the Python choices it carries (``tests/unit/test_task_kinds.py``)."""
    from privfed.proto import serde_boosting as boosting
    from privfed.proto import serde_shares as shares

    return [
        REFUSAL_CODE,
        shares.SVM_MODEL,
        shares.ROW_SCALING,
        shares.GRADIENT_MECHANISM,
        *boosting.boost_enums().values(),
    ]


@dataclass(frozen=True)
class Pair:
    """One serde pair: the field of the parent message's ``oneof`` and the two directions.

    A reply's ``from_proto`` also takes the answering owner's id (a secure sum's replies speak for it).
    """

    field: str
    to_proto: Callable[[Any], Message]
    from_proto: Callable[..., Any]


def _shared(
    field: str, message: type[Message], to_proto: Callable[[Any], Message], from_proto: Callable[..., Any]
) -> Pair:
    """The pair of a kind whose spec is the same for every owner of a round (a share): the coordinator
    encodes it once per spec object, a node decodes it once per distinct message (issue 27)."""
    return Pair(field, LastEncoded(to_proto), decoded_once(message, from_proto))


@cache
def _tables() -> tuple[Mapping[str, Pair], Mapping[type, Pair], Mapping[str, Callable[..., Any]]]:
    """(:data:`TASKS`, :data:`REPLIES`, reply decoders by field), built on the first task or result
    encoded or decoded: they import every kind's family (``privfed.common.tasks``), which an idle
    node does not hold (issue 27). Whatever the first message is -- a known kind, an unknown one, a
    malformed one -- it takes this same step once; kinds are public, so nothing it shows is an owner's."""
    from privfed.common.secagg.messages import KeyAdvert, KeyShares, MaskedInput, UnmaskReply
    from privfed.common.tasks.boosting import (
        JointNccReply,
        LrParametersReply,
        NccRowsReply,
        SampledStumpShareReply,
        StumpShareReply,
    )
    from privfed.common.tasks.feddpdr import PcaShareReply, SvmShareReply
    from privfed.common.tasks.gradient import LrGradientReply
    from privfed.common.tasks.join import JoinAccepted, JoinTask
    from privfed.common.tasks.naive_bayes import NbReportReply
    from privfed.common.tasks.shares import JointNccShareReply, LrShareReply, NccShareReply
    from privfed.common.tasks.steps import RingJoined, RingTotal
    from privfed.proto import serde_boosting as boosting
    from privfed.proto import serde_shares as shares
    from privfed.proto import serde_steps as steps

    def _share(to_proto: Callable[[Any], Message]) -> Pair:
        return Pair("boost_share", to_proto, boosting.boost_share_from_proto)

    #: Kind name -> the serde pair of its task spec (the field of ``pb.Task``'s ``oneof`` is the name).
    tasks: Mapping[str, Pair] = {
        p.field: p
        for p in (
            _shared("ncc_share", pb.NccShareTask, shares.ncc_task_to_proto, shares.ncc_task_from_proto),
            _shared("lr_share", pb.LrShareTask, shares.lr_task_to_proto, shares.lr_task_from_proto),
            _shared("pca_share", pb.PcaShareTask, shares.pca_task_to_proto, shares.pca_task_from_proto),
            _shared("svm_share", pb.SvmShareTask, shares.svm_task_to_proto, shares.svm_task_from_proto),
            Pair("boost_share", boosting.boost_share_task_to_proto, boosting.boost_share_task_from_proto),
            Pair("boost_evaluate", boosting.boost_evaluate_to_proto, boosting.boost_evaluate_from_proto),
            Pair("ring_message", steps.ring_message_to_proto, steps.ring_message_from_proto),
            Pair("secagg_keys", steps.secagg_keys_to_proto, steps.secagg_keys_from_proto),
            Pair("secagg_unmask", steps.secagg_unmask_to_proto, steps.secagg_unmask_from_proto),
            _shared("lr_gradient", pb.LrGradientTask, shares.gradient_task_to_proto, shares.gradient_task_from_proto),
            _shared("nb", pb.NbReportTask, shares.nb_task_to_proto, shares.nb_task_from_proto),
            Pair("join", lambda _: pb.JoinTask(), lambda _: JoinTask()),  # nothing in either: the job is announced
        )
    }

    #: Reply type -> its serde pair (the field of ``pb.Result``'s ``oneof``). A boosting share's five
    #: types share one field, a ``BoostShare`` whose own ``oneof`` says which (``serde_boosting``).
    replies: Mapping[type, Pair] = {
        Refusal: Pair("refusal", refusal_to_proto, refusal_from_proto),
        NccShareReply: Pair("ncc_share", shares.ncc_reply_to_proto, shares.ncc_reply_from_proto),
        JointNccShareReply: Pair("ncc_share", shares.ncc_reply_to_proto, shares.ncc_reply_from_proto),
        LrShareReply: Pair("lr_share", shares.lr_reply_to_proto, shares.lr_reply_from_proto),
        PcaShareReply: Pair("pca_share", shares.pca_reply_to_proto, shares.pca_reply_from_proto),
        SvmShareReply: Pair("svm_share", shares.svm_reply_to_proto, shares.svm_reply_from_proto),
        StumpShareReply: _share(boosting.stump_share_to_proto),
        SampledStumpShareReply: _share(boosting.sampled_stump_share_to_proto),
        LrParametersReply: _share(boosting.lr_parameters_to_proto),
        NccRowsReply: _share(boosting.ncc_rows_to_proto),
        JointNccReply: _share(boosting.joint_ncc_to_proto),
        RingJoined: Pair("ring_joined", steps.ring_joined_to_proto, steps.ring_joined_from_proto),
        RingTotal: Pair("ring_total", steps.ring_total_to_proto, steps.ring_total_from_proto),
        KeyAdvert: Pair("key_advert", steps.key_advert_to_proto, steps.key_advert_from_proto),
        KeyShares: Pair("key_shares", steps.key_shares_to_proto, steps.key_shares_from_proto),
        MaskedInput: Pair("masked_input", steps.masked_input_to_proto, steps.masked_input_from_proto),
        UnmaskReply: Pair("unmask_reply", steps.unmask_reply_to_proto, steps.unmask_reply_from_proto),
        LrGradientReply: Pair("lr_gradient", shares.gradient_reply_to_proto, shares.gradient_reply_from_proto),
        NbReportReply: Pair("nb", shares.nb_reply_to_proto, shares.nb_reply_from_proto),
        JoinAccepted: Pair("join_accepted", lambda _: pb.JoinAccepted(), lambda _m, _owner: JoinAccepted()),
    }
    return tasks, replies, {p.field: p.from_proto for p in replies.values()}


def task_to_proto(t: Task) -> pb.Task:
    msg = pb.Task(task_id=t.task_id, owner_id=t.owner_id, round_id=t.round_id)
    pair = _tables()[0][kind_of(t.spec).name]
    getattr(msg, pair.field).CopyFrom(pair.to_proto(t.spec))
    return msg


def task_from_proto(m: pb.Task) -> Task:
    kind = m.WhichOneof("kind")
    pair = _tables()[0].get(kind or "")
    if pair is None:
        raise RemoteProtocolError(f"task {m.task_id!r} has no known kind ({kind!r})")
    try:
        spec = pair.from_proto(getattr(m, pair.field))
    except ConfigError as exc:
        raise RemoteProtocolError(f"task {m.task_id!r} is invalid: {exc}") from exc
    return Task(task_id=m.task_id, owner_id=m.owner_id, round_id=m.round_id, spec=spec)


def task_or_refusal(m: pb.Task) -> tuple[Task | None, Result | None]:
    """Decode ONE task alone (issue 9, item 7): ``(task, None)``, or ``(None, refusal)`` for a task
    that cannot be decoded, so one malformed task never costs the rest of a batch.

    The refusal (code ``invalid_task``) names what was wrong with the task's own fields; nothing
    of the owner's enters it. Any exception a hostile message can provoke in decoding (odd shapes,
    values a constructor rejects) is caught here.
    """
    try:
        return task_from_proto(m), None
    except RemoteProtocolError as exc:
        detail = str(exc)
    except Exception as exc:  # noqa: BLE001 - a peer's bytes must never take the node down
        detail = f"task {m.task_id!r} could not be decoded ({type(exc).__name__})"
    return None, Result(m.task_id, m.owner_id, Refusal.of("invalid_task", detail))


def payload_to_proto(payload: Payload) -> tuple[str, Message]:
    """The field of ``pb.Result``'s ``oneof`` and the message of a reply's payload; a :class:`ConfigError` if
    a value is outside the wire's range (``serde_arrays.reports_to_proto``)."""
    pair = _tables()[1].get(type(payload))
    if pair is None:
        raise TypeError(f"no wire form for payload {type(payload).__name__}")
    return pair.field, pair.to_proto(payload)


def result_to_proto(r: Result) -> pb.Result:
    msg = pb.Result(task_id=r.task_id, owner_id=r.owner_id)
    field, payload = payload_to_proto(r.payload)
    getattr(msg, field).CopyFrom(payload)
    return msg


def result_from_proto(m: pb.Result) -> Result:
    kind = m.WhichOneof("kind")
    decode = _tables()[2].get(kind or "")
    if decode is None:
        raise RemoteProtocolError(f"result for task {m.task_id!r} has no known kind ({kind!r})")
    try:
        payload = decode(getattr(m, kind or ""), m.owner_id)
    except ConfigError as exc:
        raise RemoteProtocolError(str(exc)) from exc
    return Result(task_id=m.task_id, owner_id=m.owner_id, payload=payload)


def __getattr__(name: str) -> Any:
    """PEP 562: :data:`TASKS`, :data:`REPLIES`, the families' modules and ``serde_boosting``'s pairs on first read (issue 27)."""
    if name in ("TASKS", "REPLIES"):
        return _tables()[0 if name == "TASKS" else 1]
    if name in _BOOSTING_NAMES:
        from privfed.proto import serde_boosting

        return getattr(serde_boosting, name)
    if name in ("shares", "boosting", "steps"):  # the families' modules, as this module named them
        return importlib.import_module(f"privfed.proto.serde_{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
