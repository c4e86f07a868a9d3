"""How an owner node treats a failed call to the coordinator: try again with backoff, or give up.

A coordinator that is unreachable, slow, or answers with something the node cannot decode is tried again
with jittered exponential backoff until ``--connect-timeout`` seconds of continuous failure
(:data:`RETRYABLE`); a TLS verification failure or any other refusal ends the node with a clear
:class:`ConnectError`. A node id another live process still holds (``ALREADY_EXISTS``: a restarted node's
previous process) is tried for :data:`~privfed.proto.transport.IDENTITY_RETRY` seconds. What the coordinator
refuses of one push or relay (:data:`CALL_REFUSED`) is dropped, and the node goes on: nothing the
coordinator answers to one call may end the node (issue 9, item 7).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import grpc

from privfed.proto.transport import IDENTITY_RETRY, Backoff, tls_failure

_T = TypeVar("_T")
log = logging.getLogger("privfed.owner")

#: Worth another try, with backoff, until --connect-timeout: the coordinator is unreachable, slow,
#: or answered with something this node could not decode or a failure of its own (INTERNAL,
#: UNKNOWN: a garbled or buggy answer says nothing about this node's registration or tasks).
RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    }
)
#: A failed call's status in an owner operator's words (walkthrough 10, W10-9: "UNAVAILABLE", "pushing alone").
_IN_WORDS = {
    grpc.StatusCode.UNAVAILABLE: "no connection, or it dropped",
    grpc.StatusCode.DEADLINE_EXCEEDED: "no answer in time",
    grpc.StatusCode.INTERNAL: "a garbled answer",
    grpc.StatusCode.UNKNOWN: "a garbled answer",
}


def in_words(code: grpc.StatusCode) -> str:
    """``code`` as an owner's operator reads it: ``no connection, or it dropped (UNAVAILABLE)``."""
    words = _IN_WORDS.get(code)
    return f"{words} ({code.name})" if words else code.name


#: The coordinator refused what one push or relay carried (a round it forgot, a ring session it
#: closed or never opened, a limit): those results or envelopes are dropped and the node goes on.
CALL_REFUSED = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.OUT_OF_RANGE,
    }
)

#: While the coordinator stays unreachable, a retry is logged at INFO at most this often, the others at DEBUG: a
#: daemon waits out a coordinator that is down (walkthrough 5b: a line every 1.1 s, the backoff's jittered cap).
RETRY_LOG_EVERY = 60.0

#: What a coordinator answers a node it does not know (it restarted since the node registered: "has not
#: registered"): the node registers again, and then pushes what it holds (:meth:`OwnerNode._push`).
FORGOTTEN = grpc.StatusCode.INVALID_ARGUMENT


class ConnectError(RuntimeError):
    """The coordinator could not be reached (or refused us) for longer than allowed.

    ``code`` is the gRPC status of the last failed call (None if there was none).
    """

    def __init__(self, message: str, code: grpc.StatusCode | None = None):
        super().__init__(message)
        self.code = code


def retry(
    call: Callable[[], _T], what: str, *, target: str, connect_timeout: float, stop_event: threading.Event
) -> _T | None:
    """Call until it succeeds (module docstring); on a stop request, give up after one more attempt (so
    results already debited still get their chance to be delivered) and return None."""
    backoff, started = Backoff(), time.monotonic()
    logged: float | None = None  # when a retry was last logged at INFO
    in_use: tuple[float, str] | None = None  # since when, and why, another live process holds our node id
    while True:
        try:
            return call()
        except grpc.RpcError as exc:
            cause = tls_failure(exc.details() or "")
            if cause is not None:  # verification fails the same way every time: no retry
                raise ConnectError(f"TLS with coordinator {target} failed: {cause}", exc.code()) from exc
            if exc.code() == grpc.StatusCode.ALREADY_EXISTS and in_use is None:
                in_use = (time.monotonic(), exc.details())
                log.warning("%s refused: %s; retrying for %.0f s", what, exc.details(), IDENTITY_RETRY)
            if in_use is not None:  # a restarted node's previous process is soon seen dead; a second one is not
                if stop_event.is_set():
                    return None
                if time.monotonic() - in_use[0] > IDENTITY_RETRY:
                    raise ConnectError(f"{what} refused by coordinator: ALREADY_EXISTS: {in_use[1]}") from exc
                stop_event.wait(backoff.next_delay())
                continue
            if exc.code() not in RETRYABLE:
                raise ConnectError(
                    f"{what} refused by coordinator: {exc.code().name}: {exc.details()}", exc.code()
                ) from exc
            if stop_event.is_set():
                return None
            if time.monotonic() - started > connect_timeout:
                raise ConnectError(
                    f"coordinator {target} unreachable for {connect_timeout:.0f} s during {what}: {exc.details()}",
                    exc.code(),
                ) from exc
            delay, now = backoff.next_delay(), time.monotonic()
            loud = logged is None or now - logged >= RETRY_LOG_EVERY
            logged = now if loud else logged
            log.log(
                logging.INFO if loud else logging.DEBUG,
                "%s: coordinator not reachable or answered badly: %s, for %.0f s; retrying in %.2f s%s",
                what,
                in_words(exc.code()),
                now - started,
                delay,
                f" (said again every {RETRY_LOG_EVERY:.0f} s while it lasts)" if loud else "",
            )
            stop_event.wait(delay)
