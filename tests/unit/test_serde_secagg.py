"""The pairwise-mask secure sum on the wire: the messages of a real in-process run (every step,
with a dropped owner so that key shares are asked for) survive encoding to bytes and back field
for field, and what a peer could forge is refused at decoding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from privfed.common.errors import RemoteProtocolError
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.inprocess import InProcessSecAgg
from privfed.common.secagg.messages import (
    InputRequest,
    KeyAdvert,
    KeyShares,
    MaskedInput,
    SealedShare,
    ShareKeysRequest,
    UnmaskReply,
)
from privfed.common.tasks import PeerKey, Refusal, Result, SecAggKeysTask, SecAggUnmaskTask, Task
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde, serde_steps

OWNERS = [f"node-{i % 2}.o{i:02d}" for i in range(8)]
FP = FixedPoint.choose(n_parties=len(OWNERS), max_abs=10.0)


def _fields(obj: object) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def _same(a: object, b: object) -> None:
    assert type(a) is type(b)
    for name, value in _fields(a).items():
        other = getattr(b, name)
        if isinstance(value, np.ndarray):
            assert other.dtype == value.dtype
            np.testing.assert_array_equal(other, value)
        elif dataclasses.is_dataclass(value):
            _same(value, other)
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            assert len(value) == len(other)
            for x, y in zip(value, other):
                _same(x, y)
        else:
            assert other == value, name


def _task_trip(spec: object) -> object:
    task = Task("t-1", OWNERS[0], "ring1", spec)  # type: ignore[arg-type]
    return serde.task_from_proto(pb.Task.FromString(serde.task_to_proto(task).SerializeToString())).spec


def _result_trip(owner: str, payload: object) -> object:
    result = Result("t-1", owner, payload)  # type: ignore[arg-type]
    return serde.result_from_proto(pb.Result.FromString(serde.result_to_proto(result).SerializeToString())).payload


@pytest.fixture(scope="module")
def run() -> dict:
    """The messages of one real run: key agreement, then a round in which one owner stays silent."""
    r = InProcessSecAgg(OWNERS, FP, "sess-1", rounds=2, sign=lambda owner, pk: b"sig-" + owner.encode())
    adverts = {o: m.start(lambda pk, o=o: b"sig-" + o.encode()) for o, m in r.owners.items()}
    share_requests = r.server.on_adverts(adverts)
    key_shares = {o: r.owners[o].on_share_keys(q) for o, q in share_requests.items()}
    r.server.on_key_shares(key_shares)
    values = {o: np.array([float(i), -0.5]) for i, o in enumerate(OWNERS)}
    inputs = r.server.input_requests()
    masked = {o: r.owners[o].masked_input(q, values[o]) for o, q in inputs.items() if o != OWNERS[3]}
    unmask_requests = r.server.on_masked(masked)
    replies = {o: r.owners[o].on_unmask(q) for o, q in unmask_requests.items()}
    total = r.server.on_unmask(replies)
    return dict(
        adverts=adverts,
        share_requests=share_requests,
        key_shares=key_shares,
        inputs=inputs,
        masked=masked,
        unmask_requests=unmask_requests,
        replies=replies,
        total=total,
        values=values,
    )


def test_every_step_of_a_real_run_survives_the_wire(run: dict) -> None:
    peer = PeerKey(OWNERS[1], "node-1", b"k" * 32, b"s" * 64)
    for o in OWNERS:
        _same(run["adverts"][o], _result_trip(o, run["adverts"][o]))
        keys = SecAggKeysTask("sess-1", FP.frac_bits, FP.n_parties, FP.max_abs)
        _same(keys, _task_trip(keys))
        step1 = dataclasses.replace(keys, request=run["share_requests"][o], peers=(peer,), certificates={"n": b"pem"})
        _same(step1, _task_trip(step1))
        _same(run["key_shares"][o], _result_trip(o, run["key_shares"][o]))
        _same(
            run["inputs"][o], serde_steps.input_request_from_proto(serde_steps.input_request_to_proto(run["inputs"][o]))
        )
    assert any(run["inputs"][o].key_shares for o in OWNERS)
    for o, m in run["masked"].items():
        _same(m, _result_trip(o, m))
    for q in run["unmask_requests"].values():
        _same(SecAggUnmaskTask("sess-1", q), _task_trip(SecAggUnmaskTask("sess-1", q)))
    replies = run["replies"]
    assert any(r.key_shares for r in replies.values()), "the silent owner's key must be asked for"
    for o, reply in replies.items():
        back = _result_trip(o, reply)
        assert isinstance(back, UnmaskReply)
        assert (back.owner_id, back.round, back.self_shares, back.key_shares) == (
            o,
            reply.round,
            reply.self_shares,
            reply.key_shares,
        )
    expected = sum(v for o, v in run["values"].items() if o != OWNERS[3])
    np.testing.assert_allclose(run["total"], expected, atol=1e-6)


def test_a_reply_speaks_only_for_the_owner_that_answers(run: dict) -> None:
    """The replies' owner is the result's: an advert naming another owner is refused, the other
    replies take the answering owner as theirs (so no node answers as another node's owner)."""
    advert = run["adverts"][OWNERS[0]]
    with pytest.raises(RemoteProtocolError, match="advert"):
        _result_trip(OWNERS[1], advert)
    shares = run["key_shares"][OWNERS[0]]
    back = _result_trip(OWNERS[1], shares)
    assert isinstance(back, KeyShares) and back.owner_id == OWNERS[1]


@pytest.mark.parametrize(
    "mutate",
    [
        lambda m: m.masked_input.ClearField("masked"),  # an empty masked input
        lambda m: m.key_advert.CopyFrom(pb.KeyAdvert(owner_id=m.owner_id, public_key=b"short")),
        lambda m: m.key_shares.shares.add(sender="a", recipient="b", ciphertext=b"x"),  # not a sealed share
        lambda m: m.unmask_reply.self_shares.extend([pb.OwnerShare(owner_id="a"), pb.OwnerShare(owner_id="a")]),
    ],
)
def test_forged_replies_are_refused_at_decoding(mutate) -> None:  # type: ignore[no-untyped-def]
    m = pb.Result(task_id="t", owner_id=OWNERS[0])
    mutate(m)
    with pytest.raises(RemoteProtocolError):
        serde.result_from_proto(m)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda m: m.secagg_keys.share_keys.CopyFrom(pb.ShareKeysRequest(members=["a", "b", "c"], rounds=0)),
        lambda m: m.secagg_keys.share_keys.adverts.add(owner_id="a", public_key=b"1"),
        lambda m: m.secagg_keys.share_keys.CopyFrom(pb.ShareKeysRequest(members=["a"], rounds=5000)),
    ],
)
def test_a_malformed_secure_sum_task_is_refused_alone(mutate) -> None:  # type: ignore[no-untyped-def]
    m = pb.Task(task_id="bad", owner_id=OWNERS[0], round_id="r")
    mutate(m)
    task, refusal = serde.task_or_refusal(m)
    assert task is None and refusal is not None
    assert isinstance(refusal.payload, Refusal) and refusal.payload.code == "invalid_task"


def test_domain_types_refuse_what_the_wire_refuses() -> None:
    with pytest.raises(RemoteProtocolError):
        ShareKeysRequest(("a",), (), 0)
    with pytest.raises(RemoteProtocolError):
        InputRequest(-1, ())
    with pytest.raises(RemoteProtocolError):
        MaskedInput("a", 0, np.zeros(2, dtype=np.int64))
    with pytest.raises(RemoteProtocolError):
        SealedShare("a", "b", b"x")
    with pytest.raises(RemoteProtocolError):
        KeyAdvert("a", b"x", b"")
