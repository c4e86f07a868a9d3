"""The coordinator's gRPC server: servicer + health service, mTLS by default."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

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
from privfed.server.models import ModelStore
from privfed.server.servicer import CoordinatorServicer
from privfed.server.sessions import Sessions

log = logging.getLogger("privfed.coordinator")

SERVICE_NAME = "privfed.v1.Coordinator"
#: gRPC worker threads (started as calls need them). Every node's long poll holds one for up to
#: ``PULL_WAIT`` (1 s): with fewer workers than nodes plus their pushes, a call waits for a poll to
#: end. At 32 workers a round of 50 one-owner nodes took 1.07 s against 25 ms of computation.
MAX_WORKERS = 512


class CoordinatorServer:
    """Owns the gRPC server, the dispatcher (owner registry + queues) and the model store.

    ``interceptors`` are gRPC server interceptors, run on every call (the wire-capture tests
    record traffic with one); ``handlers`` serve more gRPC services on the same port;
    ``max_message_bytes`` bounds every message (smaller only in tests).
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
            interceptors=(RejectUndecodable(), *interceptors),
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
        :class:`ConfigError` naming it."""
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
