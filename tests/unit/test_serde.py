"""Every x_to_proto / x_from_proto pair round-trips; malformed peer input is rejected."""

import dataclasses
import math

import numpy as np
import pytest

from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound
from privfed.common.bounds import Bounds
from privfed.common.errors import RemoteProtocolError
from privfed.common.learners.stump import Stump
from privfed.common.tasks import (
    BoostShareTask,
    JointNccShareReply,
    LrShareTask,
    NccShareReply,
    NccShareTask,
    OwnerInfo,
    PcaShareTask,
    Refusal,
    Result,
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


def test_owner_info_roundtrip_carries_no_row_count():
    info = OwnerInfo("owner-1.o00001", b"k" * 32, b"s" * 64)
    assert roundtrip(serde.owner_info_to_proto, serde.owner_info_from_proto, info) == info
    assert "n_rows" not in pb.OwnerInfo.DESCRIPTOR.fields_by_name
    assert [f.name for f in dataclasses.fields(OwnerInfo)] == ["owner_id", "x25519_public_key", "key_signature"]


NCC = NccShareTask(mechanism="pm", epsilon=1.5, labels="rr", label_epsilon=0.5, n_classes=3, bounds=BOUNDS)
LR = LrShareTask(mechanism="laplace", epsilon=2.0, param_bound=4.0, c=0.5, n_classes=4, bounds=BOUNDS)
PCA = PcaShareTask(epsilon=0.95, delta=1e-5, k=2, bounds=BOUNDS, count_epsilon=0.05, scaling="ball")
BOOST = BoostShareTask(
    BoostConfig("run-7", BoostingParams(n_classes=2, epsilon=1.0, bounds=BOUNDS, n_rounds=3)),
    BoostHistory((KeptRound(Stump(2, 1, 2.75, (1, 0), 0.25), 0.75, 12.5, 100.25),) * 2, round=4),
)


def test_one_malformed_task_is_refused_alone():
    good = serde.task_to_proto(Task("ok", "owner-0.o00000", "r", LR))
    bad = serde.task_to_proto(Task("bad", "owner-0.o00001", "r", LR))
    bad.lr_share.bounds.data = bad.lr_share.bounds.data[:-8]  # a Matrix with a wrong byte count
    deep = serde.task_to_proto(Task("deep", "owner-0.o00002", "r", BOOST))
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
    joint = serde.result_to_proto(Result("t", "o", JointNccShareReply(np.array([0, 2]), np.array([3, 1]))))
    del joint.ncc_share.joint.features[1:]
    with pytest.raises(RemoteProtocolError, match="1 sampled features for 2 reports"):
        serde.result_from_proto(joint)
    both = serde.result_to_proto(Result("t", "o", JointNccShareReply(np.array([0]), np.array([3]))))
    both.ncc_share.labels.append(1)  # a label beside joint reports: no honest owner sends one
    with pytest.raises(RemoteProtocolError, match="joint reports beside perturbed rows or labels"):
        serde.result_from_proto(both)


def test_fields_a_message_refuses_arrive_as_remote_protocol_errors_naming_the_field():
    """The messages check their fields with common/validation; from a peer that is its fault."""
    ncc = serde.task_to_proto(Task("t", "o", "r", NCC))
    ncc.ncc_share.labels = 99
    with pytest.raises(RemoteProtocolError, match="labels must name one of .*, got enum value 99"):
        serde.task_from_proto(ncc)
    for count_epsilon in (0.0, -1.0, math.nan):
        pca = serde.task_to_proto(Task("t", "o", "r", PCA))
        pca.pca_share.count_epsilon = count_epsilon
        with pytest.raises(RemoteProtocolError, match=r"count_epsilon must be > 0 \(or inf\)"):
            serde.task_from_proto(pca)
    refusal = serde.result_to_proto(Result("t", "o", Refusal.of("policy")))
    refusal.refusal.code = 99
    with pytest.raises(RemoteProtocolError, match="refusal code must name one of .*, got enum value 99"):
        serde.result_from_proto(refusal)
