"""Fault injection for the fault matrix: a coordinator interceptor that fires a fault at a chosen
protocol step, a TCP proxy that can reset its connections, a tmpfs that can be filled, and the
audit of a wire capture against the owners' ledgers.

A step is recognised either on a request the victim node sends (its ``RegisterNode``, a
``PushResults`` carrying a given result kind, a ``Relay`` with envelopes, a ``Predict``) or on a
task the coordinator is about to hand the victim (in a ``PullTasks`` or ``Relay`` response, just
before it is serialized, so the fault lands before the task leaves). The fault runs in the gRPC
handler thread, once.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from capture import Call, RecordingInterceptor

from privfed.common.identity import node_of
from privfed.common.ledger import Ledger
from privfed.deploy.tcpproxy import RecordingProxy
from privfed.proto import privfed_pb2 as pb

REQUESTS = {
    "RegisterNode": pb.RegisterNodeRequest,
    "PushResults": pb.PushResultsRequest,
    "Relay": pb.RelayRequest,
    "Predict": pb.PredictRequest,
    "PullTasks": pb.PullTasksRequest,
}
#: Result kinds that carry a release an owner debits (the owner core's debits: ``<task id>#<j>``).
SHARE_KINDS = ("ncc_share", "lr_share", "pca_share", "svm_share", "boost_share")
#: Result kinds that say the owner's ring evaluation left (the owner core: debited before the party starts).
RING_KINDS = ("ring_joined", "ring_total")


@dataclass(frozen=True)
class Trigger:
    """Where a fault fires: ``side`` is "request" (a call of ``method`` whose message satisfies
    ``match``) or "task" (a task handed to the victim whose ``kind`` is ``method``)."""

    side: str
    method: str
    match: Callable[[object], bool] = lambda msg: True


def pushes(kind: str) -> Trigger:
    return Trigger("request", "PushResults", lambda m: any(r.WhichOneof("kind") == kind for r in m.results))


class FaultInterceptor(RecordingInterceptor):
    """Records every request (as :class:`RecordingInterceptor`) and runs ``fault()`` once, the
    first time ``trigger`` matches for node ``victim``."""

    def __init__(self, trigger: Trigger, victim: str, fault: Callable[[], None]):
        super().__init__()
        self.trigger, self.victim, self._fault = trigger, victim, fault
        self._once = threading.Lock()
        self.fired = threading.Event()
        self.fault_error: Exception | None = None

    def _fire(self) -> None:
        if self._once.acquire(blocking=False):
            try:
                self._fault()
            except Exception as exc:  # noqa: BLE001 - raised here it would fail the victim's call instead
                self.fault_error = exc
            self.fired.set()

    def _request_matches(self, method: str, data: bytes) -> bool:
        t = self.trigger
        on_session = t.method == "PushResults" and method.endswith("/Session")  # a Session message is one
        if t.side != "request" or not (method.endswith("/" + t.method) or on_session):
            return False
        msg = REQUESTS[t.method].FromString(data)
        return getattr(msg, "node_id", self.victim) == self.victim and t.match(msg)

    def _response_matches(self, response) -> bool:
        if self.trigger.side != "task":
            return False
        return any(
            task.WhichOneof("kind") == self.trigger.method and node_of(task.owner_id) == self.victim
            for task in getattr(response, "tasks", ())
        )

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or (handler.unary_unary is None and handler.stream_stream is None):
            return handler
        method = handler_call_details.method
        decode, encode = handler.request_deserializer, handler.response_serializer

        def recorded(data: bytes):
            with self._lock:
                self._calls.append(Call(method, bytes(data)))
            if not self.fired.is_set() and self._request_matches(method, data):
                self._fire()
            return decode(data) if decode is not None else data

        def serialized(response):
            if not self.fired.is_set() and self._response_matches(response):
                self._fire()
            return encode(response) if encode is not None else response

        if handler.stream_stream is not None:  # a node's Session: each message and each answer
            return grpc.stream_stream_rpc_method_handler(
                handler.stream_stream, request_deserializer=recorded, response_serializer=serialized
            )
        return grpc.unary_unary_rpc_method_handler(
            handler.unary_unary, request_deserializer=recorded, response_serializer=serialized
        )


class ResettingProxy(RecordingProxy):
    """The recording proxy, plus :meth:`reset`: every open connection closed with a TCP RST."""

    def reset(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError:
                pass


class Tmpfs:
    """A small tmpfs mounted at ``path`` (root only); :meth:`fill` takes every free byte."""

    def __init__(self, path: Path, size: str = "4m"):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)

    def fill(self) -> None:
        fd = os.open(self.path / "filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            for size in (1 << 16, 1 << 12, 1):  # big chunks, then the last pages' bytes
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError:
                    pass
        finally:
            os.close(fd)

    def unfill(self) -> None:
        (self.path / "filler").unlink(missing_ok=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)


def freeze(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGSTOP)


def kill9(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


# ---------------------------------------------------------------------------- the audit
@dataclass(frozen=True)
class Audit:
    """A capture compared with the ledgers: ``missing`` releases that reached the coordinator
    without a debit; ``twice`` ledger entries that repeat an (owner, purpose); counts of each."""

    released: int
    debits: int
    missing: list
    twice: list


def ledger_entries(paths: dict[str, Path], owners: dict[str, list[str]], budget: float, delta: float) -> dict:
    """``{owner id: Ledger.history(owner)}`` for every owner of every node ``paths`` names."""
    out = {}
    for node, path in paths.items():
        with Ledger(path, epsilon_budget=budget, delta_budget=delta) as ledger:
            for o in owners[node]:
                out[o] = ledger.history(o)
    return out


def audit(calls: list[Call], history: dict[str, list[dict]]) -> Audit:
    """Every share in a ``PushResults`` that reached the coordinator has the debit
    ``<task id>#<j>`` in its owner's ledger; every ring join or total has a ``boost-eval:`` debit;
    every node that relayed envelopes has one for some owner it hosts; no (owner, purpose) twice."""
    missing, released = [], 0
    for c in calls:
        if c.method.endswith(("/PushResults", "/Session")):  # a Session message is a PushResultsRequest
            for r in pb.PushResultsRequest.FromString(c.data).results:
                kind = r.WhichOneof("kind")
                ids = [h["release_id"] for h in history.get(r.owner_id, [])]
                if kind in SHARE_KINDS:
                    released += 1
                    if not any(i.startswith(f"{r.task_id}#") for i in ids):
                        missing.append((r.owner_id, kind, r.task_id))
                elif kind in RING_KINDS:
                    released += 1
                    if not any(i.startswith("boost-eval:") for i in ids):
                        missing.append((r.owner_id, kind, r.task_id))
        elif c.method.endswith("/Relay"):
            req = pb.RelayRequest.FromString(c.data)
            if req.envelopes:
                hosted = [o for o in history if node_of(o) == req.node_id]
                if not any(h["release_id"].startswith("boost-eval:") for o in hosted for h in history[o]):
                    missing.append((req.node_id, "envelope", ""))
    twice = []
    for o, entries in history.items():
        purposes = [h["purpose"] for h in entries]
        ids = [h["release_id"] for h in entries]
        twice += [(o, p) for p in set(purposes) if purposes.count(p) > 1]
        twice += [(o, i) for i in set(ids) if ids.count(i) > 1]
    return Audit(released, sum(map(len, history.values())), missing, twice)


class Deadlines:
    """Watches ``dispatcher.run``: the batches that waited out their whole timeout (``expired``: round id
    and timeout), measured on ``clock``, the dispatcher's own. A fault detected by silence, a stall or a
    refusal ends its batch sooner; one that is not leaves the job waiting for the round's or a ring
    attempt's deadline (at least 30 s), which the matrix counts as a failure."""

    def __init__(self, dispatcher, clock: Callable[[], float]):
        self.expired: list[tuple[str, float]] = []
        run = dispatcher.run

        def watched(tasks, *, timeout: float, **kw):
            start = clock()
            try:
                return run(tasks, timeout=timeout, **kw)
            finally:
                if clock() - start >= timeout:
                    self.expired.append((tasks[0].round_id if tasks else "", timeout))

        dispatcher.run = watched
