"""The task-kind registry (issue 25 item 1): one contract test runs for every kind.

A kind is declared once (``privfed.common.tasks.KINDS``); the other layers attach to it by its
name. For every kind the test fails when a part is missing -- its serde pair, its owner-side kind,
its contract, examples of its tasks and of each of its replies, ledger entries of the right form
-- or when a round trip through the wire's bytes changes a task or a reply of it. The registry
must also cover the wire exactly (every ``oneof`` member of ``Task``, ``Result`` and
``BoostShare`` is some kind's), and every wire enum the Python choices it carries, with an unset
or unknown value refused as malformed wherever a task carries one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import numpy as np
import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound
from privfed.common.bounds import Bounds
from privfed.common.errors import RemoteProtocolError
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.stump import Stump
from privfed.common.secagg.boxes import SEAL_OVERHEAD
from privfed.common.secagg.messages import (
    InputRequest,
    KeyAdvert,
    KeyShares,
    MaskedInput,
    SealedShare,
    ShareKeysRequest,
    UnmaskReply,
    UnmaskRequest,
)
from privfed.common.secagg.shamir import SHARE_BYTES
from privfed.common.tasks import (
    BY_NAME,
    KINDS,
    REFUSAL_CODES,
    BoostEvaluateTask,
    BoostShareTask,
    ContractViolation,
    JoinAccepted,
    JoinTask,
    JointNccReply,
    JointNccShareReply,
    Kind,
    LrGradientReply,
    LrGradientTask,
    LrParametersReply,
    LrShareReply,
    LrShareTask,
    NbReportReply,
    NbReportTask,
    NccRowsReply,
    NccShareReply,
    NccShareTask,
    PcaShareReply,
    PcaShareTask,
    PeerKey,
    PublicLimits,
    Refusal,
    Result,
    RingJoined,
    RingMessageTask,
    RingSpec,
    RingTotal,
    SampledStumpShareReply,
    SecAggKeysTask,
    SecAggUnmaskTask,
    StumpShareReply,
    SvmShareReply,
    SvmShareTask,
    Task,
    check_reply,
    kind_of,
)
from privfed.owner.kinds import OWNER_KINDS
from privfed.owner.kinds.base import JoinKind, StepKind, TaskKind
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde

BOUNDS = Bounds(np.array([-1.0, 0.0, 2.0]), np.array([1.0, 16.0, 3.5]))
RING = RingSpec(
    session_id="s1",
    ring=("owner-0.o00000", "owner-1.o00001"),
    frac_bits=24,
    n_parties=2,
    max_abs=10.0,
    peers=(PeerKey("owner-1.o00001", "owner-1", b"p" * 32, b"g" * 64),),
    certificates={"owner-1": b"-----BEGIN CERTIFICATE-----\n"},
)
# Every field away from its default and from the others, so a swapped or dropped field shows.
BOOST_CONFIG = BoostConfig(
    "run-7",
    BoostingParams(
        base="ncc",
        epsilon=1.7,
        mechanism="duchi",
        n_classes=3,
        bounds=BOUNDS,
        n_rounds=5,
        group_size=7,
        n_bins=4,
        weight_bound=2.5,
        labels="rr",
        label_fraction=0.15,
        C=0.75,
        param_bound=1.25,
        eval_fraction=0.35,
        eval_groups="all",
        eval_row_bound=1.5,
        max_owner_rows=1234,
    ),
)
INF_CONFIG = BoostConfig("run-inf", BoostingParams(epsilon=math.inf, n_classes=2, bounds=BOUNDS, n_rounds=2))
STUMP = Stump(2, 3, 3.125, (1, 0), 0.3125)
CENTROIDS = NearestCentroidModel(np.arange(9.0).reshape(3, 3) / 7, np.array([0, 1, 2]))
LINEAR = LinearModel(np.arange(6.0).reshape(2, 3) / 5, np.array([0.5, -0.25]), BOUNDS)
HISTORY = BoostHistory(
    (KeptRound(STUMP, 0.75, 12.5, 100.25), KeptRound(CENTROIDS, 1.5, 3.0, 99.0), KeptRound(LINEAR, 0.25, 7.0, 98.5)),
    round=4,
)
SEALED = SealedShare("owner-0.o00000", "owner-1.o00001", b"\x07" * (SEAL_OVERHEAD + 2 * SHARE_BYTES))

#: Tasks of every kind, by the kind's name.
TASKS: dict[str, list] = {
    "ncc_share": [
        NccShareTask(mechanism="pm", epsilon=1.5, labels="rr", label_epsilon=0.5, n_classes=3, bounds=BOUNDS),
        NccShareTask(
            mechanism="duchi", epsilon=math.inf, labels="clear", label_epsilon=0.0, n_classes=2, bounds=BOUNDS
        ),
        NccShareTask(mechanism="pm", epsilon=2.0, labels="joint", label_epsilon=0.0, n_classes=3, bounds=BOUNDS),
    ],
    "lr_share": [LrShareTask(mechanism="laplace", epsilon=2.0, param_bound=4.0, c=0.5, n_classes=4, bounds=BOUNDS)],
    "pca_share": [
        PcaShareTask(epsilon=0.95, delta=1e-5, k=2, bounds=BOUNDS, count_epsilon=0.05, scaling="ball"),
        PcaShareTask(epsilon=math.inf, delta=0.0, k=3, bounds=BOUNDS, count_epsilon=math.inf, scaling="normalise"),
        PcaShareTask(epsilon=0.95, delta=1e-5, k=2, bounds=BOUNDS, count_epsilon=0.05, scaling="box"),
    ],
    "svm_share": [
        SvmShareTask(1.0, 0.01, 3, BOUNDS, np.arange(6.0).reshape(3, 2) / 7, 0.0, "ovr-huber", "ball"),
        SvmShareTask(1.0, 0.01, 3, BOUNDS, None, 1e-6, "mc-huber", "normalise"),
        SvmShareTask(1.0, 0.01, 3, BOUNDS, None, 1e-6, "centroid", "box"),
        SvmShareTask(1.0, 0.01, 3, BOUNDS, None, 1e-6, "softmax", "ball"),
        SvmShareTask(1.0, 0.01, 3, BOUNDS, None, 1e-6, "centroid", "ball"),
    ],
    "boost_share": [BoostShareTask(config=BOOST_CONFIG, history=HISTORY), BoostShareTask(INF_CONFIG, BoostHistory())],
    "boost_evaluate": [
        BoostEvaluateTask(config=BOOST_CONFIG, history=HISTORY, learner=STUMP, ring=RING),
        BoostEvaluateTask(config=BOOST_CONFIG, history=BoostHistory(round=2), learner=CENTROIDS, ring=RING),
        BoostEvaluateTask(
            config=INF_CONFIG,
            history=HISTORY,
            learner=LINEAR,
            ring=dataclasses.replace(RING, ring=(), peers=()),
            secagg=InputRequest(3, ("owner-0.o00000", "owner-1.o00001"), (SEALED,)),
        ),
    ],
    "ring_message": [RingMessageTask(data=b"\x00sealed\xff")],
    "secagg_keys": [
        SecAggKeysTask("s2", 24, 5, 8.0),
        SecAggKeysTask(
            "s2",
            24,
            5,
            8.0,
            ShareKeysRequest(("owner-0.o00000", "owner-1.o00001"), (KeyAdvert("owner-1.o00001", b"m" * 32, b"x"),), 4),
            RING.peers,
            RING.certificates,
        ),
    ],
    "secagg_unmask": [SecAggUnmaskTask("s2", UnmaskRequest(1, ("owner-0.o00000",), ("owner-1.o00001",)))],
    "lr_gradient": [
        LrGradientTask("hm", 2.5, np.arange(12.0).reshape(3, 4) / 7 - 0.75, 3.0, 3, BOUNDS),
        LrGradientTask("duchi", math.inf, np.array([[0.5, -1.25, 2.0, 0.125]]), 8.0, 2, BOUNDS),
    ],
    "nb": [NbReportTask(3.0, 3, 2, BOUNDS), NbReportTask(math.inf, 5, 3, BOUNDS)],
    "join": [JoinTask()],
}
OWNER = "owner-3.o00003"
#: Replies of every type, by type.
REPLIES: dict[type, list] = {
    Refusal: [Refusal.of(code, "task id 't9'") for code in REFUSAL_CODES],
    NccShareReply: [NccShareReply(reports=np.arange(6.0).reshape(2, 3), labels=np.array([0, 2]))],
    JointNccShareReply: [JointNccShareReply(features=np.array([1, 0, 2]), reports=np.array([6, 0, 3]))],
    LrShareReply: [LrShareReply(reports=np.linspace(-1, 1, 9)[:8].reshape(1, 8))],
    PcaShareReply: [  # a PcaShare decoded with a count off by one used to pass every test; a noisy count may be < 0
        PcaShareReply(subspace=np.eye(3)[:, :2], noisy_count=41),
        PcaShareReply(subspace=np.eye(3)[:, :2], noisy_count=-3),
    ],
    SvmShareReply: [SvmShareReply(coef=np.arange(9.0).reshape(3, 3) / 3)],
    StumpShareReply: [StumpShareReply(reports=np.arange(4.0).reshape(1, 4) / 8)],
    SampledStumpShareReply: [SampledStumpShareReply(np.array([[4, 1, 0]]), np.array([[0, 1, 1, 2**31 - 1]]))],
    LrParametersReply: [LrParametersReply(reports=np.array([[0.25, -1.5, 3.0]]))],
    NccRowsReply: [NccRowsReply(reports=np.arange(8.0).reshape(2, 4) / 8, labels=np.array([1, 0]))],
    JointNccReply: [JointNccReply(features=np.array([2, 0]), reports=np.array([6, 1]))],
    RingJoined: [RingJoined(session_id="s1")],
    RingTotal: [RingTotal(session_id="s1", values=np.array([1.5, -2.25]))],
    KeyAdvert: [KeyAdvert(OWNER, b"m" * 32, b"signature")],
    KeyShares: [KeyShares(OWNER, (SEALED,))],
    MaskedInput: [MaskedInput(OWNER, 2, np.array([1, 2**64 - 1], dtype=np.uint64))],
    UnmaskReply: [UnmaskReply(OWNER, 2, {"owner-0.o00000": b"s" * SHARE_BYTES}, {"owner-1.o00001": b"k"})],
    LrGradientReply: [LrGradientReply(reports=np.arange(-6.0, 6.0).reshape(1, 12) / 4)],
    NbReportReply: [NbReportReply(features=np.array([2]), reports=np.array([[5]]))],
    JoinAccepted: [JoinAccepted()],
}


def assert_same(a, b, path="value"):
    """Field-by-field equality of domain messages (arrays exactly, Bounds by lo/hi, nested dataclasses)."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, Bounds):
        np.testing.assert_array_equal(a.lo, b.lo, err_msg=path)
        np.testing.assert_array_equal(a.hi, b.hi, err_msg=path)
    elif isinstance(a, np.ndarray):
        assert a.shape == b.shape, f"{path}: shape {a.shape} != {b.shape}"
        np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, BoostConfig):
        assert a == b, path
    elif hasattr(a, "__dict__"):  # a learner model (NearestCentroidModel, LinearModel): its attributes
        assert_same(vars(a), vars(b), path)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def over_the_wire(task: Task) -> Task:
    return serde.task_from_proto(pb.Task.FromString(serde.task_to_proto(task).SerializeToString()))


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_is_declared_whole_and_survives_the_wire(kind: Kind) -> None:
    assert BY_NAME[kind.name] is kind and dataclasses.is_dataclass(kind.spec) and callable(kind.contract)
    assert kind.name in serde.TASKS, f"{kind.name}: no serde pair (proto/serde.py TASKS)"
    assert kind.name in OWNER_KINDS and OWNER_KINDS[kind.name].kind is kind, f"{kind.name}: no owner kind"
    releases = isinstance(OWNER_KINDS[kind.name], TaskKind)
    assert releases or isinstance(OWNER_KINDS[kind.name], StepKind | JoinKind)
    assert TASKS.get(kind.name), f"{kind.name}: no example tasks here"
    for spec in TASKS[kind.name]:
        assert kind_of(spec) is kind
        entries = spec.ledger_entries()
        assert all(
            isinstance(e, float | int) and isinstance(d, float | int) and isinstance(p, str) for e, d, p in entries
        )
        assert bool(entries) == releases, f"{kind.name}: a release debits, a secure sum's step or a join does not"
        task = Task("t1", "owner-0.o00002", "r1", spec)
        assert_same(over_the_wire(task), task)
    for reply_type in kind.replies:
        assert reply_type in serde.REPLIES, f"{kind.name}: no serde pair for its reply {reply_type.__name__}"
        assert REPLIES.get(reply_type), f"{kind.name}: no example of its reply {reply_type.__name__}"


@pytest.mark.parametrize("payload", [p for ps in REPLIES.values() for p in ps], ids=lambda p: type(p).__name__)
def test_every_reply_survives_the_wire(payload) -> None:
    result = Result("t9", OWNER, payload)
    back = serde.result_from_proto(pb.Result.FromString(serde.result_to_proto(result).SerializeToString()))
    assert_same(back, result)


def _oneof(message: type[Message]) -> set[str]:
    return {f.name for f in message.DESCRIPTOR.oneofs_by_name["kind"].fields}


def test_the_registry_covers_the_wire_exactly() -> None:
    assert {k.name for k in KINDS} == _oneof(pb.Task) == set(serde.TASKS)
    replies = {t for k in KINDS for t in k.replies} | {Refusal}
    assert replies == set(serde.REPLIES) == set(REPLIES)
    assert {p.field for p in serde.REPLIES.values()} == _oneof(pb.Result)
    boost = BY_NAME["boost_share"].replies
    fields = {serde.result_to_proto(Result("t", OWNER, REPLIES[t][0])).boost_share.WhichOneof("kind") for t in boost}
    assert fields == _oneof(pb.BoostShare)


def test_a_reply_of_another_kind_breaks_the_contract() -> None:
    limits = PublicLimits(max_rows=10)
    for kind in KINDS:
        spec = TASKS[kind.name][0]
        for reply_type, examples in REPLIES.items():
            if reply_type is Refusal:
                check_reply(spec, examples[0], limits)  # a refusal is always an answer
            elif reply_type not in kind.replies:
                with pytest.raises(ContractViolation) as err:
                    check_reply(spec, examples[0], limits)
                assert err.value.code == "wrong_kind", (kind.name, reply_type)


def test_every_wire_enum_carries_exactly_the_python_choices() -> None:
    for enum in serde.wire_enums():
        numbers = set(pb.DESCRIPTOR.enum_types_by_name[enum.name].values_by_number) - {0}
        assert set(enum.values) == set(enum.choices), (
            f"{enum.name}: no wire value for {set(enum.choices) - set(enum.values)}"
        )
        assert set(enum.values.values()) == numbers, f"{enum.name}: wire values Python does not know"


def _enum_fields(message: Message, path: str = "") -> Iterator[tuple[Message, FieldDescriptor, str]]:
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_ENUM and not field.is_repeated:
            yield message, field, f"{path}{field.name}"
        elif field.type == FieldDescriptor.TYPE_MESSAGE and not field.is_repeated:
            yield from _enum_fields(value, f"{path}{field.name}.")


def test_no_enum_has_a_silent_default_on_the_wire() -> None:
    """Wherever a task carries a choice, an unset (0) or unknown one refuses the task; and every enum
    field of every example is set (serde forgot none)."""
    seen = set()
    for kind in KINDS:
        for spec in TASKS[kind.name]:
            msg = serde.task_to_proto(Task("t", "owner-0.o00002", "r", spec))
            for parent, field, path in list(_enum_fields(msg)):
                seen.add(f"{field.containing_type.name}.{field.name}")
                kept = getattr(parent, field.name)
                for value in (0, 1000):
                    setattr(parent, field.name, value)
                    task, refusal = serde.task_or_refusal(msg)
                    assert task is None and refusal.payload.code == "invalid_task", (path, value)
                    assert field.name in refusal.payload.message, (path, refusal.payload.message)
                setattr(parent, field.name, kept)
    declared = {
        f"{m.name}.{f.name}"
        for m in pb.DESCRIPTOR.message_types_by_name.values()
        for f in m.fields
        if f.type == FieldDescriptor.TYPE_ENUM and m.name not in ("Refusal",)
    }
    assert seen == declared
    refusal = serde.result_to_proto(Result("t", OWNER, Refusal.of("policy")))
    for value in (0, 1000):
        refusal.refusal.code = value
        with pytest.raises(RemoteProtocolError, match="refusal code"):
            serde.result_from_proto(refusal)
