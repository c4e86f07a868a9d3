"""Issue 9, item 8: the relay is not an open mailbox (contract 5).

Here the attacker is a node, so the test runs the REAL coordinator server
(``privfed.server.app.CoordinatorServer``) with a hostile node client holding owner-1's
certificate, next to an honest ``privfed owner`` process (owner-0) and a registered node that never
polls (owner-2, so nothing drains its queue). Before the fix any node could relay to any owner,
and 8 × 50 MB envelopes to a non-polling owner grew the coordinator from 170 to 703 MB.

* outside an open ring session, from an owner the caller does not host, to a non-member, or with
  a header that names another recipient: refused, nothing queued;
* inside an open session between the caller's owner and a member: accepted (positive control);
* flooding one recipient: RESOURCE_EXHAUSTED, and the coordinator's memory stays bounded;
* the honest node keeps serving.
"""

import secrets

import grpc
import numpy as np
import pytest
from hostile import WAIT, cert_key, cert_pem, rss_mb, spawn_owner, tls_files

from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.ring import MessageKind, Outbound
from privfed.common.secagg.signed_keys import sign_public_key
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.transport import REGISTER_TIMEOUT, RELAY_TIMEOUT, channel_credentials, channel_options

ATTACKER, VICTIM, SILENT = "owner-1.o00000", "owner-0.o00000", "owner-2.o00000"
FLOOD_BYTES = 4 * 1024 * 1024  # per envelope; the per-recipient limit holds two 8 MiB ring messages
FLOOD_TRIES = 30  # 120 MB offered in all
RSS_HEADROOM_MB = 100.0


def _stub(port, certs, node):
    channel = grpc.secure_channel(
        f"127.0.0.1:{port}", channel_credentials(tls_files(certs, node)), options=channel_options()
    )
    return channel, pb_grpc.CoordinatorStub(channel)


def _register(stub, certs, node, owner_id):
    pub = public_bytes(generate_private_key())
    info = pb.OwnerInfo(
        owner_id=owner_id, x25519_public_key=pub, key_signature=sign_public_key(cert_key(certs, node), pub, owner_id)
    )
    stub.RegisterNode(
        pb.RegisterNodeRequest(node_id=node, owners=[info], node_certificate=cert_pem(certs, node)),
        timeout=REGISTER_TIMEOUT,
    )


def _envelope(session, sender, recipient, size=64, header_recipient=None):
    data = Outbound(
        session, sender, header_recipient or recipient, MessageKind.HOP, 1, secrets.token_bytes(16) + b"\x00" * size
    ).to_bytes()
    return pb.Envelope(recipient=recipient, data=data)


def _relay(stub, *envelopes):
    return stub.Relay(pb.RelayRequest(node_id="owner-1", envelopes=list(envelopes)), timeout=RELAY_TIMEOUT)


@pytest.fixture
def federation(certs, tmp_path):
    from privfed.server.app import CoordinatorServer

    server = CoordinatorServer(tls=tls_files(certs, "coordinator"), node_timeout=15.0)
    server.start("127.0.0.1:0")
    honest = spawn_owner(tmp_path, server.port, "owner-0", np.array([[0.3, 0.6]]), np.array([1]), certs=certs)
    channels = []
    try:
        assert server.dispatcher.wait_for_owners(1, WAIT) == 1, honest.log()
        stubs = {}
        for node, oid in (("owner-1", ATTACKER), ("owner-2", SILENT)):
            channel, stub = _stub(server.port, certs, node)
            channels.append(channel)
            _register(stub, certs, node, oid)
            stubs[node] = stub
        yield server, honest, stubs["owner-1"]
    finally:
        server.dispatcher.shutdown()
        honest.stop()
        for c in channels:
            c.close()
        server.stop(0)


def _refused(call, *codes):
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() in codes, (err.value.code(), err.value.details())
    return err.value


def test_relay_only_within_open_sessions_and_bounded(federation):
    server, honest, stub = federation
    bad = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.PERMISSION_DENIED)
    relayed0 = server.dispatcher.relayed

    # no session open at all
    _refused(lambda: _relay(stub, _envelope("no-such-session", ATTACKER, VICTIM)), *bad)
    session = secrets.token_hex(16)
    server.dispatcher.open_ring(session, [ATTACKER, VICTIM])
    # from an owner the caller does not host (the victim, "to itself")
    _refused(lambda: _relay(stub, _envelope(session, VICTIM, VICTIM)), *bad)
    # to an owner outside the session
    _refused(lambda: _relay(stub, _envelope(session, ATTACKER, SILENT)), *bad)
    # header names another recipient than the envelope
    _refused(lambda: _relay(stub, _envelope(session, ATTACKER, VICTIM, header_recipient=SILENT)), *bad)
    # a session that was closed
    other = secrets.token_hex(16)
    server.dispatcher.open_ring(other, [ATTACKER, VICTIM])
    server.dispatcher.close_ring(other)
    _refused(lambda: _relay(stub, _envelope(other, ATTACKER, VICTIM)), *bad)
    assert server.dispatcher.relayed == relayed0, "a refused relay queued something"

    # positive control: the caller's own owner to a member of an open session
    assert _relay(stub, _envelope(session, ATTACKER, VICTIM)).accepted == 1

    # flood a member that never polls: RESOURCE_EXHAUSTED before memory grows
    flood = secrets.token_hex(16)
    server.dispatcher.open_ring(flood, [ATTACKER, SILENT])
    big = _envelope(flood, ATTACKER, SILENT, size=FLOOD_BYTES)
    rss0 = rss_mb()
    exhausted = None
    for i in range(FLOOD_TRIES):
        try:
            _relay(stub, big)
        except grpc.RpcError as exc:
            exhausted = (i, exc.code(), exc.details())
            break
    grown = rss_mb() - rss0
    assert exhausted is not None, f"{FLOOD_TRIES} x {FLOOD_BYTES} bytes queued for one silent owner"
    assert exhausted[1] == grpc.StatusCode.RESOURCE_EXHAUSTED, exhausted
    assert grown < RSS_HEADROOM_MB, f"coordinator RSS grew {grown:.0f} MB under the flood"
    # and it stays refused while nobody drains the queue
    _refused(lambda: _relay(stub, big), grpc.StatusCode.RESOURCE_EXHAUSTED)

    # the honest node keeps serving
    from privfed.common.bounds import Bounds
    from privfed.server.strategies import make_strategy

    strategy = make_strategy("ncc", mechanism="pm", epsilon=0.1, n_classes=2, bounds=Bounds(np.zeros(2), np.ones(2)))
    outcome = server.dispatcher.run(strategy.configure([VICTIM], "after-flood"), timeout=WAIT)
    assert len(outcome.results) == 1 and not outcome.lost, honest.log()[-3000:]
    assert honest.alive(), honest.log()[-3000:]
