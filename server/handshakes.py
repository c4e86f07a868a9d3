"""One log line per TLS handshake the coordinator rejects, with the peer's address (issue 23, item 5).

A TLS handshake fails inside gRPC's C core, before any RPC reaches Python: no servicer or
interceptor sees it, and the core logs it only in its own trace, without a hook. So a
``privfed coordinator`` process started with mTLS turns on the core's ``handshaker`` trace
(:data:`TRACE_ENV`, which must be in the environment before ``grpc`` is imported) and reads its own
stderr through a pipe (:func:`log_rejected_handshakes`): every line that is not the core's is
passed through unchanged; each failed handshake record becomes one ``privfed.coordinator``
warning naming the peer and the cause, such as ``TLS handshake from ipv4:10.0.0.7:51128 rejected:
the node's certificate is not signed by the federation's CA (certificate signature failure)``; the
rest of the core's trace is dropped (the command line keeps gRPC quiet otherwise).

The trace is gRPC's, not a stable interface: :func:`parse_record` is tested against the lines of
the installed version, and a format it does not recognise is dropped, never an error.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import re
import sys
import threading

from privfed.server.joblog import outside_jobs

log = logging.getLogger("privfed.coordinator")

#: The environment that makes gRPC's core trace its handshakes on stderr.
TRACE_ENV = {"GRPC_VERBOSITY": "INFO", "GRPC_TRACE": "handshaker"}
#: A line the core writes: severity, date, time, thread, file:line]
_CORE_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w./-]+:\d+\]")
_PEER = re.compile(r"endpoint_peer_address=([^,}\s]+)")
_ERROR = re.compile(r"CallNextHandshakerLocked: error=(.*?)(?:\n| shutdown=)")
#: Causes a failed handshake's error names, and what they mean for a federation.
_CAUSES = (
    (("signature failure", "local issuer", "VERIFY_FAILED", "verify failed", "self signed"),
     "the node's certificate is not signed by the federation's CA"),
    (("PEER_DID_NOT_RETURN_A_CERTIFICATE", "did not return a certificate", "CERTIFICATE_REQUIRED"),
     "the node presented no certificate"),
    (("Socket closed", "Connection reset", "End of TCP stream"),
     "the peer closed the connection during the handshake (a node that does not trust this coordinator's "
     "certificate, or a plain TCP probe)"),
    (("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL"), "the peer does not speak TLS"),
)  # fmt: skip


def parse_record(record: str) -> tuple[str, str] | None:
    """(peer, cause) of one core trace record (a line and its continuation lines) that reports a
    failed handshake; None for any other record."""
    error = _ERROR.search(record)
    if error is None or error.group(1).strip() in ("OK", ""):
        return None
    peer = _PEER.search(record)
    detail = error.group(1).strip()
    for needles, meaning in _CAUSES:
        if any(n in detail for n in needles):
            ssl = detail.rpartition("SSL_ERROR_SSL:")[2].split(":")
            reason = next((p.strip() for p in reversed(ssl) if p.strip() and p.strip() != "OK"), "")
            return (peer.group(1) if peer else "unknown"), f"{meaning} ({reason})" if reason else meaning
    return (peer.group(1) if peer else "unknown"), detail[:200]


def _log_rejections(found: queue.SimpleQueue) -> None:
    """Log what :func:`_pump` found, from a thread of its own: a log line goes to stderr, the pipe the
    pump reads, which must never wait for itself. Each is the service's own traffic, with a caller's address: not in a
    data user's job log (:mod:`privfed.server.joblog`)."""
    with outside_jobs():
        while True:
            log.warning("TLS handshake from %s rejected: %s", *found.get())


def _pump(read_fd: int, out_fd: int, found: queue.SimpleQueue) -> None:
    """Pass stderr through, except the core's trace, whose failed-handshake records go to ``found``."""
    record: list[str] = []

    def flush() -> None:
        if record:
            rejected = parse_record("\n".join(record))
            record.clear()
            if rejected is not None:
                found.put(rejected)

    with os.fdopen(read_fd, "r", errors="replace", closefd=True) as pipe:
        for line in pipe:
            try:
                if _CORE_LINE.match(line):
                    flush()
                    record.append(line.rstrip("\n"))
                    continue
                if record and not line.startswith(("20", "privfed ", "Traceback")):  # a core record goes on
                    record.append(line.rstrip("\n"))
                    continue
                flush()
            except Exception:  # noqa: BLE001 - a parse problem must never swallow the process's stderr
                record.clear()
            data = line.encode(errors="replace")
            while data:
                data = data[os.write(out_fd, data) :]
    flush()


def log_rejected_handshakes() -> bool:
    """Route this process's stderr through the trace reader (module docstring). Call before ``grpc`` is
    imported; returns False (and changes nothing) if it already is, or if ``GRPC_TRACE`` is set."""
    if "grpc" in sys.modules or "GRPC_TRACE" in os.environ:
        return False
    os.environ.update(TRACE_ENV)
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    out_fd = os.dup(2)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    found: queue.SimpleQueue = queue.SimpleQueue()
    reader = threading.Thread(target=_pump, args=(read_fd, out_fd, found), name="handshake-trace", daemon=True)
    reader.start()
    threading.Thread(target=_log_rejections, args=(found,), name="handshake-log", daemon=True).start()

    def drain() -> None:  # at exit: close the pipe (the core's last words go nowhere), pass the rest on
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        reader.join(timeout=2.0)

    atexit.register(drain)
    return True
