"""An owner node whose coordinator restarted (walkthrough: a ``privfed serve`` restart with daemons connected),
driven by the real node code against real gRPC servers on one port: the first coordinator stops, a new one (which
knows no node) starts. The node registers with it before it pushes what it held: a walkthrough's nodes pushed first,
were refused "has not registered" and logged their results "dropped (already debited)"; and it registers once: the
walkthrough's daemons registered twice, their session of the stopped coordinator failing the next exchange."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.datasets import load_builtin
from privfed.common.identity import owner_id
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Ledger
from privfed.common.tasks import JoinTask, OwnerInfo, PcaShareTask, Refusal, Result, Task
from privfed.owner.data import build_owners
from privfed.owner.node import OwnerNode
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.transport import channel_options
from privfed.server.app import CoordinatorServer
from privfed.server.dispatcher import Dispatcher
from privfed.server.strategies import make_strategy

NODE = "owner-0"


def _node(tmp_path: Path, port: int, *, daemon: bool = False, n_owners: int = 2) -> OwnerNode:
    owners = build_owners(
        load_builtin("synthetic", n_samples=40, seed=1),
        node_id=NODE,
        n_owners=n_owners,
        shards=range(n_owners),
        seed=1,
        rng_kind="seeded",
        rng_seed=1,
    )
    ledger = Ledger(tmp_path / f"{NODE}.sqlite", epsilon_budget=1.0, delta_budget=1e-3)
    return OwnerNode(
        node_id=NODE, target=f"127.0.0.1:{port}", tls=None, owners=owners, ledger=ledger, connect_timeout=20.0,
        daemon=daemon,
    )  # fmt: skip


def _restart_later(port: int, servers: list[CoordinatorServer], delay: float = 0.5) -> threading.Thread:
    """Start a new coordinator on ``port`` after ``delay`` s (appended to ``servers``)."""

    def start() -> None:
        time.sleep(delay)
        server = CoordinatorServer(tls=None, node_timeout=5.0)
        servers.append(server)
        server.start(f"127.0.0.1:{port}")

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    return thread


@contextmanager
def _coordinator_stopped(
    node: OwnerNode, port: int, servers: list[CoordinatorServer], caplog: pytest.LogCaptureFixture
) -> Iterator[pb_grpc.CoordinatorStub]:
    """``node`` registered with ``servers[0]``, which then stops (its log so far cleared): yields the node's stub.
    Every server in ``servers`` is stopped on leaving."""
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            node._register(stub)
            servers[0].stop(grace=0)
            caplog.clear()
            yield stub
    finally:
        for server in servers:
            server.stop(grace=0)


def _registered(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "privfed.coordinator" and " registered " in r.getMessage()
    ]


def _push_across_a_restart(tmp_path: Path, caplog: pytest.LogCaptureFixture, push: str) -> OwnerNode:
    """A registered node's ``push`` (``"_push_and_pull"``, the last push of a batch, or ``"_push"``, one during it)
    of two results while its coordinator is down; a new one starts meanwhile. Returns the node."""
    caplog.set_level(logging.INFO)
    first = CoordinatorServer(tls=None, node_timeout=5.0)
    port = first.start("127.0.0.1:0")
    servers = [first]
    node = _node(tmp_path, port)
    with _coordinator_stopped(node, port, servers, caplog) as stub:
        restart = _restart_later(port, servers)
        held = [Result(f"t{i}", f"{NODE}.o0000{i}", Refusal.of("policy", "held")) for i in range(2)]
        getattr(node, push)(stub, held)
        restart.join()
    return node


def test_a_node_that_lost_its_coordinator_registers_with_the_new_one_before_it_pushes_what_it_held(tmp_path, caplog):
    node = _push_across_a_restart(tmp_path, caplog, "_push_and_pull")  # its exchange fails: the coordinator is down
    assert node._unsent == []  # delivered (the new coordinator drops answers of tasks it never sent)
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage() or "rejecting" in r.getMessage()]
    assert refused == []
    assert len(_registered(caplog)) == 1, _registered(caplog)


def test_a_push_the_new_coordinator_refuses_as_not_registered_goes_again_after_the_node_registers(tmp_path, caplog):
    node = _push_across_a_restart(tmp_path, caplog, "_push")  # retried until the new coordinator answers: refused
    assert node._unsent == []
    assert not [r for r in caplog.records if r.name == "privfed.owner" and r.levelno >= logging.WARNING]
    assert len(_registered(caplog)) == 1, _registered(caplog)


def test_a_daemon_registers_once_with_its_restarted_coordinator(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    first = CoordinatorServer(tls=None, node_timeout=5.0)
    port = first.start("127.0.0.1:0")
    servers = [first]
    codes: list[int] = []
    nodes: list[OwnerNode] = []

    def serve() -> None:  # the ledger's SQLite connection belongs to the node's thread
        nodes.append(_node(tmp_path, port, daemon=True))
        codes.append(nodes[0].run())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        assert first.dispatcher.wait_for_owners(2, timeout=20) == 2
        time.sleep(0.3)  # its long poll on its session
        first.stop(grace=0)  # tells the node the coordinator stopped
        caplog.clear()
        _restart_later(port, servers, 0.2).join()
        deadline = time.monotonic() + 20
        while len(servers) < 2 or servers[1].dispatcher.nodes() != {NODE: 2}:
            assert time.monotonic() < deadline, "the daemon did not register with the new coordinator"
            time.sleep(0.05)
        time.sleep(3)  # a second registration came within about a second (its next exchange)
    finally:
        if nodes:
            nodes[0].stop_event.set()
        thread.join(timeout=15)
        for server in servers:
            server.stop(grace=0)
    assert codes == [0]
    assert len(_registered(caplog)) == 1, _registered(caplog)


def test_a_task_its_node_answered_after_registering_again_is_not_handed_out_again():
    """A node registers before it pushes what it held: its registration queues its unanswered tasks again, the push
    then answers them, and its next poll is not handed them a second time."""
    dispatcher = Dispatcher()
    owner = owner_id(NODE, 0)
    dispatcher.register(NODE, [OwnerInfo(owner)])
    (task,) = make_strategy("ncc", n_classes=2, bounds=Bounds(np.zeros(2), np.ones(2)), epsilon=1.0).configure(
        [owner], "r1"
    )
    dispatcher._pending[task.task_id] = task  # as Dispatcher.run queues it
    dispatcher._registry.nodes[NODE].queue.append(task)
    assert dispatcher.pull(NODE, 0.0)[0] == [task]  # taken; the call that took it broke
    dispatcher.register(NODE, [OwnerInfo(owner)])  # queued again
    assert dispatcher.push(NODE, [Result(task.task_id, owner, Refusal.of("policy", "held"))]) == 1
    assert dispatcher.pull(NODE, 0.0)[0] == []


def test_a_node_whose_coordinator_restarted_during_a_long_batch_registers_again_before_the_batch_ends(
    tmp_path, caplog, monkeypatch
):
    """Walkthrough 11, W11-2: a node computing a long batch (2 min: 200 000 rows per owner) when the service restarted
    was refused its heartbeat once a second ("node 'hosp-d' has not registered", a WARNING each, 87 in all) and
    registered again only when the batch ended; the queued job waited that long for its owners ("hosp-d not back
    since the restart"). Its heartbeat registers it again as soon as the coordinator says it does not know it."""
    import privfed.owner.node as node_module

    monkeypatch.setattr(node_module, "PUSH_EVERY", 0.2)  # heartbeats 5 times as often: the test waits less
    caplog.set_level(logging.INFO)
    first = CoordinatorServer(tls=None, node_timeout=5.0)
    port = first.start("127.0.0.1:0")
    servers = [first]
    node = _node(tmp_path, port)
    seen_during_batch: list[dict[str, int]] = []

    core = node._core
    assert core is not None
    answer = core.answer

    def slow_answer(
        items, **kwargs
    ):  # the node's own core, its batch taking 3 s, watching whom the new coordinator knows
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            time.sleep(0.05)
        seen_during_batch.append(dict(servers[-1].dispatcher.nodes()))
        return answer(items, **kwargs)

    monkeypatch.setattr(core, "answer", slow_answer)
    batch = [Task(f"join-{i}", owner_id(NODE, i), "accept", JoinTask()) for i in range(2)]  # a batch: its heartbeat
    with _coordinator_stopped(node, port, servers, caplog) as stub:
        _restart_later(port, servers, 0.1).join()
        node._answer(stub, batch)
    assert seen_during_batch == [{NODE: 2}], seen_during_batch  # registered before the batch's end
    assert len(_registered(caplog)) == 1, _registered(caplog)
    refused = [r.getMessage() for r in caplog.records if "has not registered" in r.getMessage()]
    assert len(refused) <= 2, refused  # one a heartbeat: 15 in 3 s before


@pytest.mark.parametrize("ended", ["job-dead", "job-other"])
def test_a_node_stops_the_batch_of_a_job_its_restarted_coordinator_says_is_over(tmp_path, caplog, monkeypatch, ended):
    """Walkthrough 11, W11-9: a node computing a long batch when the service restarted went on with the failed job's
    releases for 4 minutes (its owners' ledgers debited them, the new service dropped them) and the next job waited
    for it. The heartbeat that registers it again hears the jobs that ended, and the node stops a batch of an ended
    job before its next chunk; a batch of any other job goes on (``ended``: the job the new service failed)."""
    import privfed.owner.node as node_module

    monkeypatch.setattr(node_module, "PUSH_EVERY", 0.2)
    caplog.set_level(logging.INFO)
    first = CoordinatorServer(tls=None, node_timeout=5.0)
    port = first.start("127.0.0.1:0")
    servers = [first]
    node = _node(tmp_path, port, n_owners=20)  # PCA shares go 16 to a chunk: two chunks
    core = node._core
    assert core is not None
    answer, chunks = core.answer, []

    def slow_answer(items, **kwargs):  # the node's own core, each chunk taking 3 s
        time.sleep(3.0)
        chunks.append(len(items))
        return answer(items, **kwargs)

    monkeypatch.setattr(core, "answer", slow_answer)
    bounds = load_builtin("synthetic", n_samples=40, seed=1).bounds
    spec = PcaShareTask(epsilon=0.5, delta=1e-5, k=2, bounds=bounds, count_epsilon=0.05, scaling="ball")
    batch = [Task(f"pca-{i}", owner_id(NODE, i), "r1", spec) for i in range(20)]
    node._job = JobInfo(job_id="job-dead", data_user="alice", task="feddpdr", epsilon=1.0, delta=1e-5,
                        schema_sha256="")  # fmt: skip
    with _coordinator_stopped(node, port, servers, caplog) as stub:
        _restart_later(port, servers, 0.1).join()
        servers[-1].dispatcher.end_job(ended, failed=True, nodes=[NODE])  # as serve does at start for its last run
        node._answer(stub, batch)
    assert chunks == ([16] if ended == "job-dead" else [16, 4]), chunks
    stopped = [r.getMessage() for r in caplog.records if "stops its batch" in r.getMessage()]
    assert len(stopped) == (ended == "job-dead"), stopped
