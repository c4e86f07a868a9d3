"""Issue 14, item 3: the coordinator answers every malformed call with a status, and keeps serving.

A real ``CoordinatorServer`` (mTLS, the real servicer and dispatcher) gets, on each of its six
RPCs, (a) random bytes that are not the request message, and (b) valid requests of a registered
node mutated field by field (:mod:`mutate`: NaN/inf, huge and negative numbers, unknown enum
values, oversized strings, repeated fields of random lengths), plus (c) a message over the size
bound. Every answer must be OK or one of the statuses a caller's fault maps to
(INVALID_ARGUMENT, FAILED_PRECONDITION, RESOURCE_EXHAUSTED, PERMISSION_DENIED) — never INTERNAL
or UNKNOWN (an unhandled exception), UNAVAILABLE (a crash) or a deadline (a hang) — and after
the run a normal registration and poll still work and the thread count is bounded.
"""

from __future__ import annotations

import os
import threading

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutate import mutated

from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.ring import MessageKind, Outbound
from privfed.common.secagg.signed_keys import sign_public_key
from privfed.proto import privfed_pb2 as pb
from privfed.proto.transport import MAX_MESSAGE_BYTES, channel_credentials, channel_options

CALLERS_FAULT = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.PERMISSION_DENIED,
}
METHODS = ("RegisterNode", "PullTasks", "PushResults", "Predict", "GetModel", "Relay")
CALL_TIMEOUT = 10.0
NODE = "owner-1"
OWNER = f"{NODE}.o00000"
#: Examples per test: 60 in CI; PRIVFED_FUZZ_EXAMPLES=2000 for a longer hunt.
EXAMPLES = int(os.environ.get("PRIVFED_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """A running coordinator serving one LR model, and a channel holding owner-1's certificate."""
    from hostile import cert_key, cert_pem, make_federation_certs, tls_files

    from privfed.common.bounds import Bounds
    from privfed.common.learners.logistic import lr_aggregate
    from privfed.server.app import CoordinatorServer

    certs = make_federation_certs(tmp_path_factory.mktemp("fuzz") / "certs", owners=2)
    server = CoordinatorServer(tls=tls_files(certs, "coordinator"), node_timeout=60.0)
    server.start("127.0.0.1:0")
    bounds = Bounds(np.zeros(2), np.ones(2))
    server.models.put("m", lr_aggregate(np.zeros((1, 3)), param_bound=1.0, n_classes=2, bounds=bounds))
    channel = grpc.secure_channel(
        f"127.0.0.1:{server.port}", channel_credentials(tls_files(certs, NODE)), options=channel_options()
    )
    pub = public_bytes(generate_private_key())
    register = pb.RegisterNodeRequest(
        node_id=NODE,
        owners=[
            pb.OwnerInfo(
                owner_id=OWNER, x25519_public_key=pub, key_signature=sign_public_key(cert_key(certs, NODE), pub, OWNER)
            )
        ],
        node_certificate=cert_pem(certs, NODE),
    )
    try:
        yield server, channel, register, certs
    finally:
        channel.close()
        server.stop(0)


def _seeds(register: pb.RegisterNodeRequest) -> dict[str, object]:
    """One valid request per RPC, as a registered node would send it."""
    rows = np.array([[0.25, 0.5]], dtype="<f8")
    reports = pb.Reports(shape=list(rows.shape), grid_bits=20, data=np.round(rows * 2**20).astype("<i8").tobytes())
    envelope = Outbound("s" * 32, OWNER, "owner-0.o00000", MessageKind.HOP, 1, b"\x00" * 32).to_bytes()
    return {
        "RegisterNode": register,
        "PullTasks": pb.PullTasksRequest(node_id=NODE, wait_ms=0),
        "PushResults": pb.PushResultsRequest(
            node_id=NODE,
            results=[
                pb.Result(task_id="t", owner_id=OWNER, refusal=pb.Refusal(code=pb.REFUSAL_CODE_POLICY, message="x")),
                pb.Result(task_id="u", owner_id=OWNER, ncc_share=pb.NccShare(reports=reports, labels=[1])),
            ],
        ),
        "Predict": pb.PredictRequest(model_id="m", rows=reports),
        "GetModel": pb.GetModelRequest(model_id="m"),
        "Relay": pb.RelayRequest(node_id=NODE, envelopes=[pb.Envelope(recipient="owner-0.o00000", data=envelope)]),
    }


def _raw_call(channel, method: str, payload: bytes) -> grpc.StatusCode:
    call = channel.unary_unary(f"/privfed.v1.Coordinator/{method}")
    try:
        call(payload, timeout=CALL_TIMEOUT)
        return grpc.StatusCode.OK
    except grpc.RpcError as err:
        return err.code()


def _assert_still_serving(channel, register) -> None:
    assert _raw_call(channel, "RegisterNode", register.SerializeToString()) == grpc.StatusCode.OK
    poll = pb.PullTasksRequest(node_id=NODE, wait_ms=0).SerializeToString()
    assert _raw_call(channel, "PullTasks", poll) == grpc.StatusCode.OK


@pytest.mark.parametrize("method", METHODS)
def test_random_bytes(federation, method):
    server, channel, register, _ = federation

    @FUZZ
    @given(payload=st.binary(max_size=256))
    def check(payload):
        code = _raw_call(channel, method, payload)
        assert code in CALLERS_FAULT, (method, payload, code)

    check()
    _assert_still_serving(channel, register)


@pytest.mark.parametrize("method", METHODS)
def test_mutated_requests(federation, method):
    server, channel, register, _ = federation
    seed = _seeds(register)[method]
    threads_before = threading.active_count()

    @FUZZ
    @given(data=st.data())
    def check(data):
        request = mutated(seed, data)
        if method in ("PullTasks", "PushResults"):  # long polls (a push may pull) are capped by the server;
            request.wait_ms = min(request.wait_ms, 50)  # keep examples fast
        code = _raw_call(channel, method, request.SerializeToString())
        assert code in CALLERS_FAULT, (method, request, code)

    check()
    _assert_still_serving(channel, register)
    assert threading.active_count() <= threads_before + 4, "the fuzz run leaked threads"


def test_random_bytes_on_a_session(federation):
    """A Session stream whose message is not a PushResultsRequest ends with the caller's fault, and the
    server goes on (issue 27: the stream opens the same surface as PushResults)."""
    server, channel, register, _ = federation
    session = channel.stream_stream("/privfed.v1.Coordinator/Session")

    @FUZZ
    @given(payload=st.binary(min_size=1, max_size=256))
    def check(payload):
        try:
            for _ in session(iter([payload]), timeout=CALL_TIMEOUT):
                pass
            code = grpc.StatusCode.OK
        except grpc.RpcError as err:
            code = err.code()
        assert code in CALLERS_FAULT, (payload, code)

    check()
    _assert_still_serving(channel, register)


def test_oversized_message_is_refused_before_it_is_read(federation):
    """A request over MAX_MESSAGE_BYTES, from a client that does not bound what it sends, is
    refused by the server from its length prefix (RESOURCE_EXHAUSTED), and the server goes on."""
    server, channel, register, certs = federation
    from hostile import tls_files

    unbounded = grpc.secure_channel(
        f"127.0.0.1:{server.port}",
        channel_credentials(tls_files(certs, NODE)),
        options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)],
    )
    big = pb.RelayRequest(node_id=NODE, envelopes=[pb.Envelope(recipient="x", data=b"\x00" * (MAX_MESSAGE_BYTES + 1))])
    try:
        assert _raw_call(unbounded, "Relay", big.SerializeToString()) == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        unbounded.close()
    _assert_still_serving(channel, register)
