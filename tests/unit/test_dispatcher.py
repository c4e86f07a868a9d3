"""The coordinator's dispatcher and servicer as an adversarial node meets them (issue 9, items 4, 8).

The dispatcher is driven directly (no processes); one test goes through a real gRPC server on
127.0.0.1 to check status codes and the message-size bound.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfed.common.errors import (
    BudgetExceeded,
    ConfigError,
    JobAborted,
    LocalProtocolError,
    PrivfedError,
    RemoteProtocolError,
    ResourceExhausted,
    RingClosed,
    RoundFailed,
)
from privfed.common.identity import owner_id
from privfed.common.secagg.ring import Inbound, MessageKind, new_session_id
from privfed.common.tasks import OwnerInfo, Refusal, Result, RingMessageTask, Task
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.transport import (
    MAX_MESSAGE_BYTES,
    REGISTER_TIMEOUT,
    RELAY_TIMEOUT,
    TlsFiles,
    channel_credentials,
    channel_options,
)
from privfed.server import nodes
from privfed.server.app import CoordinatorServer
from privfed.server.dispatcher import Dispatcher
from privfed.server.relay import MAX_QUEUED_BYTES_PER_OWNER, MAX_QUEUED_ENVELOPES_PER_OWNER
from privfed.server.servicer import status_code

_HAS_ROWS = "n_rows" in {f.name for f in dataclasses.fields(OwnerInfo)}


def info(oid: str) -> OwnerInfo:
    """An OwnerInfo whether or not the registration still carries a row count."""
    return OwnerInfo(owner_id=oid, **({"n_rows": 1} if _HAS_ROWS else {}))


def envelope(session: str, sender: str, recipient: str, payload: bytes = b"\0" * 32, seq: int = 1) -> bytes:
    return Inbound(session, sender, recipient, MessageKind.HOP, seq, payload).to_bytes()


A0, A1, B0, C0 = owner_id("node-a", 0), owner_id("node-a", 1), owner_id("node-b", 0), owner_id("node-c", 0)


@pytest.fixture
def dispatcher() -> Dispatcher:
    d = Dispatcher()
    d.register("node-a", [info(A0), info(A1)])
    d.register("node-b", [info(B0)])
    d.register("node-c", [info(C0)])
    return d


def ring_tasks(d: Dispatcher, node: str) -> list[bytes]:
    tasks, _ = d.pull(node, 0.0)
    return [t.spec.data for t in tasks if isinstance(t.spec, RingMessageTask)]


# ---- registration (item 4) -----------------------------------------------------------


def test_a_node_cannot_register_another_nodes_owner_id(dispatcher):
    with pytest.raises(RemoteProtocolError, match="does not belong to node"):
        dispatcher.register("node-b", [info(B0), info(A0)])
    # The honest holder keeps its owner, and node-b's registration did not change anything.
    assert dispatcher.peer_key(A0).node_id == "node-a"
    assert set(dispatcher.owners()) == {A0, A1, B0, C0}


def test_sybils_under_other_or_no_node_name_are_refused():
    d = Dispatcher()
    for bad in ("owner-0", "node-x.o00001", ".o1", "node-a."):
        with pytest.raises(RemoteProtocolError):
            d.register("node-a", [info(bad)])
    assert d.owners() == {}


def test_registration_size_and_id_length_are_bounded(monkeypatch):
    d = Dispatcher()
    monkeypatch.setattr(nodes, "MAX_OWNERS_PER_NODE", 100)  # the rule, not 10^6 owners
    with pytest.raises(RemoteProtocolError, match="MAX_OWNERS_PER_NODE"):
        d.register("node-a", [info(owner_id("node-a", i)) for i in range(nodes.MAX_OWNERS_PER_NODE + 1)])
    with pytest.raises(RemoteProtocolError, match="longer than"):
        d.register("node-a", [info("node-a." + "o" * 300)])
    with pytest.raises(RemoteProtocolError, match="twice"):
        d.register("node-a", [info(A0), info(A0)])
    with pytest.raises(RemoteProtocolError, match="node_id"):
        d.register("", [])


def test_re_registration_replaces_only_the_nodes_own_owners(dispatcher):
    dispatcher.register("node-a", [info(A1), info(owner_id("node-a", 2))])
    assert set(dispatcher.owners()) == {A1, owner_id("node-a", 2), B0, C0}
    dispatcher.register("node-a", [info(A0), info(A1)])  # and back, as a restarted node does
    assert set(dispatcher.owners()) == {A0, A1, B0, C0}


# ---- relay (item 8, contract 5) --------------------------------------------------------


def test_relay_within_an_open_session_reaches_the_recipients_node(dispatcher):
    s = new_session_id()
    dispatcher.open_ring(s, [A0, B0, C0])
    data = envelope(s, A0, B0)
    assert dispatcher.relay("node-a", [(B0, data)])[0] == 1
    assert ring_tasks(dispatcher, "node-b") == [data]
    assert dispatcher.queued_relay() == (0, 0)


def test_relay_to_an_own_owner_comes_back_in_the_relay_answer(dispatcher):
    s = new_session_id()
    dispatcher.open_ring(s, [A0, A1])
    data = envelope(s, A0, A1)
    accepted, tasks = dispatcher.relay("node-a", [(A1, data)])
    assert accepted == 1 and [t.spec.data for t in tasks] == [data] and tasks[0].owner_id == A1


def test_relay_outside_an_open_session_is_refused(dispatcher):
    with pytest.raises(RingClosed, match="not open"):
        dispatcher.relay("node-a", [(B0, envelope(new_session_id(), A0, B0))])
    s = new_session_id()
    dispatcher.open_ring(s, [A0, B0])
    dispatcher.close_ring(s)
    with pytest.raises(RemoteProtocolError, match="not open"):
        dispatcher.relay("node-a", [(B0, envelope(s, A0, B0))])
    assert dispatcher.queued_relay() == (0, 0)


def test_relay_from_an_owner_the_node_does_not_host_is_refused(dispatcher):
    s = new_session_id()
    dispatcher.open_ring(s, [A0, B0, C0])
    with pytest.raises(RemoteProtocolError, match="does not host"):
        dispatcher.relay("node-c", [(B0, envelope(s, A0, B0))])  # node-c forging A0
    assert ring_tasks(dispatcher, "node-b") == []


def test_relay_to_a_non_member_or_with_a_mismatched_header_is_refused(dispatcher):
    s = new_session_id()
    dispatcher.open_ring(s, [A0, B0])
    with pytest.raises(RemoteProtocolError, match="members"):
        dispatcher.relay("node-a", [(C0, envelope(s, A0, C0))])
    with pytest.raises(RemoteProtocolError, match="header recipient"):
        dispatcher.relay("node-a", [(C0, envelope(s, A0, B0))])
    with pytest.raises(RemoteProtocolError):
        dispatcher.relay("node-a", [(B0, b"\0" * 100)])  # not an envelope at all
    # A bad envelope in a batch queues nothing of the batch.
    with pytest.raises(RemoteProtocolError):
        dispatcher.relay("node-a", [(B0, envelope(s, A0, B0)), (C0, envelope(s, A0, C0))])
    assert ring_tasks(dispatcher, "node-b") == [] and ring_tasks(dispatcher, "node-c") == []


def test_relay_beyond_the_per_recipient_count_is_resource_exhausted_and_memory_stays_bounded(dispatcher):
    s = new_session_id()
    dispatcher.open_ring(s, [A0, B0, C0])
    for k in range(MAX_QUEUED_ENVELOPES_PER_OWNER):
        dispatcher.relay("node-a", [(B0, envelope(s, A0, B0, seq=k))])
    with pytest.raises(ResourceExhausted):
        dispatcher.relay("node-a", [(B0, envelope(s, A0, B0))])
    count, size = dispatcher.queued_relay()
    assert count == MAX_QUEUED_ENVELOPES_PER_OWNER
    # Another recipient is not starved by the flooded one.
    dispatcher.relay("node-a", [(C0, envelope(s, A0, C0))])
    # Once the recipient's node polls, room is made again.
    assert len(ring_tasks(dispatcher, "node-b")) == MAX_QUEUED_ENVELOPES_PER_OWNER
    dispatcher.relay("node-a", [(B0, envelope(s, A0, B0))])


def test_relay_beyond_the_per_recipient_bytes_is_resource_exhausted(dispatcher):
    """The issue's attack: big envelopes to an owner whose node never polls. Queued bytes stop
    at the limit instead of growing with every call."""
    s = new_session_id()
    dispatcher.open_ring(s, [A0, B0])
    big = envelope(s, A0, B0, payload=b"\0" * (4 * 1024 * 1024))
    sent = 0
    with pytest.raises(ResourceExhausted):
        for _ in range(50):
            dispatcher.relay("node-a", [(B0, big)])
            sent += 1
    assert 0 < sent < 50
    assert dispatcher.queued_relay()[1] == sent * len(big) <= MAX_QUEUED_BYTES_PER_OWNER


@settings(max_examples=300, deadline=None)
@given(
    cut=st.integers(0, 200),
    flips=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 255)), max_size=4),
    tail=st.binary(max_size=8),
)
def test_a_mangled_envelope_is_refused_as_a_protocol_error_and_nothing_is_queued(cut, flips, tail):
    d = Dispatcher()
    d.register("node-a", [info(A0)])
    d.register("node-b", [info(B0)])
    d.open_ring("s", [A0, B0])
    data = bytearray(envelope("s", A0, B0, payload=b"\1" * 40))
    for at, x in flips:
        data[at % len(data)] ^= x
    data = bytes(data[: len(data) - cut % len(data)]) + tail
    try:
        d.relay("node-a", [(B0, data)])
    except RemoteProtocolError:
        assert d.queued_relay() == (0, 0)
    else:  # only a mangling that still names s, A0 -> B0 is accepted (the recipient authenticates it)
        header = Inbound.from_bytes(data)
        assert (header.session_id, header.sender, header.recipient) == ("s", A0, B0)


def test_the_total_queued_bytes_are_bounded_over_all_recipients(dispatcher, monkeypatch):
    import privfed.server.relay as module

    monkeypatch.setattr(module, "MAX_QUEUED_BYTES", 1000)
    s = new_session_id()
    dispatcher.open_ring(s, [A0, B0, C0])
    dispatcher.relay("node-a", [(B0, envelope(s, A0, B0, payload=b"\0" * 400))])
    with pytest.raises(ResourceExhausted, match="MAX_QUEUED_BYTES"):
        dispatcher.relay("node-a", [(C0, envelope(s, A0, C0, payload=b"\0" * 700))])
    assert dispatcher.queued_relay()[1] < 1000


def test_closing_a_session_drops_its_queued_envelopes_only(dispatcher):
    s, t = new_session_id(), new_session_id()
    dispatcher.open_ring(s, [A0, B0])
    dispatcher.open_ring(t, [A1, B0])
    dispatcher.relay("node-a", [(B0, envelope(s, A0, B0)), (B0, envelope(t, A1, B0))])
    dispatcher.close_ring(s)
    dispatcher.close_ring(s)  # idempotent
    assert [Inbound.from_bytes(d).session_id for d in ring_tasks(dispatcher, "node-b")] == [t]
    assert dispatcher.queued_relay() == (0, 0)


def test_the_relay_records_who_sent_hops_in_an_open_session_for_stalled_party_detection(dispatcher):
    s, t = new_session_id(), new_session_id()
    dispatcher.open_ring(s, [A0, B0, C0])
    dispatcher.open_ring(t, [A1, B0])
    result = Inbound(s, B0, A0, MessageKind.RESULT, 4, b"\0" * 32).to_bytes()
    dispatcher.relay("node-a", [(B0, envelope(s, A0, B0)), (B0, envelope(t, A1, B0))])
    dispatcher.relay("node-b", [(C0, envelope(s, B0, C0, seq=2)), (A0, result)])
    assert dispatcher.hop_senders(s) == {A0, B0} and dispatcher.hop_senders(t) == {A1}  # a RESULT is no hop
    dispatcher.close_ring(s)
    assert dispatcher.hop_senders(s) == set() and dispatcher.hop_senders(t) == {A1}


def test_open_ring_checks_its_arguments(dispatcher):
    with pytest.raises(ConfigError):
        dispatcher.open_ring("s", [A0])
    with pytest.raises(ConfigError):
        dispatcher.open_ring("s", [A0, A0])
    dispatcher.open_ring("s", [A0, B0])
    dispatcher.open_ring("s", [B0, A0])  # same members: no-op
    with pytest.raises(ConfigError):
        dispatcher.open_ring("s", [A0, C0])


def test_requeued_tasks_keep_their_order_and_their_books(dispatcher):
    s = new_session_id()
    dispatcher.open_ring(s, [A0, B0])
    datas = [envelope(s, A0, B0, seq=k) for k in range(3)]
    dispatcher.relay("node-a", [(B0, d) for d in datas])
    tasks, _ = dispatcher.pull("node-b", 0.0)
    dispatcher.requeue("node-b", tasks[1:], dispatcher.job)
    assert dispatcher.queued_relay() == (2, len(datas[1]) + len(datas[2]))
    assert ring_tasks(dispatcher, "node-b") == datas[1:]


def test_a_task_for_an_owner_that_left_fails_the_round_not_the_configuration(dispatcher):
    """A node re-registering without an owner mid-job is the federation's doing: RoundFailed."""
    dispatcher.register("node-c", [])
    task = Task(task_id="t1", owner_id=C0, round_id="r1", spec=RingMessageTask(data=b""))
    with pytest.raises(RoundFailed, match="not registered"):
        dispatcher.run([task], timeout=0.0)
    with pytest.raises(RoundFailed, match="not registered"):
        dispatcher.peer_key(C0)


@pytest.mark.parametrize(
    "exc, code",
    [
        (RingClosed("closed"), grpc.StatusCode.FAILED_PRECONDITION),  # subclass of RemoteProtocolError
        (RemoteProtocolError("bad"), grpc.StatusCode.INVALID_ARGUMENT),
        (ConfigError("no model"), grpc.StatusCode.FAILED_PRECONDITION),
        (BudgetExceeded("spent"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (ResourceExhausted("full"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (RoundFailed("no owner released"), grpc.StatusCode.INTERNAL),  # the coordinator's job, never a call's
        (JobAborted("SIGTERM"), grpc.StatusCode.INTERNAL),
        (LocalProtocolError("bug"), grpc.StatusCode.INTERNAL),
    ],
)
def test_the_servicer_maps_errors_to_status_codes_by_type(exc, code):
    assert status_code(exc) == code


def test_every_error_privfed_raises_on_purpose_is_a_privfed_error():
    import privfed.server.dispatcher as dispatcher_module

    for cls in (RoundFailed, JobAborted, ResourceExhausted, RingClosed):
        assert issubclass(cls, PrivfedError) and cls.__module__ == "privfed.common.errors"
    defined_here = [
        name
        for name, v in vars(dispatcher_module).items()
        if isinstance(v, type) and issubclass(v, Exception) and v.__module__ == dispatcher_module.__name__
    ]
    assert defined_here == []  # errors live in privfed.common.errors only


# ---- over gRPC --------------------------------------------------------------------------


def test_servicer_maps_relay_errors_and_refuses_oversized_messages():
    server = CoordinatorServer(tls=None)
    port = server.start("127.0.0.1:0")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as channel:
            stub = pb_grpc.CoordinatorStub(channel)

            def register(node, owners):
                return stub.RegisterNode(
                    pb.RegisterNodeRequest(node_id=node, owners=[pb.OwnerInfo(owner_id=o) for o in owners]),
                    timeout=REGISTER_TIMEOUT,
                )

            register("node-a", [A0])
            register("node-b", [B0])
            with pytest.raises(grpc.RpcError) as err:
                register("node-b", [A0])
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT

            def relay(data, node="node-a", to=B0):
                return stub.Relay(
                    pb.RelayRequest(node_id=node, envelopes=[pb.Envelope(recipient=to, data=data)]),
                    timeout=RELAY_TIMEOUT,
                )

            s = new_session_id()
            with pytest.raises(grpc.RpcError) as err:
                relay(envelope(s, A0, B0))
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # not open: drop, don't retry
            server.dispatcher.open_ring(s, [A0, B0])
            with pytest.raises(grpc.RpcError) as err:
                relay(envelope(s, B0, A0))  # forging node-b's owner
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert relay(envelope(s, A0, B0)).accepted == 1
            for k in range(MAX_QUEUED_ENVELOPES_PER_OWNER - 1):
                relay(envelope(s, A0, B0, seq=k))
            with pytest.raises(grpc.RpcError) as err:
                relay(envelope(s, A0, B0))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert server.dispatcher.queued_relay()[0] == MAX_QUEUED_ENVELOPES_PER_OWNER
        # A client that ignores the bound: the server's gRPC refuses the message from its length
        # prefix, before the servicer (or an allocation of its size) sees it.
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", -1)]) as channel:
            request = pb.RelayRequest(
                node_id="node-a", envelopes=[pb.Envelope(recipient=B0, data=b"\0" * (MAX_MESSAGE_BYTES + 1))]
            )
            with pytest.raises(grpc.RpcError) as err:
                pb_grpc.CoordinatorStub(channel).Relay(request, timeout=RELAY_TIMEOUT)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        server.stop(0)


def test_a_round_does_not_wait_for_an_owner_its_node_dropped_on_re_registration():
    """A node restarting with fewer owners: their tasks are lost, the round goes on."""
    now = [0.0]
    d = Dispatcher(clock=lambda: now[0])
    d.register("node-a", [info(A0), info(A1)])
    done = []
    runner = threading.Thread(
        target=lambda: done.append(
            d.run([Task("t0", A0, "r", RingMessageTask(b"")), Task("t1", A1, "r", RingMessageTask(b""))], timeout=60)
        )
    )
    runner.start()
    tasks, _ = d.pull("node-a", 1.0)
    assert {t.task_id for t in tasks} == {"t0", "t1"}
    d.register("node-a", [info(A0)])  # A1 is gone
    tasks, _ = d.pull("node-a", 1.0)  # t0 redelivered to the new incarnation
    assert [t.task_id for t in tasks] == ["t0"]
    d.push("node-a", [Result("t0", A0, Refusal("internal", "test"))])
    now[0] += 1.0  # past the next liveness check
    runner.join(5)
    assert not runner.is_alive() and done[0].lost == ["t1"] and set(done[0].results) == {"t0"}


def test_a_round_waiting_long_says_every_minute_what_it_waits_for(caplog):
    """Walkthrough 11, W11-7: a round of owners of 200 000 rows each waited minutes with no line anywhere, so nobody
    could tell a slow owner from a stuck one. It now logs, each minute, how many answered and the nodes it waits
    for, with their state. The clock is the dispatcher's."""
    now = [0.0]
    d = Dispatcher(clock=lambda: now[0])
    d.register("node-a", [info(A0)])
    d.register("node-b", [info(B0)])
    done = []
    tasks = [Task("t0", A0, "r1", RingMessageTask(b"")), Task("t1", B0, "r1", RingMessageTask(b""))]
    with caplog.at_level(logging.INFO, logger="privfed.coordinator"):
        runner = threading.Thread(target=lambda: done.append(d.run(tasks, timeout=600)))
        runner.start()
        d.pull("node-a", 1.0)
        d.push("node-a", [Result("t0", A0, Refusal("internal", "test"))])
        for _ in range(3):  # node-b calls (it is online, computing) while 61 s pass on the dispatcher's clock
            now[0] += 30.5
            d.register("node-b", [info(B0)])
            time.sleep(0.7)  # the round's wait, in half-second slices, sees the new time
        waiting = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
        shown = d.waiting  # what a running job's note says (walkthrough 14, W14-17: nothing did)
        d.push("node-b", [Result("t1", B0, Refusal("internal", "test"))])
        runner.join(5)
    assert not runner.is_alive() and set(done[0].results) == {"t0", "t1"}
    assert shown == waiting[0] and d.waiting is None, (shown, d.waiting)  # none once the batch is over
    assert waiting and waiting[0].startswith(
        "round r1: 1 of 2 task(s) answered after 61 s; waiting for node-b (1 task(s), online)"
    ), waiting
    assert len(waiting) == 1, waiting  # one line a minute, not one per check


def test_a_batch_left_by_its_sink_raising_leaves_no_waiting_note_to_the_next_job():
    """Audit 37, O-1: a batch that waited a minute, then left by an exception of its sink, kept its "waiting for" note,
    which was the next running job's note (perhaps another data user's) until that job's first batch ended."""
    now = [0.0]
    d = Dispatcher(clock=lambda: now[0])
    d.register("node-a", [info(A0)])
    d.register("node-b", [info(B0)])
    tasks = [Task("t0", A0, "r1", RingMessageTask(b"")), Task("t1", B0, "r1", RingMessageTask(b""))]

    def sink(answers):
        if any(a.task_id == "t1" for _, a in answers):
            raise RuntimeError("a fold failed")
        return []

    raised = []

    def run():
        try:
            d.run(tasks, timeout=600, sink=sink)
        except RuntimeError as exc:
            raised.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    d.pull("node-a", 1.0)
    d.push("node-a", [Result("t0", A0, Refusal("internal", "test"))])
    for _ in range(3):  # a minute on the dispatcher's clock: the note is written
        now[0] += 30.5
        d.register("node-b", [info(B0)])
        time.sleep(0.7)
    assert d.waiting is not None and "waiting for node-b" in d.waiting
    d.push("node-b", [Result("t1", B0, Refusal("internal", "test"))])
    runner.join(5)
    assert not runner.is_alive() and raised, "the sink's error ends the batch"
    d.begin_job(None)  # the next job
    assert d.waiting is None


def test_a_pull_answer_stays_under_the_message_bound_and_the_rest_waits():
    """28 MiB queued for one node: handed out in answers gRPC can send, nothing lost."""
    b1 = owner_id("node-b", 1)
    server = CoordinatorServer(tls=None)
    port = server.start("127.0.0.1:0")
    try:
        d = server.dispatcher
        d.register("node-a", [info(A0)])
        d.register("node-b", [info(B0), info(b1)])
        s = new_session_id()
        d.open_ring(s, [A0, B0, b1])
        sent = [
            envelope(s, A0, to, payload=bytes([k]) * (7 * 1024 * 1024), seq=k) for k, to in enumerate([B0, b1, B0, b1])
        ]
        for data in sent:
            d.relay("node-a", [(Inbound.from_bytes(data).recipient, data)])
        received = []
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            for _ in range(len(sent)):
                answer = stub.PullTasks(pb.PullTasksRequest(node_id="node-b", wait_ms=0), timeout=RELAY_TIMEOUT)
                assert answer.ByteSize() <= MAX_MESSAGE_BYTES
                received += [bytes(t.ring_message.data) for t in answer.tasks]
                if len(received) == len(sent):
                    break
        assert received == sent and d.queued_relay() == (0, 0)
    finally:
        server.stop(0)


def test_over_mtls_a_node_registers_only_owners_under_its_certificate_name(tmp_path):
    """The issue's attack: node owner-1 registers owner-0's ids (and claims to be owner-0)."""
    from privfed.deploy.certs import make_certs

    make_certs(tmp_path, owners=2)
    server = CoordinatorServer(tls=TlsFiles.in_dir(tmp_path, "coordinator"))
    port = server.start("127.0.0.1:0")
    try:
        with grpc.secure_channel(
            f"localhost:{port}", channel_credentials(TlsFiles.in_dir(tmp_path, "owner-1")), options=channel_options()
        ) as channel:
            stub = pb_grpc.CoordinatorStub(channel)

            def register(node, owners):
                return stub.RegisterNode(
                    pb.RegisterNodeRequest(node_id=node, owners=[pb.OwnerInfo(owner_id=o) for o in owners]),
                    timeout=REGISTER_TIMEOUT,
                )

            for node, owners in [
                ("owner-1", [owner_id("owner-0", 0)]),  # another node's owner
                ("owner-1", [owner_id("owner-1", 0), "owner-0"]),  # an id of the old form
                ("owner-0", [owner_id("owner-0", 0)]),
            ]:  # another node's name
                with pytest.raises(grpc.RpcError) as err:
                    register(node, owners)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert server.dispatcher.owners() == {}
            register("owner-1", [owner_id("owner-1", 0), owner_id("owner-1", 1)])
            register("owner-1", [owner_id("owner-1", 1)])  # a restart with fewer owners
            assert set(server.dispatcher.owners()) == {owner_id("owner-1", 1)}
    finally:
        server.stop(0)


_ids = st.one_of(
    st.text(max_size=12), st.sampled_from([A0, B0, "node-a", "node-b", "s"]), st.text(min_size=256, max_size=300)
)
_members = st.sampled_from([A0, B0, C0, "owner-0"])


@pytest.fixture(scope="module")
def live_server():
    server = CoordinatorServer(tls=None)
    port = server.start("127.0.0.1:0")
    server.dispatcher.register("node-a", [info(A0)])
    server.dispatcher.register("node-b", [info(B0)])
    server.dispatcher.open_ring("s", [A0, B0])
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as channel:
        yield server, pb_grpc.CoordinatorStub(channel)
    server.stop(0)


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(["register", "pull", "relay"]),
    node=_ids,
    owners=st.lists(_ids, max_size=4),
    data=st.one_of(st.binary(max_size=64), st.builds(envelope, st.sampled_from(["s", "t"]), _members, _members)),
    wait=st.integers(0, 2),
)
def test_random_requests_get_a_client_error_and_the_coordinator_keeps_serving(
    live_server, kind, node, owners, data, wait
):
    server, stub = live_server
    request, call = {
        "register": (
            pb.RegisterNodeRequest(node_id=node, owners=[pb.OwnerInfo(owner_id=o) for o in owners]),
            stub.RegisterNode,
        ),
        "pull": (pb.PullTasksRequest(node_id=node, wait_ms=wait), stub.PullTasks),
        "relay": (
            pb.RelayRequest(node_id=node, envelopes=[pb.Envelope(recipient=o, data=data) for o in owners]),
            stub.Relay,
        ),
    }[kind]
    try:
        call(request, timeout=RELAY_TIMEOUT)
    except grpc.RpcError as err:
        assert err.code() in (
            grpc.StatusCode.INVALID_ARGUMENT,
            grpc.StatusCode.FAILED_PRECONDITION,
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        ), err.details()
    # Whatever came before, the honest pair still works (a fuzzed node may have registered itself).
    server.dispatcher.register("node-a", [info(A0)])
    server.dispatcher.register("node-b", [info(B0)])
    assert server.dispatcher.relay("node-a", [(B0, envelope("s", A0, B0))])[0] == 1
    assert ring_tasks(server.dispatcher, "node-b")


def test_server_interceptors_see_every_call():
    class Record(grpc.ServerInterceptor):
        def __init__(self):
            self.methods = []

        def intercept_service(self, continuation, handler_call_details):
            self.methods.append(handler_call_details.method)
            return continuation(handler_call_details)

    record = Record()
    server = CoordinatorServer(tls=None, interceptors=[record])
    port = server.start("127.0.0.1:0")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as channel:
            pb_grpc.CoordinatorStub(channel).RegisterNode(
                pb.RegisterNodeRequest(node_id="node-a", owners=[pb.OwnerInfo(owner_id=A0)]), timeout=REGISTER_TIMEOUT
            )
    finally:
        server.stop(0)
    assert record.methods == ["/privfed.v1.Coordinator/RegisterNode"]


def test_a_poll_whose_caller_is_gone_takes_no_task(dispatcher):
    # Issue 27: a long poll of a stream that ended (or a session the node replaced) wakes when its
    # node's tasks are queued again, and must leave them for the node's new call, not drain them
    # into an answer nobody reads.
    gone = threading.Event()
    polled: list = []
    poll = threading.Thread(
        target=lambda: polled.append(dispatcher.pull("node-c", 30.0, None, lambda: not gone.is_set()))
    )
    poll.start()
    gone.set()

    def run():
        with pytest.raises(JobAborted):
            dispatcher.run([Task("t1", C0, "r1", RingMessageTask(b""))], timeout=30)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    poll.join(10)
    assert polled == [([], False)]
    tasks, _ = dispatcher.pull("node-c", 5.0)  # the node's new call
    assert [t.task_id for t in tasks] == ["t1"]
    dispatcher.abort()
    runner.join(10)


def test_a_rounds_unanswered_tasks_name_their_nodes_by_state(dispatcher):
    """Walkthrough 6, W6-5: the round's warning said "silent nodes: none", and called a node that had said it leaves
    silent. Each node with an unanswered task is named as it is: left, or online and too slow."""
    tasks = [Task(f"t{i}", o, "r1", RingMessageTask(b"")) for i, o in enumerate((A0, B0, C0))]
    dispatcher.leave("node-c")
    box: dict = {}
    runner = threading.Thread(target=lambda: box.setdefault("outcome", dispatcher.run(tasks, timeout=1.0)))
    runner.start()
    pulled, _ = dispatcher.pull("node-a", 5.0)
    dispatcher.push("node-a", [Result(t.task_id, t.owner_id, Refusal.of("internal")) for t in pulled])
    runner.join(timeout=30)
    outcome = box["outcome"]
    assert sorted(outcome.lost) == ["t1", "t2"] and outcome.lost_nodes == ["node-c"]
    assert outcome.unanswered_by == {"node-b": "online", "node-c": "left"}
    assert outcome.unanswered_line() == "node-b: online, no answer in time; node-c: left"


def test_the_first_task_that_asks_an_owner_for_a_release_is_announced_before_any_node_can_take_it(dispatcher):
    """Walkthrough 7, W7-6: a service killed while its job waited for owners could not tell, at its restart, whether
    any owner had been asked; ``privfed serve`` records it through this hook, called once per job, before the
    first task that asks for a release is queued (an accept round's joins ask for nothing)."""
    from privfed.common.tasks import JoinTask

    seen: list[int] = []
    dispatcher.on_first_ask = lambda: seen.append(len(dispatcher.pull("node-a", 0.0)[0]))  # what a node could take
    dispatcher.begin_job(None)
    dispatcher.run([Task("j0", A0, "accept", JoinTask())], timeout=0.0)
    dispatcher.pull("node-a", 0.0)
    assert seen == [] and not dispatcher.asked
    dispatcher.run(
        [Task("t0", A0, "r1", RingMessageTask(b"")), Task("t1", A1, "r1", RingMessageTask(b""))], timeout=0.0
    )
    dispatcher.run([Task("t2", A0, "r2", RingMessageTask(b""))], timeout=0.0)
    assert seen == [0] and dispatcher.asked  # once, with nothing yet to take
    dispatcher.begin_job(None)
    dispatcher.run([Task("t3", B0, "r1", RingMessageTask(b""))], timeout=0.0)
    assert seen == [0, 0]  # the next job's first ask
