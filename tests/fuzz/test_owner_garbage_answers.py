"""Issue 14, item 3: an owner node survives a coordinator that answers with bytes that are not
protobuf on every RPC it calls.

A real gRPC server under the coordinator's certificate answers every call of an honest
``privfed owner`` process with random bytes (seeded) for a while. The node must neither die
nor stop trying: it keeps calling (registration, polls) with backoff, and once a proper
(hostile-harness) coordinator answers on the same port, it registers and serves a task.
"""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
import numpy as np
from hostile import (
    WAIT,
    HostileCoordinator,
    assert_still_serving,
    server_credentials,
    server_options,
    spawn_owner,
    tls_files,
)

METHODS = ("RegisterNode", "PullTasks", "PushResults", "Predict", "GetModel", "Relay")
GARBAGE_SECONDS = 4.0


class GarbageCoordinator:
    """Answers every privfed RPC with bytes drawn from ``answers`` (cycled), and counts calls."""

    def __init__(self, certs, answers: list[bytes]):
        self.calls: dict[str, int] = dict.fromkeys(METHODS, 0)
        self._answers = answers
        self._lock = threading.Lock()
        handlers = {
            m: grpc.unary_unary_rpc_method_handler(self._answer(m)) for m in METHODS
        }  # no (de)serializers: raw bytes in and out
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=server_options())
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("privfed.v1.Coordinator", handlers),)
        )
        self.port = self._server.add_secure_port("127.0.0.1:0", server_credentials(tls_files(certs, "coordinator")))
        self._server.start()

    def _answer(self, method):
        def answer(request: bytes, context) -> bytes:
            with self._lock:
                k = sum(self.calls.values())
                self.calls[method] += 1
            return self._answers[k % len(self._answers)]

        return answer

    def stop(self) -> None:
        self._server.stop(0).wait()


def test_node_survives_garbage_answers(tmp_path, certs):
    rng = np.random.default_rng(14)
    answers = [rng.bytes(int(n)) for n in rng.integers(1, 200, size=50)] + [b"\xff" * 10, b"\x0a\xff\xff\xff"]
    garbage = GarbageCoordinator(certs, answers)
    X, y = np.array([[0.2, 0.4], [0.6, 0.8]]), np.array([0, 1])
    node = spawn_owner(tmp_path, garbage.port, "owner-0", X, y, certs=certs)
    try:
        time.sleep(GARBAGE_SECONDS)
        assert node.alive(), f"garbage answers killed the node:\n{node.log()[-3000:]}"
        assert sum(garbage.calls.values()) >= 2, f"the node gave up after one answer: {garbage.calls}"
        port = garbage.port
        garbage.stop()
        honest = HostileCoordinator(certs, bind_port=port)  # a proper coordinator on the same address
        try:
            honest.wait_registered(node.owner_ids, timeout=WAIT)
            assert_still_serving(honest, node, node.owner_ids[0], d=2)
        finally:
            honest.shutdown = True
            honest.stop()
    finally:
        node.stop()
