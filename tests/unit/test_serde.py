"""Every x_to_proto / x_from_proto pair round-trips; malformed peer input is rejected."""

import dataclasses
import math

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound
from privfed.common.bounds import Bounds
from privfed.common.errors import RemoteProtocolError
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.ncc import NearestCentroidModel
from privfed.common.learners.stump import Stump
from privfed.common.messages import (
    REFUSAL_CODES,
    BoostEvaluateTask,
    BoostShareReply,
    BoostShareTask,
    LrShareReply,
    LrShareTask,
    NccShareReply,
    NccShareTask,
    OwnerInfo,
    PcaShareReply,
    PcaShareTask,
    PeerKey,
    Refusal,
    Result,
    RingJoined,
    RingMessageTask,
    RingSpec,
    RingTotal,
    SvmShareReply,
    SvmShareTask,
    Task,
)
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde

BOUNDS = Bounds(np.array([-1.0, 0.0, 2.0]), np.array([1.0, 16.0, 3.5]))


def roundtrip(to, frm, value):
    wire = to(value).SerializeToString()
    msg = type(to(value))()
    msg.ParseFromString(wire)
    return frm(msg)


def test_matrix_roundtrip_is_bit_exact(rng):
    a = rng.standard_normal((7, 3))
    np.testing.assert_array_equal(roundtrip(serde.matrix_to_proto, serde.matrix_from_proto, a), a)


def test_bounds_roundtrip():
    b = roundtrip(serde.bounds_to_proto, serde.bounds_from_proto, BOUNDS)
    np.testing.assert_array_equal(b.lo, BOUNDS.lo)
    np.testing.assert_array_equal(b.hi, BOUNDS.hi)


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
    elif hasattr(a, "__dict__"):  # a learner model (NearestCentroidModel, LinearModel): its attributes
        assert_same(vars(a), vars(b), path)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def test_owner_info_roundtrip_carries_no_row_count():
    info = OwnerInfo("owner-1.o00001", b"k" * 32, b"s" * 64)
    assert roundtrip(serde.owner_info_to_proto, serde.owner_info_from_proto, info) == info
    assert "n_rows" not in pb.OwnerInfo.DESCRIPTOR.fields_by_name
    assert [f.name for f in dataclasses.fields(OwnerInfo)] == ["owner_id", "x25519_public_key", "key_signature"]


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

TASK_SPECS = [
    NccShareTask(mechanism="pm", epsilon=1.5, labels="rr", label_epsilon=0.5, n_classes=3, bounds=BOUNDS),
    NccShareTask(mechanism="duchi", epsilon=math.inf, labels="clear", label_epsilon=0.0, n_classes=2, bounds=BOUNDS),
    LrShareTask(mechanism="laplace", epsilon=2.0, param_bound=4.0, c=0.5, n_classes=4, bounds=BOUNDS),
    PcaShareTask(epsilon=0.95, delta=1e-5, k=2, bounds=BOUNDS, count_epsilon=0.05, scaling="ball"),
    PcaShareTask(epsilon=math.inf, delta=0.0, k=3, bounds=BOUNDS, count_epsilon=math.inf, scaling="normalise"),
    SvmShareTask(1.0, 0.01, 3, BOUNDS, np.arange(6.0).reshape(3, 2) / 7, 0.0, "ovr-huber", "ball"),
    SvmShareTask(1.0, 0.01, 3, BOUNDS, None, 1e-6, "mc-huber", "normalise"),
    BoostShareTask(config=BOOST_CONFIG, history=HISTORY),
    BoostShareTask(config=INF_CONFIG, history=BoostHistory()),
    BoostEvaluateTask(config=BOOST_CONFIG, history=HISTORY, learner=STUMP, ring=RING),
    BoostEvaluateTask(config=BOOST_CONFIG, history=BoostHistory(round=2), learner=CENTROIDS, ring=RING),
    BoostEvaluateTask(config=INF_CONFIG, history=HISTORY, learner=LINEAR, ring=RING),
    RingMessageTask(data=b"\x00sealed\xff"),
    SvmShareTask(1.0, 0.01, 3, BOUNDS, None, 1e-6, "softmax", "ball"),  # appended: tests index the ones above
    SvmShareTask(1.0, 0.01, 3, BOUNDS, None, 1e-6, "centroid", "ball"),
]


@pytest.mark.parametrize("spec", TASK_SPECS, ids=lambda s: type(s).__name__)
def test_task_roundtrip(spec):
    task = Task("t1", "owner-0.o00002", "r1", spec)
    back = roundtrip(serde.task_to_proto, serde.task_from_proto, task)
    assert_same(back, task)


PAYLOADS = [
    *(Refusal.of(code, "task id 't9'") for code in REFUSAL_CODES),
    NccShareReply(reports=np.arange(6.0).reshape(2, 3), labels=np.array([0, 2])),
    LrShareReply(reports=np.linspace(-1, 1, 9)[:8].reshape(1, 8)),
    PcaShareReply(subspace=np.eye(3)[:, :2], noisy_count=41),
    PcaShareReply(subspace=np.eye(3)[:, :2], noisy_count=-3),  # a noisy count may be negative
    SvmShareReply(coef=np.arange(9.0).reshape(3, 3) / 3),
    BoostShareReply(reports=np.arange(4.0).reshape(1, 4) / 8, labels=np.zeros(0, dtype=np.int64)),
    BoostShareReply(reports=np.arange(8.0).reshape(2, 4) / 8, labels=np.array([1, 0])),
    RingJoined(session_id="s1"),
    RingTotal(session_id="s1", values=np.array([1.5, -2.25])),
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: type(p).__name__)
def test_result_roundtrip(payload):
    """Every field survives, exactly (values on the 2^-20 grid travel exactly); a PcaShare decoded
    with a count off by one used to pass every test."""
    result = Result("t9", "owner-3.o00003", payload)
    assert_same(roundtrip(serde.result_to_proto, serde.result_from_proto, result), result)


def test_one_malformed_task_is_refused_alone():
    good = serde.task_to_proto(Task("ok", "owner-0.o00000", "r", TASK_SPECS[2]))
    bad = serde.task_to_proto(Task("bad", "owner-0.o00001", "r", TASK_SPECS[2]))
    bad.lr_share.bounds.data = bad.lr_share.bounds.data[:-8]  # a Matrix with a wrong byte count
    deep = serde.task_to_proto(Task("deep", "owner-0.o00002", "r", TASK_SPECS[7]))
    deep.boost_share.history.kept[1].alpha = math.nan  # a boosting message a constructor rejects
    task, refusal = serde.task_or_refusal(good)
    assert refusal is None and task.task_id == "ok"
    for m in (bad, deep, pb.Task(task_id="empty", owner_id="owner-0.o00003")):
        task, refusal = serde.task_or_refusal(m)
        assert task is None and (refusal.task_id, refusal.owner_id) == (m.task_id, m.owner_id)
        assert refusal.payload.code == "invalid_task"
    assert "needs 48 bytes, got 40" in serde.task_or_refusal(bad)[1].payload.message


def test_reports_are_rounded_to_the_grid_and_exact_on_it(rng):
    on_grid = np.rint(rng.standard_normal((4, 5)) * 2**20) / 2**20 * 100
    back = serde.reports_from_proto(serde.reports_to_proto(on_grid))
    np.testing.assert_array_equal(back, on_grid)
    off_grid = rng.standard_normal(10)
    assert np.max(np.abs(serde.reports_from_proto(serde.reports_to_proto(off_grid)) - off_grid)) <= 2.0**-21


def test_non_finite_reports_cannot_be_sent():
    with pytest.raises(ValueError, match="finite"):
        serde.reports_to_proto(np.array([1.0, np.inf]))


def test_matrix_with_wrong_byte_count_is_rejected():
    with pytest.raises(RemoteProtocolError, match="needs 48 bytes"):
        serde.matrix_from_proto(pb.Matrix(shape=[2, 3], data=b"\0" * 40))


def test_oversized_matrix_is_rejected():
    with pytest.raises(RemoteProtocolError, match="exceeds"):
        serde.matrix_from_proto(pb.Matrix(shape=[100_000, 100_000], data=b""))


def test_task_without_kind_and_bad_bounds_are_rejected():
    with pytest.raises(RemoteProtocolError, match="no known kind"):
        serde.task_from_proto(pb.Task(task_id="x"))
    bad = serde.task_to_proto(
        Task(
            "t", "o", "r", LrShareTask(mechanism="pm", epsilon=1.0, param_bound=1.0, c=1.0, n_classes=2, bounds=BOUNDS)
        )
    )
    bad.lr_share.bounds.CopyFrom(serde.matrix_to_proto(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])))
    with pytest.raises(RemoteProtocolError, match="lo < hi"):
        serde.task_from_proto(bad)


def test_ncc_share_with_mismatched_labels_is_rejected():
    msg = serde.result_to_proto(Result("t", "o", NccShareReply(reports=np.zeros((2, 3)), labels=np.array([0, 1]))))
    del msg.ncc_share.labels[:]
    with pytest.raises(RemoteProtocolError, match="reports for 0 labels"):
        serde.result_from_proto(msg)


def test_fields_a_message_refuses_arrive_as_remote_protocol_errors_naming_the_field():
    """The messages check their fields with common/validation; from a peer that is its fault."""
    ncc = serde.task_to_proto(Task("t", "o", "r", TASK_SPECS[0]))
    ncc.ncc_share.labels = "plain"
    with pytest.raises(RemoteProtocolError, match=r"labels must be one of \('clear', 'rr'\), got 'plain'"):
        serde.task_from_proto(ncc)
    for count_epsilon in (0.0, -1.0, math.nan):
        pca = serde.task_to_proto(Task("t", "o", "r", TASK_SPECS[3]))
        pca.pca_share.count_epsilon = count_epsilon
        with pytest.raises(RemoteProtocolError, match="count_epsilon must be > 0 or math.inf"):
            serde.task_from_proto(pca)
    refusal = serde.result_to_proto(Result("t", "o", Refusal.of("policy")))
    refusal.refusal.code = "because"
    with pytest.raises(RemoteProtocolError, match="refusal code must be one of .*, got 'because'"):
        serde.result_from_proto(refusal)
