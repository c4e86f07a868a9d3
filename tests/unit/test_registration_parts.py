"""Messages that grow with the owners of a node (issue 27). A node whose registration does not fit
one message registers in parts: over a real gRPC server whose message bound is made small here (not
10^6 owners), and the dispatcher's rules for parts (in order, from part 0, the whole checked again
with the last). A pull answer holds a bounded number of tasks, the rest wait in order."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.datasets import load_builtin
from privfed.common.errors import RemoteProtocolError
from privfed.common.identity import owner_id
from privfed.common.ledger import Ledger
from privfed.common.tasks import OwnerInfo
from privfed.owner.data import build_owners
from privfed.owner.node import OwnerNode
from privfed.owner.registration import registration_parts
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.proto.transport import REGISTER_TIMEOUT, channel_options
from privfed.server import nodes, servicer
from privfed.server.app import CoordinatorServer
from privfed.server.dispatcher import Dispatcher
from privfed.server.models import ModelStore
from privfed.server.strategies import make_strategy

LIMIT = 32 * 1024  # bytes per message, for coordinator and node alike
OWNERS = 1500  # about 60 bytes each unsigned: ~3 messages' worth


def test_a_node_larger_than_one_message_registers_in_parts_over_grpc(tmp_path: Path):
    server = CoordinatorServer(tls=None, node_timeout=5.0, max_message_bytes=LIMIT)
    port = server.start("127.0.0.1:0")
    data = load_builtin("synthetic", n_samples=OWNERS, seed=1)
    owners = build_owners(
        data, node_id="owner-0", n_owners=OWNERS, shards=range(OWNERS), seed=1, rng_kind="seeded", rng_seed=1
    )
    infos = [serde.owner_info_to_proto(OwnerInfo(o.owner_id, b"k" * 32)) for o in owners]
    parts = registration_parts("owner-0", b"", infos, LIMIT)
    assert len(parts) >= 3 and all(p.ByteSize() <= LIMIT for p in parts)
    assert [(p.part, p.parts) for p in parts] == [(k, len(parts)) for k in range(len(parts))]
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as channel:
            whole = pb.RegisterNodeRequest(node_id="owner-0", owners=infos)
            with pytest.raises(grpc.RpcError) as refused:  # the bound holds: one message is too large
                pb_grpc.CoordinatorStub(channel).RegisterNode(whole, timeout=REGISTER_TIMEOUT)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        codes: list[int] = []

        def serve() -> None:  # the ledger's SQLite connection belongs to the node's thread
            ledger = Ledger(tmp_path / "owner-0.db", epsilon_budget=1.0)
            node = OwnerNode(
                node_id="owner-0",
                target=f"127.0.0.1:{port}",
                tls=None,
                owners=owners,
                ledger=ledger,
                connect_timeout=10.0,
                max_message_bytes=LIMIT,
            )
            codes.append(node.run())

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        assert server.dispatcher.wait_for_owners(OWNERS, timeout=30) == OWNERS
        assert server.dispatcher.nodes() == {"owner-0": OWNERS}
        server.dispatcher.shutdown()
        thread.join(timeout=15)
        assert codes == [0]
    finally:
        server.stop(grace=0)


def _part(d: Dispatcher, k: int, n: int, ids: range, peer: str = "p") -> str:
    return d.register("node-a", [OwnerInfo(owner_id("node-a", i)) for i in ids], peer=peer, part=k, parts=n)


def test_parts_take_effect_with_the_last_and_must_come_in_order_from_part_0(monkeypatch):
    d = Dispatcher()
    _part(d, 0, 3, range(0, 10))
    _part(d, 1, 3, range(10, 20))
    assert d.owners() == {}  # not yet: the registration is whole with its last part
    _part(d, 2, 3, range(20, 25))
    assert d.nodes() == {"node-a": 25}
    with pytest.raises(RemoteProtocolError, match="without part 0"):
        _part(d, 1, 3, range(30, 31))
    _part(d, 0, 2, range(30, 31))
    with pytest.raises(RemoteProtocolError, match="expected part 1 of 2"):
        _part(d, 1, 2, range(31, 32), peer="another connection")
    with pytest.raises(RemoteProtocolError, match="without part 0"):  # the out-of-order registration was dropped
        _part(d, 1, 2, range(31, 32))
    _part(d, 0, 2, range(0, 5))
    with pytest.raises(RemoteProtocolError, match="twice"):  # the whole is checked again: duplicates across parts
        _part(d, 1, 2, range(4, 6))
    with pytest.raises(RemoteProtocolError, match="one part"):
        _part(d, 1, 1, range(1))
    assert d.nodes() == {"node-a": 25}  # none of the failed registrations changed anything
    monkeypatch.setattr(nodes, "MAX_OWNERS_PER_NODE", 12)
    _part(d, 0, 2, range(0, 10))
    with pytest.raises(RemoteProtocolError, match="MAX_OWNERS_PER_NODE"):
        _part(d, 1, 2, range(10, 13))


def test_a_pull_answer_holds_at_most_max_response_tasks_and_the_rest_waits_in_order(monkeypatch):
    monkeypatch.setattr(servicer, "MAX_RESPONSE_TASKS", 16)
    d = Dispatcher()
    owners = [owner_id("node-a", i) for i in range(40)]
    d.register("node-a", [OwnerInfo(o) for o in owners])
    tasks = make_strategy("ncc", n_classes=2, bounds=Bounds(np.zeros(2), np.ones(2)), epsilon=1.0).configure(
        owners, "r"
    )
    for t in tasks:  # as Dispatcher.run queues them
        d._pending[t.task_id] = t
        d._registry.nodes["node-a"].queue.append(t)
    coordinator = servicer.CoordinatorServicer(d, ModelStore(), require_identity=False)
    answers = []
    for _ in range(3):
        pulled, _ = d.pull("node-a", 0.0)
        answers.append([m.task_id for m in coordinator._encode_tasks("node-a", pulled, d.job)])
    assert [len(a) for a in answers] == [16, 16, 8]
    assert [i for a in answers for i in a] == [t.task_id for t in tasks]
