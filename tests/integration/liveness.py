"""A coordinator clock for the tests whose seconds pass only while the nodes the test expects alive
show it, so a loaded machine cannot make a healthy node look dead (the fault matrix, and every
integration test that kills or freezes a node and waits for the node timeout: ``fedharness.Federation``
takes one as ``clock``).

The coordinator declares a node lost once it has been silent for longer than its node timeout
(``Dispatcher(clock=...)`` measures it). On the wall clock, a box whose CPU is taken by other work
starves a healthy owner node process for seconds and the coordinator drops it as if it had been
killed: the matrix then tested the load, not the fault. :class:`LivenessClock` runs at the wall
clock's pace while every expected node is visibly alive, and stands still otherwise. A node is
visibly alive while the coordinator holds one of its calls (a long poll, a push being recorded) or
within :data:`GRACE` seconds of its last message or of the coordinator's last answer to it. A
killed or stopped victim is :meth:`~LivenessClock.forget`-ten when its fault fires: from then on
its silence is counted, at the wall clock's pace, for as long as the healthy node keeps calling.
So on a quiet box nothing changes (the clock is the wall clock), and on a loaded one a node is
declared lost only after it has been silent while the others were not.

The clock is fed by :class:`LivenessInterceptor` (one :class:`HeldCalls` per gRPC call). A node that
never calls stops it for good: after ``wall_limit`` wall-clock seconds it runs at the wall clock's pace
whatever the nodes do, so a broken test fails on its own timeouts instead of hanging.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable

import grpc

from privfed.proto import privfed_pb2 as pb

#: Seconds a node counts as alive after its last message, or the coordinator's last answer to it,
#: while the coordinator holds none of its calls: above the owner node's heartbeat period during a
#: long batch (``PUSH_EVERY``, 1 s) and far below the matrix's node timeout, so on a quiet box the
#: clock never stops and only a starved process stops it.
GRACE = 1.5

#: The request message of each node call, by method name (a Session message is a push).
NODE_REQUESTS = {
    "RegisterNode": pb.RegisterNodeRequest,
    "PushResults": pb.PushResultsRequest,
    "Session": pb.PushResultsRequest,
    "Relay": pb.RelayRequest,
    "PullTasks": pb.PullTasksRequest,
}


class LivenessClock:
    """Seconds that pass only while every node in ``expected`` is visibly alive (module docstring).
    A node not heard from yet is not: a process still starting on a loaded box stops the clock."""

    def __init__(self, expected: Iterable[str], wall_limit: float = 600.0):
        self._lock = threading.Lock()
        self._wall_limit = time.monotonic() + wall_limit
        self._expected = set(expected)
        self._held: dict[str, int] = {}
        self._last: dict[str, float] = {}
        self._real = time.monotonic()
        self._seconds = 0.0

    def __call__(self) -> float:
        with self._lock:
            self._advance()
            return self._seconds

    def _advance(self) -> None:
        """Count the wall-clock time since the last event up to the moment the first expected
        node stopped showing life (nodes change state only at events, which advance first)."""
        now = time.monotonic()
        alive_until = now
        for node in self._expected if now < self._wall_limit else ():
            if not self._held.get(node):
                alive_until = min(alive_until, self._last.get(node, -math.inf) + GRACE)
        self._seconds += max(0.0, alive_until - self._real)
        self._real = now

    def held(self, node: str, change: int) -> None:
        """A call of ``node`` reached the coordinator (+1) or was answered or ended (-1)."""
        with self._lock:
            self._advance()
            self._held[node] = self._held.get(node, 0) + change
            self._last[node] = self._real

    def forget(self, node: str) -> None:
        """Stop waiting for ``node`` (a fault killed or stopped it): its silence counts from now."""
        with self._lock:
            self._advance()
            self._expected.discard(node)


def node_of_request(method: str, data: bytes) -> str | None:
    """The node id a node's request claims (None: not a node call, or none given)."""
    cls = NODE_REQUESTS.get(method.rsplit("/", 1)[-1])
    return (cls.FromString(data).node_id or None) if cls is not None else None


class HeldCalls:
    """One gRPC call's messages the coordinator holds (arrived, not answered), told to a clock."""

    def __init__(self, clock: LivenessClock | None, method: str):
        self._clock, self._method = clock, method
        self._lock = threading.Lock()
        self._node: str | None = None
        self._count = 0

    def arrived(self, data: bytes) -> None:
        if self._clock is None:
            return
        with self._lock:
            self._node = self._node or node_of_request(self._method, data)
            if self._node is not None:
                self._count += 1
                self._clock.held(self._node, +1)

    def answered(self) -> None:
        with self._lock:
            if self._count and self._clock is not None and self._node is not None:
                self._count -= 1
                self._clock.held(self._node, -1)

    def ended(self) -> None:
        """The call is over (answered, aborted or cancelled): nothing of it is held any more."""
        with self._lock:
            count, self._count = self._count, 0
            if count and self._clock is not None and self._node is not None:
                self._clock.held(self._node, -count)


class LivenessInterceptor(grpc.ServerInterceptor):
    """Tells ``clock`` which node calls the coordinator holds: each request message of a node call
    counts from its arrival until it is answered (its answer serialized) or its call ends."""

    def __init__(self, clock: LivenessClock):
        self.clock = clock

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or (handler.unary_unary is None and handler.stream_stream is None):
            return handler
        decode, encode = handler.request_deserializer, handler.response_serializer
        held = HeldCalls(self.clock, handler_call_details.method)

        def arrived(data: bytes):
            held.arrived(data)
            return decode(data) if decode is not None else data

        def answered(response):
            data = encode(response) if encode is not None else response
            held.answered()
            return data

        if handler.stream_stream is not None:  # a node's Session: each message and each answer
            stream = handler.stream_stream

            def session(requests, context):
                try:
                    yield from stream(requests, context)
                finally:
                    held.ended()

            return grpc.stream_stream_rpc_method_handler(
                session, request_deserializer=arrived, response_serializer=answered
            )
        unary = handler.unary_unary

        def call(request, context):
            try:
                return unary(request, context)
            finally:
                held.ended()

        return grpc.unary_unary_rpc_method_handler(call, request_deserializer=arrived, response_serializer=answered)
