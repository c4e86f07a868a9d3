"""A node's Session stream (issue 27): its pushes and long polls over one gRPC stream, in lockstep.

``rpc Session(stream PushResultsRequest) returns (stream PushResultsResponse)`` carries what
``PushResults`` carries; the coordinator answers each request with one response, in order, after
it recorded the request's results. One exchange costs a message each way on an open HTTP/2
stream instead of a call (headers, a new stream, a deadline, the coordinator's handler set-up).

Each exchange has a deadline (``timeout``) like a unary call's: a watchdog thread cancels the
stream when an answer is late, and the exchange then raises the stream's ``grpc.RpcError``
(CANCELLED). A stream the coordinator ends raises :class:`SessionEnded`. The node then falls back
on its unary calls and opens another session (``privfed.owner.node``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc

from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc

#: A session's own gRPC deadline (seconds): it is opened again after that, as after a break.
SESSION_TIMEOUT = 3600.0
#: How often the watchdog looks at the exchange in progress (seconds).
WATCH_EVERY = 0.5
#: After a coordinator refuses a session (it has none, or serves as many as it can), the node uses
#: unary calls and asks again after a jittered delay growing from the base to the cap (seconds).
SESSION_RETRY_BASE, SESSION_RETRY_CAP = 1.0, 60.0


class Stopped(grpc.RpcError):
    """A call given up because the node stops (:func:`stoppable`)."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.CANCELLED

    def details(self) -> str:
        return "the node stops"


def stoppable(method: grpc.UnaryUnaryMultiCallable, request: Any, *, timeout: float, stop: threading.Event) -> Any:
    """A unary long poll that ``stop`` gives up at once (:class:`Stopped`), as the Session's watchdog gives up an
    exchange: a coordinator that held the call unanswered held a stopped node until the call's deadline."""
    call = method.future(request, timeout=timeout)
    done = threading.Event()
    call.add_done_callback(lambda _: done.set())  # the answer is taken as it comes; the stop within WATCH_EVERY
    while not done.wait(WATCH_EVERY):
        if stop.is_set():
            call.cancel()
            raise Stopped()
    return call.result()


class SessionEnded(grpc.RpcError):
    """The coordinator ended the stream without an error status (or before answering)."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "the coordinator ended the session"


class NodeSession:
    """One open Session stream (opened lazily by gRPC with its first request)."""

    def __init__(self, stub: pb_grpc.CoordinatorStub, timeout: float, stop: threading.Event | None = None) -> None:
        self._requests: queue.SimpleQueue[pb.PushResultsRequest | None] = queue.SimpleQueue()
        self._responses: Iterator[pb.PushResultsResponse] = stub.Session(
            iter(self._requests.get, None), timeout=SESSION_TIMEOUT
        )
        self._timeout = timeout
        self._stop = stop  # the node's: set, an exchange in progress is given up
        self._due: float | None = None  # when the answer in progress is late
        self._closed = threading.Event()
        threading.Thread(target=self._watch, name="session-watchdog", daemon=True).start()

    def exchange(self, request: pb.PushResultsRequest) -> pb.PushResultsResponse:
        """Send ``request`` and return its answer; raises ``grpc.RpcError`` if the stream broke."""
        self._due = time.monotonic() + self._timeout
        self._requests.put(request)
        try:
            return next(self._responses)
        except StopIteration:
            raise SessionEnded() from None
        finally:
            self._due = None

    def close(self) -> None:
        """End the stream (idempotent)."""
        if not self._closed.is_set():
            self._closed.set()
            self._requests.put(None)
            self._responses.cancel()  # type: ignore[attr-defined]  # a grpc.Call as well

    def _watch(self) -> None:
        """Cancel the stream when the answer in progress is late, or when the node stops (SIGTERM) while it waits
        for one: a coordinator that stopped answering held a node's stop for the exchange's whole deadline (31 s,
        longer than a test's or an orchestrator's patience); the node then pushes what it carried once more and
        leaves."""
        while not self._closed.wait(WATCH_EVERY):
            due = self._due
            if due is not None and (time.monotonic() > due or (self._stop is not None and self._stop.is_set())):
                self._responses.cancel()  # type: ignore[attr-defined]
                return
