"""Issue 27: a node's Session stream passes the checks of a PushResults call on every message, against
the REAL coordinator over mTLS, with a client holding owner-1's certificate as the attacker: it cannot
open a session for another node, switch node ids inside its session, or push a result for an owner it
does not host (the stream ends with INVALID_ARGUMENT and nothing is recorded), and a second session of
the same node ends the first (one stream per node)."""

import grpc
import pytest
from hostile import cert_pem, tls_files

from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.tasks import Refusal, Result
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.proto.transport import REGISTER_TIMEOUT, channel_credentials, channel_options

WAIT = 20.0


def _stub(server, certs, name):
    channel = grpc.secure_channel(
        f"127.0.0.1:{server.port}", channel_credentials(tls_files(certs, name)), options=channel_options()
    )
    return channel, pb_grpc.CoordinatorStub(channel)


def _register(stub, certs, node):
    owner = pb.OwnerInfo(owner_id=f"{node}.o00000", x25519_public_key=public_bytes(generate_private_key()))
    stub.RegisterNode(
        pb.RegisterNodeRequest(node_id=node, owners=[owner], node_certificate=cert_pem(certs, node)),
        timeout=REGISTER_TIMEOUT,
    )


def _session(stub, messages):
    """Open a session sending ``messages``; returns the answers read until the stream ended, and the
    error that ended it (None: it ended cleanly)."""
    answers = []
    try:
        for answer in stub.Session(iter(messages), timeout=WAIT):
            answers.append(answer)
    except grpc.RpcError as exc:
        return answers, exc
    return answers, None


def _refusal(owner_id, task_id="t-1"):
    return serde.result_to_proto(Result(task_id, owner_id, Refusal.of("internal")))


@pytest.fixture
def nodes(real_coordinator, certs):
    """Stubs of owner-0 (the victim) and owner-1 (the attacker), both registered."""
    opened = [_stub(real_coordinator, certs, n) for n in ("owner-0", "owner-1")]
    for (_, stub), node in zip(opened, ("owner-0", "owner-1")):
        _register(stub, certs, node)
    yield [stub for _, stub in opened]
    for channel, _ in opened:
        channel.close()


def _pushed(server):
    with server.dispatcher._cv:
        return list(server.dispatcher._arrived)


@pytest.mark.parametrize(
    "messages",
    [
        # a session opened in another node's name
        [pb.PushResultsRequest(node_id="owner-0")],
        # its own session, then a message in another node's name
        [pb.PushResultsRequest(node_id="owner-1"), pb.PushResultsRequest(node_id="owner-0")],
        # a result for an owner it does not host, first or after a good message
        [pb.PushResultsRequest(node_id="owner-1", results=[_refusal("owner-0.o00000")])],
        [
            pb.PushResultsRequest(node_id="owner-1"),
            pb.PushResultsRequest(node_id="owner-1", results=[_refusal("owner-0.o00000")]),
        ],
    ],
    ids=["other-node", "switch-node", "not-hosted", "not-hosted-later"],
)
def test_every_session_message_is_checked_like_a_push(real_coordinator, nodes, messages):
    answers, error = _session(nodes[1], messages)
    assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert len(answers) == len(messages) - 1  # the good messages were answered, the bad one ended it
    assert not _pushed(real_coordinator)
    # control: the same attacker's own session works, and the victim's session is untouched by it
    answers, error = _session(nodes[1], [pb.PushResultsRequest(node_id="owner-1")])
    assert error is None and len(answers) == 1 and answers[0].accepted == 0
    answers, error = _session(nodes[0], [pb.PushResultsRequest(node_id="owner-0")])
    assert error is None and len(answers) == 1


def test_a_second_session_of_a_node_ends_the_first(real_coordinator, nodes):
    requests = _Requests()
    first = nodes[1].Session(iter(requests), timeout=WAIT)
    requests.send(pb.PushResultsRequest(node_id="owner-1"))
    assert next(first).accepted == 0
    assert len(real_coordinator.sessions) == 1
    answers, error = _session(nodes[1], [pb.PushResultsRequest(node_id="owner-1")] * 2)
    assert error is None and len(answers) == 2
    with pytest.raises(grpc.RpcError) as ended:
        requests.send(pb.PushResultsRequest(node_id="owner-1"))
        next(first)
    assert ended.value.code() == grpc.StatusCode.CANCELLED
    requests.close()
    assert real_coordinator.sessions.opened == 2


class _Requests:
    """A request iterator fed one message at a time."""

    def __init__(self):
        import queue

        self._q = queue.SimpleQueue()

    def send(self, message):
        self._q.put(message)

    def close(self):
        self._q.put(None)

    def __iter__(self):
        return iter(self._q.get, None)
