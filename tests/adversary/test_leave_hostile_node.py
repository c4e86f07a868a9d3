"""Audit 25: a hostile owner node's ``leaving`` push (``PushResultsRequest.leaving``) through the coordinator's
servicer, in process: it can take its own node's owners out of the count, as falling silent does, and nothing
else -- not another node's owners, not a live node's from another connection (a fenced old process, or a second
one with the node's certificate), and a batch other nodes are answering goes on.

``tests/unit/test_job_book.py`` checks ``Dispatcher.leave``; this drives the servicer's ``_push`` (what a
PushResults or a Session message runs, with the caller's connection as gRPC gives it), which records the push's
results first and then takes the leave.
"""

from __future__ import annotations

import threading

import pytest

from privfed.common.errors import RemoteProtocolError
from privfed.common.identity import owner_id
from privfed.common.tasks import OwnerInfo, Refusal, Result, RingMessageTask, Task
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde
from privfed.server.dispatcher import Dispatcher, RunOutcome
from privfed.server.models import ModelStore
from privfed.server.servicer import CoordinatorServicer

#: No wall clock (the dispatcher's is a number the tests move), no child process, no socket.
pytestmark = pytest.mark.in_process

A, B, OLD = "ipv4:10.0.0.1:1111", "ipv4:10.0.0.2:2222", "ipv4:10.0.0.2:1999"


def _owners(node: str, key: bytes, n: int = 2) -> list[OwnerInfo]:
    return [OwnerInfo(owner_id(node, i), x25519_public_key=key + bytes([i])) for i in range(n)]


def _setup(now: list[float] | None = None) -> tuple[Dispatcher, CoordinatorServicer]:
    now = [0.0] if now is None else now
    d = Dispatcher(clock=lambda: now[0], node_timeout=15.0)
    d.register("owner-0", _owners("owner-0", b"zero"), peer=A)
    d.register("owner-1", _owners("owner-1", b"one"), peer=B)
    return d, CoordinatorServicer(d, ModelStore(), require_identity=False)


def _leave(servicer: CoordinatorServicer, node: str, peer: str, results=()) -> pb.PushResultsResponse:
    request = pb.PushResultsRequest(node_id=node, leaving=True, results=[serde.result_to_proto(r) for r in results])
    return servicer._push(node, request, peer, lambda: True)


def test_a_node_that_leaves_takes_only_its_own_owners_out():
    d, servicer = _setup()
    _leave(servicer, "owner-1", B)
    assert sorted(d.live_owners()) == [owner_id("owner-0", i) for i in range(2)]
    assert d.silent_nodes() == {"owner-1"}


def test_a_leave_from_another_connection_takes_nobody_out():
    """A fenced old process (or a second process with the node's certificate) on another connection."""
    d, servicer = _setup()
    with pytest.raises(RemoteProtocolError, match="register again"):
        _leave(servicer, "owner-1", OLD)
    assert len(d.live_owners()) == 4 and d.silent_nodes() == set()


def test_a_leave_that_answers_for_another_nodes_owner_takes_nobody_out():
    d, servicer = _setup()
    forged = Result("t", owner_id("owner-0", 0), Refusal("internal", "x"))
    with pytest.raises(RemoteProtocolError, match="does not host"):
        _leave(servicer, "owner-1", B, [forged])
    assert len(d.live_owners()) == 4 and d.silent_nodes() == set()


def test_a_batch_of_another_node_goes_on_when_a_node_leaves():
    """A batch over both nodes: owner-1 leaves (its task is lost at once, as a silent node's at its timeout);
    owner-0's answer is taken and counted as before."""
    now = [0.0]
    d, servicer = _setup(now)
    t0, t1 = (Task(f"t{i}", owner_id(f"owner-{i}", 0), "r", RingMessageTask(b"")) for i in range(2))
    done: list[RunOutcome] = []
    runner = threading.Thread(target=lambda: done.append(d.run([t0, t1], timeout=60)))
    runner.start()
    assert [t.task_id for t in d.pull("owner-0", 5.0, peer=A)[0]] == ["t0"]
    _leave(servicer, "owner-1", B)
    d.push("owner-0", [Result("t0", t0.owner_id, Refusal("internal", "test"))])
    now[0] += 1.0  # past the batch's next liveness check, far from the node timeout
    runner.join(5)
    assert not runner.is_alive()
    assert done[0].lost == ["t1"] and done[0].lost_nodes == ["owner-1"] and done[0].answered == 1, done[0]
