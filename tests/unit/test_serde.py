"""Every x_to_proto / x_from_proto pair round-trips; malformed peer input is rejected."""

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import RemoteProtocolError
from privfed.common.messages import (
    LrShareReply, LrShareTask, NccShareReply, NccShareTask, OwnerInfo, Refusal, Result, Task,
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


def test_owner_info_roundtrip():
    assert roundtrip(serde.owner_info_to_proto, serde.owner_info_from_proto, OwnerInfo("o00001", 12)) == \
        OwnerInfo("o00001", 12)


@pytest.mark.parametrize("spec", [
    NccShareTask(mechanism="pm", epsilon=1.5, labels="rr", label_epsilon=0.5, n_classes=3, bounds=BOUNDS),
    NccShareTask(mechanism="duchi", epsilon=math.inf, labels="clear", label_epsilon=0.0, n_classes=2, bounds=BOUNDS),
    LrShareTask(mechanism="laplace", epsilon=2.0, param_bound=4.0, c=0.5, n_classes=4, bounds=BOUNDS),
])
def test_task_roundtrip(spec):
    task = Task("t1", "o00002", "r1", spec)
    back = roundtrip(serde.task_to_proto, serde.task_from_proto, task)
    assert (back.task_id, back.owner_id, back.round_id) == ("t1", "o00002", "r1")
    assert type(back.spec) is type(spec)
    for field in ("mechanism", "epsilon", "n_classes"):
        assert getattr(back.spec, field) == getattr(spec, field)
    np.testing.assert_array_equal(back.spec.bounds.hi, spec.bounds.hi)


@pytest.mark.parametrize("payload", [
    Refusal("budget_exceeded", "owner o1: 2 > 1"),
    NccShareReply(reports=np.arange(6.0).reshape(2, 3), labels=np.array([0, 2])),
    LrShareReply(reports=np.linspace(-1, 1, 9)[:8].reshape(1, 8)),
])
def test_result_roundtrip(payload):
    back = roundtrip(serde.result_to_proto, serde.result_from_proto, Result("t9", "o3", payload))
    assert type(back.payload) is type(payload)
    if isinstance(payload, Refusal):
        assert back.payload == payload
    else:  # values on the 2^-20 grid travel exactly
        np.testing.assert_array_equal(back.payload.reports, payload.reports)


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
    bad = serde.task_to_proto(Task("t", "o", "r", LrShareTask(mechanism="pm", epsilon=1.0, param_bound=1.0, c=1.0,
                                                                 n_classes=2, bounds=BOUNDS)))
    bad.lr_share.bounds.CopyFrom(serde.matrix_to_proto(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])))
    with pytest.raises(RemoteProtocolError, match="lo < hi"):
        serde.task_from_proto(bad)


def test_ncc_share_with_mismatched_labels_is_rejected():
    msg = serde.result_to_proto(Result("t", "o", NccShareReply(reports=np.zeros((2, 3)), labels=np.array([0, 1]))))
    del msg.ncc_share.labels[:]
    with pytest.raises(RemoteProtocolError, match="reports for 0 labels"):
        serde.result_from_proto(msg)
