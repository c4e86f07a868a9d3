"""The coordinator's gRPC server: servicer + health service, mTLS by default."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from privfed.common.addresses import address_refusal
from privfed.common.errors import ConfigError
from privfed.common.schema import FederationSchema
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.transport import (
    MAX_MESSAGE_BYTES,
    SHUTDOWN_GRACE,
    RejectUndecodable,
    TlsFiles,
    server_credentials,
    server_options,
)
from privfed.server.dispatcher import Dispatcher
from privfed.server.joblog import outside_jobs
from privfed.server.models import ModelStore
from privfed.server.revocation import revoked_certificate_message
from privfed.server.servicer import CoordinatorServicer, peer_identity
from privfed.server.sessions import Sessions

log = logging.getLogger("privfed.coordinator")

SERVICE_NAME = "privfed.v1.Coordinator"
#: gRPC worker threads (started as calls need them). Every node's long poll holds one for up to
#: ``PULL_WAIT`` (1 s): with fewer workers than nodes plus their pushes, a call waits for a poll to
#: end. At 32 workers a round of 50 one-owner nodes took 1.07 s against 25 ms of computation.
MAX_WORKERS = 512


class RefuseRevokedCertificates(grpc.ServerInterceptor):
    """Answer PERMISSION_DENIED to every call whose TLS peer presents a certificate ``revoked`` (its PEM) says is
    revoked: ``privfed serve --revoked-certificates`` (walkthrough 9, W9-2: a re-keyed node's old key still
    registered as the node and called Predict).

    One check in front of every service on the port, rather than one per method: node registration, polls, pushes
    and relayed envelopes (owner nodes hosting ring peers), Predict and GetModel, the job API and the health check
    alike, and each message of a Session stream, so a node registered before its certificate was revoked is refused
    at its next call or message, and then leaves at once (``on_refused``, with the certificate's name and the
    connection: the dispatcher's :meth:`~privfed.server.node_calls.NodeCalls.revoked`)."""

    def __init__(
        self, revoked: Callable[[bytes], bool], on_refused: Callable[[str, str], None] = lambda _name, _peer: None
    ) -> None:
        self._revoked = revoked
        self._on_refused = on_refused
        self._logged: set[bytes] = set()  # certificates already refused at WARNING: a polling node retries every second

    def _check(self, context: grpc.ServicerContext) -> None:
        pems = context.auth_context().get("x509_pem_cert")
        if pems and self._revoked(bytes(pems[0])):
            name = peer_identity(context)
            with outside_jobs():  # the operator's, not a data user's job log
                first = bytes(pems[0]) not in self._logged
                self._logged.add(bytes(pems[0]))
                log.log(
                    logging.WARNING if first else logging.DEBUG,
                    "call refused for %r (%s): its certificate is revoked",
                    name,
                    context.peer(),
                )
            if name:
                self._on_refused(name, context.peer())
            context.abort(grpc.StatusCode.PERMISSION_DENIED, revoked_certificate_message(name or "?"))

    def _each(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        for request in requests:
            self._check(context)
            yield request

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        codec = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }

        def first(behavior: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[[Any, grpc.ServicerContext], Any]:
            def checked(request: Any, context: grpc.ServicerContext) -> Any:
                self._check(context)
                return behavior(request, context)

            return checked

        def every(behavior: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[[Any, grpc.ServicerContext], Any]:
            return first(lambda requests, context: behavior(self._each(requests, context), context))

        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(first(handler.unary_unary), **codec)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(first(handler.unary_stream), **codec)
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(every(handler.stream_unary), **codec)
        return grpc.stream_stream_rpc_method_handler(every(handler.stream_stream), **codec)


class CoordinatorServer:
    """Owns the gRPC server, the dispatcher (owner registry + queues) and the model store.

    ``interceptors`` are gRPC server interceptors, run on every call (the wire-capture tests
    record traffic with one); ``handlers`` serve more gRPC services on the same port;
    ``max_message_bytes`` bounds every message (smaller only in tests); ``revoked_certificates`` says whether a
    TLS peer's certificate (PEM) is revoked (:class:`RefuseRevokedCertificates`).
    """

    def __init__(
        self,
        *,
        tls: TlsFiles | None,
        node_timeout: float = 15.0,
        max_workers: int = MAX_WORKERS,
        interceptors: Sequence[grpc.ServerInterceptor] = (),
        schema: FederationSchema | None = None,
        handlers: Sequence[grpc.GenericRpcHandler] = (),
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        models: ModelStore | None = None,
        revoked: Callable[[str], bool] = lambda _: False,
        revoked_certificates: Callable[[bytes], bool] = lambda _: False,
    ):
        self.dispatcher = Dispatcher(node_timeout=node_timeout)
        self.models = ModelStore() if models is None else models
        self.sessions = Sessions(capacity=max_workers // 2)  # the nodes' open Session streams, half the workers
        self._tls = tls
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers),
            # No SO_REUSEPORT (gRPC's default on Linux): a second coordinator on a taken port must
            # fail to bind, not silently share the port and take half the owners' calls.
            options=[*server_options(max_message_bytes), ("grpc.so_reuseport", 0)],
            # the revocation first: a revoked peer hears nothing but that it is revoked
            interceptors=(
                RefuseRevokedCertificates(revoked_certificates, on_refused=self.dispatcher.revoked),
                RejectUndecodable(),
                *interceptors,
            ),
        )
        pb_grpc.add_CoordinatorServicer_to_server(
            CoordinatorServicer(
                self.dispatcher,
                self.models,
                require_identity=tls is not None,
                schema=schema,
                sessions=self.sessions,
                max_message_bytes=max_message_bytes,
                revoked=revoked,
            ),
            self._server,
        )
        if handlers:  # more services on the same port (``privfed serve``'s job API)
            self._server.add_generic_rpc_handlers(tuple(handlers))
        self._health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        self.port: int | None = None

    def start(self, address: str = "127.0.0.1:0") -> int:
        """Bind ``address`` and serve; returns the port. A taken or unavailable address raises
        :class:`ConfigError` naming it; so does a Unix socket or a percent-encoded address (:func:`~privfed.common.addresses.address_refusal`)."""
        refused = address_refusal(address)
        if refused:
            raise ConfigError(f"--listen {address}: {refused}")
        try:
            if self._tls is None:
                log.warning("coordinator listening WITHOUT TLS on %s (--insecure: byte-capture tests only)", address)
                self.port = self._server.add_insecure_port(address)
            else:
                self.port = self._server.add_secure_port(address, server_credentials(self._tls))
        except RuntimeError:  # grpc's "Failed to bind"
            self.port = 0
        if not self.port:
            raise ConfigError(
                f"--listen {address}: cannot listen there (port in use by another process, or not an address of "
                "this host); stop the other process or choose another port"
            )
        self._server.start()
        for name in ("", SERVICE_NAME):
            self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("coordinator listening on port %d", self.port)
        return self.port

    def stop(self, grace: float = SHUTDOWN_GRACE) -> None:
        self._health.enter_graceful_shutdown()
        self.dispatcher.shutdown()
        self._server.stop(grace).wait()
