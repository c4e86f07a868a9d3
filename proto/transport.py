"""gRPC hygiene in one place (STYLE rule 11): deadlines, options, credentials, backoff.

Every RPC passes ``timeout=`` from the constants below. Client keepalive matches the server's
ping policy (otherwise the server answers GOAWAY "too_many_pings"). Message size is bounded
explicitly instead of gRPC's defaults.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

#: One gRPC channel or server option: a name and an int or string value.
Option = tuple[str, int | str]

# --- deadlines (seconds) --------------------------------------------------------------
REGISTER_TIMEOUT = 10.0
PULL_WAIT = 1.0  # how long the coordinator may hold a PullTasks long poll
PULL_TIMEOUT = PULL_WAIT + 10.0  # the client's deadline for that poll
PUSH_TIMEOUT = 30.0
PUSH_PULL_TIMEOUT = PUSH_TIMEOUT + PULL_WAIT  # a push that also long-polls for the next tasks
RELAY_TIMEOUT = 10.0
#: A stopping node's one call saying it leaves (PushResults with ``leaving``): short, as a stop is given little
#: time (``docker compose stop``: 10 s); a coordinator that does not answer in it counts the node until its timeout.
LEAVE_TIMEOUT = 2.0
PREDICT_TIMEOUT = 30.0
HEALTH_TIMEOUT = 2.0
SHUTDOWN_GRACE = 2.0  # server.stop(grace): in-flight RPCs may finish

#: A node id refused as registered by another live process (ALREADY_EXISTS) is retried this
#: long: a restarted node's previous process is seen dead within the coordinator's
#: ``IDENTITY_LIVENESS`` (3 s) of its last call; a true second process then gives up.
IDENTITY_RETRY = 6.0

# --- sizes ----------------------------------------------------------------------------
#: Largest message either side sends or accepts. gRPC refuses a larger one from its length
#: prefix, before reading it (RESOURCE_EXHAUSTED), so one call can cost the coordinator at most
#: this much. It must hold one ring envelope of ``securesum.MAX_MESSAGE_BYTES`` (8 MiB of ring
#: values) plus framing.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def response_task_bytes(max_message_bytes: int = MAX_MESSAGE_BYTES) -> int:
    """The tasks of one PullTasks/Relay answer are cut at this many encoded bytes; the rest wait for
    the next call. A sixteenth of the bound is left for the rest of the response (1 MiB of 16)."""
    return max_message_bytes - max_message_bytes // 16


MAX_RESPONSE_TASK_BYTES = response_task_bytes()
#: ... and at this many tasks: a round's tasks for a node hosting 10^5 owners would otherwise fill
#: 15 MiB responses, whose encoding and decoding held ~100 MB per node in the coordinator and the node
#: alike (issue 27). A multiple of every task kind's batch (``TaskKind.batch``: 1024, 256, 16), so a
#: node's batches start at the same tasks whatever the size of the tasks.
MAX_RESPONSE_TASKS = 16 * 1024

#: Room a request's fields other than its repeated messages take, at most (ids, flags, counts).
REQUEST_FIELDS_ROOM = 64

_KEEPALIVE_TIME_MS = 20_000
_M = TypeVar("_M", bound=Message)


def size_parts(messages: Sequence[_M], budget: int) -> list[list[_M]]:
    """``messages`` in order, cut into runs whose encoding as a repeated field (each message with its
    field tag and length prefix) takes at most ``budget`` bytes; a message larger than that goes alone.
    No messages: one empty run. How a registration, a push or anything else that grows with a node's
    owners fits :data:`MAX_MESSAGE_BYTES` (issue 27)."""
    parts: list[list[_M]] = [[]]
    size = 0
    for m in messages:
        n = m.ByteSize() + 6  # tag, and a length prefix of up to 5 bytes
        if parts[-1] and size + n > budget:
            parts.append([])
            size = 0
        parts[-1].append(m)
        size += n
    return parts


def _common_options(max_message_bytes: int = MAX_MESSAGE_BYTES) -> list[Option]:
    return [
        # Bound what one message may cost us (not gRPC's 4 MiB receive / unbounded send, nor
        # Flower's 2 GiB).
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


def server_options(max_message_bytes: int = MAX_MESSAGE_BYTES) -> list[Option]:
    """``max_message_bytes``: :data:`MAX_MESSAGE_BYTES` but in tests of what does not fit one message."""
    return _common_options(max_message_bytes) + [
        # Accept client pings as often as the client sends them (see channel_options).
        ("grpc.http2.min_recv_ping_interval_without_data_ms", _KEEPALIVE_TIME_MS // 2),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_ping_strikes", 0),
    ]


def channel_options(target_name_override: str | None = None) -> list[Option]:
    opts = _common_options() + [
        # Ping every 20 s so a dead coordinator is noticed between long polls.
        ("grpc.keepalive_time_ms", _KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        # Reconnect quickly after a coordinator restart; our own loop adds jittered backoff.
        ("grpc.initial_reconnect_backoff_ms", 200),
        ("grpc.max_reconnect_backoff_ms", 2_000),
    ]
    if target_name_override:
        opts.append(("grpc.ssl_target_name_override", target_name_override))
    return opts


@dataclass(frozen=True)
class TlsFiles:
    """PEM files written by ``privfed certs``: the CA, and this party's certificate and key."""

    ca: Path
    cert: Path
    key: Path

    @classmethod
    def in_dir(cls, directory: str | Path, name: str) -> TlsFiles:
        d = Path(directory)
        return cls(ca=d / "ca.pem", cert=d / f"{name}.pem", key=d / f"{name}-key.pem")

    def read(self) -> tuple[bytes, bytes, bytes]:
        missing = [str(p) for p in (self.ca, self.cert, self.key) if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"TLS file(s) not found: {', '.join(missing)} ({self._hint()})")
        return self.ca.read_bytes(), self.cert.read_bytes(), self.key.read_bytes()

    def _hint(self) -> str:
        """What to do about missing files: another name's certificate in the folder is a mistyped ``--name`` or
        ``--certs`` (walkthrough 15, W15-14: ``--name clinic-1 --certs certs/clinic-0`` was told to make them)."""
        folder = self.cert.parent
        others = sorted(k.name.removesuffix("-key.pem") for k in folder.glob("*-key.pem")) if folder.is_dir() else []
        if others and self.ca.is_file():
            return (
                f"{folder} holds the certificate of {', '.join(others)}, not of {self.cert.stem}: check --name and "
                "--certs (each node's folder from `privfed certs` holds its own)"
            )
        return "make them with `privfed certs`"


def server_credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    """mTLS: clients must present a certificate issued by our CA."""
    ca, cert, key = tls.read()
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)


def channel_credentials(tls: TlsFiles) -> grpc.ChannelCredentials:
    ca, cert, key = tls.read()
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def peer_identity(target: str, tls: TlsFiles | None, target_name_override: str | None = None) -> str:
    """Whom a channel to ``target`` made by :func:`channel_credentials` and :func:`channel_options` talks to, as far
    as the channel checked it: with TLS, a server whose certificate the federation CA (``tls.ca``) signed for the
    address dialled (``HOST:PORT``), or for ``target_name_override`` (then ``NAME (at HOST:PORT)``); without TLS
    nothing is checked, which the text says. A gRPC client channel does not hand out the server's certificate, so
    the name it was checked for is the identity (an owner's ledger records it with each release:
    :class:`~privfed.common.ledger_records.Recipient`)."""
    if tls is None:
        return f"{target} (insecure: not authenticated)"
    if target_name_override:
        return f"{target_name_override} (at {target})"
    return target


def tls_failure(details: str) -> str | None:
    """The one-line cause of a failed call whose TLS handshake failed verification at this end,
    or None. Such a failure never heals by retrying (issue 23, item 5): the peer's certificate is
    not signed by our CA, or does not name the address dialled."""
    if "not in peer certificate" in details or "Hostname Verification Check failed" in details:
        return (
            "the coordinator's certificate does not name the address dialled (its subject alternative names "
            "list the names it may be reached by); dial one of them, give --target-name NAME with one of them to "
            "reach it at this address, or re-issue it with `privfed certs --san`"
        )
    if "andshake failed" not in details:  # gRPC writes "Tls handshake failed" / "Ssl handshake failed"
        return None
    if "WRONG_VERSION_NUMBER" in details:  # what answered speaks no TLS (walkthrough 6, W6-11: a status page's port)
        return (
            "what answers at that address does not speak TLS: it is not a privfed gRPC port (is it the service's "
            "status page, --status-listen, or an insecure service?); give the --listen address of privfed serve"
        )
    reason = details.rpartition("SSL_ERROR_SSL:")[2].strip().rpartition(":")[0].rpartition(":")[2].strip()
    verify = ("signature failure", "local issuer", "verify failed", "VERIFY_FAILED", "self signed", "self-signed")
    if any(v in details for v in verify):
        return (
            f"the coordinator's certificate is not signed by this node's CA (ca.pem): {reason or 'verification failed'}"
        )
    return f"the TLS handshake with the coordinator failed: {reason or details.strip()[:200]}"


@dataclass
class Backoff:
    """Exponential backoff with full jitter and a cap (Flower's retry_invoker, AWS style)."""

    base: float = 0.2
    cap: float = 5.0
    attempt: int = 0

    def next_delay(self) -> float:
        ceiling = min(self.cap, self.base * (2**self.attempt))
        self.attempt += 1
        # Jitter needs no secrecy, but privfed never touches the `random` module.
        return ceiling * secrets.randbelow(1_000_001) / 1_000_000


# --- undecodable requests ---------------------------------------------------------------
class _Undecodable:
    """What a request that does not parse as its message type decodes to (never raises)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


class RejectUndecodable(grpc.ServerInterceptor):
    """Answer a request whose bytes are not its protobuf message with INVALID_ARGUMENT.

    gRPC's own deserialisation failure is INTERNAL ("Exception deserializing request!"), which
    reads as a server bug; a malformed request is the caller's. Unary-unary methods (every privfed
    RPC but Session, and the health check) and stream-stream ones (Session: a malformed message
    ends the stream); others pass through unchanged.
    """

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        if handler.unary_unary is None and handler.stream_stream is None:
            return handler
        decode, unary, stream = handler.request_deserializer, handler.unary_unary, handler.stream_stream

        def tolerant_decode(data: bytes) -> Any:
            try:
                return decode(data)
            except Exception as exc:  # any parse failure is the caller's malformed message
                return _Undecodable(exc)

        def checked(request: Any, context: grpc.ServicerContext) -> Any:
            if isinstance(request, _Undecodable):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "malformed request: not a valid protobuf message")
            return request

        if stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                lambda requests, context: stream((checked(r, context) for r in requests), context),
                request_deserializer=tolerant_decode,
                response_serializer=handler.response_serializer,
            )
        return grpc.unary_unary_rpc_method_handler(
            lambda request, context: unary(checked(request, context), context),
            request_deserializer=tolerant_decode,
            response_serializer=handler.response_serializer,
        )
