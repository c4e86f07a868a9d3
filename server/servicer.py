"""Thin gRPC servicer (STYLE rule 10): decode, call the dispatcher or model store, encode,
map domain errors to status codes."""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn

import grpc

from privfed.common.errors import (
    BudgetExceeded,
    ConfigError,
    NodeIdInUse,
    PrivfedError,
    RemoteProtocolError,
    ResourceExhausted,
    RingClosed,
)
from privfed.common.jobinfo import JobInfo
from privfed.common.roles import DATA_USER, role_of
from privfed.common.schema import FederationSchema
from privfed.common.tasks import Result, Task
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.proto.jobwire import job_info_to_proto
from privfed.proto.transport import (
    IDENTITY_RETRY,
    MAX_MESSAGE_BYTES,
    MAX_RESPONSE_TASKS,
    PULL_WAIT,
    response_task_bytes,
)
from privfed.server.contracts import Rejection
from privfed.server.dispatcher import Dispatcher
from privfed.server.joblog import outside_jobs
from privfed.server.models import ModelStore, has_probabilities, model_linear_stage
from privfed.server.revocation import revoked_message
from privfed.server.sessions import Sessions

log = logging.getLogger("privfed.coordinator")

_STATUS = [  # first match wins: subclasses before their bases
    (NodeIdInUse, grpc.StatusCode.ALREADY_EXISTS),
    (RingClosed, grpc.StatusCode.FAILED_PRECONDITION),
    (RemoteProtocolError, grpc.StatusCode.INVALID_ARGUMENT),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (BudgetExceeded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
]


def status_code(exc: PrivfedError) -> grpc.StatusCode:
    """The gRPC status a call that raised ``exc`` is answered with, chosen by the error's type.

    A node's call can only meet the errors of :data:`_STATUS`; anything else (a
    :class:`~privfed.common.errors.RoundFailed` or ``JobAborted`` of the coordinator's own job,
    a ``LocalProtocolError``) is a coordinator bug from the caller's point of view: INTERNAL.
    """
    return next((c for t, c in _STATUS if isinstance(exc, t)), grpc.StatusCode.INTERNAL)


def _abort(context: grpc.ServicerContext, exc: PrivfedError, level: int = logging.WARNING) -> NoReturn:
    with outside_jobs():  # the service's own traffic, with a node's address: not in a data user's job log (W7-12)
        log.log(level, "rejecting call from %s: %s", context.peer(), exc)
    context.abort(status_code(exc), str(exc))
    raise AssertionError("grpc.ServicerContext.abort raises")  # for the type checker


def decode_results(messages: Iterable[pb.Result]) -> tuple[list[Result], list[Rejection]]:
    """Each result decoded alone: one that does not decode (a non-finite matrix, a shape that does
    not match its bytes, an unknown refusal code) becomes a :class:`Rejection` of its owner, and
    the other results of the push still count (issue 23, item 1)."""
    results: list[Result] = []
    rejected: list[Rejection] = []
    for m in messages:
        try:
            results.append(serde.result_from_proto(m))
        except (PrivfedError, ValueError, TypeError) as exc:
            rejected.append(Rejection(m.task_id, m.owner_id, "undecodable", f"{exc}"[:200]))
    return results, rejected


def peer_identity(context: grpc.ServicerContext) -> str | None:
    """The common name of the client's verified certificate (None without TLS)."""
    names = context.auth_context().get("x509_common_name")
    return names[0].decode() if names else None


@functools.lru_cache(maxsize=1024)
def _role(pem: bytes) -> str:
    return role_of(pem)


def peer_certificate(context: grpc.ServicerContext) -> bytes | None:
    """The DER bytes of the client's verified certificate (None without TLS)."""
    pems = context.auth_context().get("x509_pem_cert")
    return certificate_der(bytes(pems[0])) if pems else None


def certificate_der(pem: bytes) -> bytes:
    """A PEM certificate's DER bytes: the same certificate however its PEM text is wrapped."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


def peer_role(context: grpc.ServicerContext) -> str | None:
    """The role of the client's verified certificate (:mod:`privfed.common.roles`; None without TLS)."""
    pems = context.auth_context().get("x509_pem_cert")
    return _role(bytes(pems[0])) if pems else None


class CoordinatorServicer(pb_grpc.CoordinatorServicer):
    """``schema``: the federation schema every registering node receives (public configuration);
    ``sessions``: where the nodes' open Session streams are kept (a new registry if None)."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        models: ModelStore,
        *,
        require_identity: bool,
        schema: FederationSchema | None = None,
        sessions: Sessions | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        revoked: Callable[[str], bool] = lambda _: False,
    ):
        self._dispatcher = dispatcher
        self._revoked = revoked  # privfed serve --revoked-data-users: refused models and predictions too
        self._max_task_bytes = response_task_bytes(max_message_bytes)
        self._models = models
        self._require_identity = require_identity
        self._schema = "" if schema is None else schema.to_json()
        self._sessions = Sessions() if sessions is None else sessions
        self._in_use_logged: dict[str, float] = {}  # node id -> when its NodeIdInUse was last logged as a warning

    def _encode_tasks(self, node_id: str, tasks: list[Task], job: JobInfo | None) -> list[pb.Task]:
        """Encode tasks of ``job`` for one response of at most ``response_task_bytes`` of the message bound and MAX_RESPONSE_TASKS;
        the rest go back to the front of the node's queue for its next call (always at least one
        task per response), unless another job began meanwhile."""
        encoded: list[pb.Task] = []
        size = 0
        for k, t in enumerate(tasks):
            if k == MAX_RESPONSE_TASKS:
                self._dispatcher.requeue(node_id, tasks[k:], job)
                break
            msg = serde.task_to_proto(t)
            size += msg.ByteSize()
            if encoded and size > self._max_task_bytes:
                self._dispatcher.requeue(node_id, tasks[k:], job)
                break
            encoded.append(msg)
        return encoded

    def _node_id(self, claimed: str, context: grpc.ServicerContext) -> str:
        identity = peer_identity(context)
        if self._require_identity and identity != claimed:
            raise RemoteProtocolError(f"node id {claimed!r} does not match its certificate ({identity!r})")
        if self._require_identity and peer_role(context) == DATA_USER:
            raise RemoteProtocolError(
                f"{identity!r} holds a data-user certificate: it submits jobs, it hosts no owners"
            )
        return claimed

    def RegisterNode(self, request: pb.RegisterNodeRequest, context: grpc.ServicerContext) -> pb.RegisterNodeResponse:
        try:
            node_id = self._node_id(request.node_id, context)
            owners = [serde.owner_info_from_proto(o) for o in request.owners]
            session = self._dispatcher.register(  # which logs the registration once it takes effect
                node_id,
                owners,
                bytes(request.node_certificate),
                context.peer(),
                part=request.part,
                parts=request.parts,
                key_tree_signature=bytes(request.key_tree_signature),
            )
            return pb.RegisterNodeResponse(session_id=session, schema=self._schema)
        except NodeIdInUse as exc:  # a restarted node retries for IDENTITY_RETRY s: one warning, not one per retry
            now = time.monotonic()
            warn = now - self._in_use_logged.get(request.node_id, -math.inf) > IDENTITY_RETRY
            if warn:
                self._in_use_logged[request.node_id] = now
            _abort(context, exc, logging.WARNING if warn else logging.DEBUG)
        except PrivfedError as exc:
            _abort(context, exc)

    def _take(self, node_id: str, wait_ms: int, peer: str, active: Callable[[], bool]) -> dict[str, Any]:
        """The long poll of PullTasks and of a PushResults with ``pull``, as the fields both answers share: the node's
        queued tasks (waiting up to ``wait_ms``, at most PULL_WAIT; none once ``active()`` is false), whether the
        job is over, the tasks' job, whether the job that is over ended without its result, and the jobs that ended
        since the node was last told (:meth:`~privfed.server.node_calls.NodeCalls.take_ended`)."""
        (tasks, shutdown), job = self._dispatcher.with_job(
            lambda: self._dispatcher.pull(node_id, min(wait_ms / 1000.0, PULL_WAIT), peer, active)
        )
        return dict(
            tasks=self._encode_tasks(node_id, tasks, job),
            shutdown=shutdown,
            job=job_info_to_proto(job) if tasks else None,
            job_failed=shutdown and self._dispatcher.job_failed,
            ended=self._ended(node_id),
        )

    def _ended(self, node_id: str) -> list[pb.JobEnded]:
        """The jobs that ended since the node was last told (:meth:`~privfed.server.node_calls.NodeCalls.take_ended`)."""
        return [pb.JobEnded(job_id=j, failed=f) for j, f in self._dispatcher.take_ended(node_id)]

    def PullTasks(self, request: pb.PullTasksRequest, context: grpc.ServicerContext) -> pb.PullTasksResponse:
        try:
            node_id = self._node_id(request.node_id, context)
            return pb.PullTasksResponse(**self._take(node_id, request.wait_ms, context.peer(), context.is_active))
        except PrivfedError as exc:
            _abort(context, exc)

    def _push(
        self, node_id: str, request: pb.PushResultsRequest, peer: str, active: Callable[[], bool]
    ) -> pb.PushResultsResponse:
        """Record the results; with ``leaving`` (a node stopping cleanly), then stop counting its owners
        (:meth:`~privfed.server.node_calls.NodeCalls.leave`, which takes it from the registration's connection only)
        and answer at once; with ``pull``, then answer the node's next tasks as PullTasks does (one exchange per node
        per round: issue 27); without it, the jobs that ended if the node asks (``hear_ended``: a heartbeat of a long
        batch hears that the batch's job is over, walkthrough 11, W11-9)."""
        results, rejected = decode_results(request.results)
        accepted = self._dispatcher.push(node_id, results, rejected)
        if request.leaving:
            self._dispatcher.leave(node_id, peer, schema_mismatch=request.schema_mismatch)
            return pb.PushResultsResponse(accepted=accepted)
        if not request.pull:
            return pb.PushResultsResponse(accepted=accepted, ended=self._ended(node_id) if request.hear_ended else [])
        return pb.PushResultsResponse(accepted=accepted, **self._take(node_id, request.wait_ms, peer, active))

    def PushResults(self, request: pb.PushResultsRequest, context: grpc.ServicerContext) -> pb.PushResultsResponse:
        try:
            return self._push(self._node_id(request.node_id, context), request, context.peer(), context.is_active)
        except PrivfedError as exc:
            _abort(context, exc)

    def Session(
        self, requests: Iterator[pb.PushResultsRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.PushResultsResponse]:
        """PushResults over one stream, in lockstep (proto/privfed.proto). Every message passes the
        checks of a PushResults call; the first also opens the node's session (it must come from
        the connection the node registered from), which ends the node's older one."""
        node_id: str | None = None
        token: object = None
        peer = context.peer()

        def active() -> bool:  # a stream ended, or superseded by the node's newer session, takes no task
            return context.is_active() and self._sessions.current(node_id or "", token)

        try:
            for request in requests:
                if node_id is None:  # the stream's connection, and so its certificate, is the same for every message
                    claimed = self._node_id(request.node_id, context)
                    self._dispatcher.check_caller(claimed, peer)
                    token = self._sessions.open(claimed, context.cancel)
                    if token is None:  # the node's pushes and polls go as unary calls, which free their thread
                        context.abort(
                            grpc.StatusCode.UNIMPLEMENTED,
                            f"the coordinator's {self._sessions.capacity} sessions are open: push and poll with "
                            "unary calls",
                        )
                    node_id = claimed
                elif request.node_id != node_id:
                    raise RemoteProtocolError(
                        f"a session speaks for the node that opened it ({node_id!r}), not {request.node_id!r}"
                    )
                if not self._sessions.current(node_id, token):
                    raise RemoteProtocolError(f"node {node_id!r} opened a newer session")
                yield self._push(node_id, request, peer, active)
        except PrivfedError as exc:
            _abort(context, exc)
        finally:
            if node_id is not None:
                self._sessions.close(node_id, token)

    def Relay(self, request: pb.RelayRequest, context: grpc.ServicerContext) -> pb.RelayResponse:
        try:
            node_id = self._node_id(request.node_id, context)
            envelopes = [(e.recipient, bytes(e.data)) for e in request.envelopes]
            (accepted, tasks), job = self._dispatcher.with_job(lambda: self._dispatcher.relay(node_id, envelopes))
            encoded = self._encode_tasks(node_id, tasks, job)
            return pb.RelayResponse(accepted=accepted, tasks=encoded, job=job_info_to_proto(job) if tasks else None)
        except PrivfedError as exc:
            _abort(context, exc)

    def _data_user(self, context: grpc.ServicerContext) -> str | None:
        """The caller's name if it holds a data-user certificate (it then uses its own jobs' models
        only), else None (an owner node, or no TLS)."""
        if self._require_identity and peer_role(context) == DATA_USER:
            name = peer_identity(context) or ""
            if self._revoked(name):  # before any model is read (audit 27, A27-3: the job API alone refused them)
                log.warning("model call refused for %r (%s): revoked", name, context.peer())
                context.abort(grpc.StatusCode.PERMISSION_DENIED, revoked_message(name))
            return name
        return None

    def Predict(self, request: pb.PredictRequest, context: grpc.ServicerContext) -> pb.PredictResponse:
        with outside_jobs():  # a data user's or an owner's query: not in the running job's log
            return self._predict(request, context)

    def _predict(self, request: pb.PredictRequest, context: grpc.ServicerContext) -> pb.PredictResponse:
        try:
            rows = serde.reports_from_proto(request.rows)
            answer = self._models.answer(
                request.model_id, rows, probabilities=request.probabilities, data_user=self._data_user(context)
            )
            proba = None if answer.probabilities is None else serde.matrix_to_proto(answer.probabilities)
            return pb.PredictResponse(labels=answer.indices.tolist(), label_values=answer.values, probabilities=proba)
        except PrivfedError as exc:
            _abort(context, exc)

    def GetModel(self, request: pb.GetModelRequest, context: grpc.ServicerContext) -> pb.GetModelResponse:
        with outside_jobs():
            return self._get_model(request, context)

    def _get_model(self, request: pb.GetModelRequest, context: grpc.ServicerContext) -> pb.GetModelResponse:
        try:
            entry = self._models.entry(request.model_id, self._data_user(context))
            kind, stage = model_linear_stage(entry.model)
            return pb.GetModelResponse(
                model_id=request.model_id,
                kind=kind,
                bounds=serde.bounds_to_proto(entry.model.bounds),
                linear_stage=serde.matrix_to_proto(stage),
                classes=entry.classes,
                probabilities=has_probabilities(entry.model),
                schema="" if entry.schema is None else entry.schema.to_json(),
            )
        except PrivfedError as exc:
            _abort(context, exc)
