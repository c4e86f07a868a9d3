"""The CA signer: the one process that holds the CA key, signing certificate requests for tokens.

An HTTPS endpoint (``POST /enroll``, ``GET /healthz``) with a server certificate it issues itself
from the CA at start: parties trust it by ``ca.pem`` alone. A request is JSON with a party name,
its one-time token (``deploy/tokens.py``) and a certificate signing request (CSR). The signer
signs when the token is that name's and not spent, and the CSR is a valid P-256 request (it
proves possession of the key only: the name and the role come from the token). The token is
recorded as spent, with the key it certified, on disk before the certificate leaves; the same
token with the same key again (a party whose answer was lost: it holds the key) gets a
certificate again, with any other key it is refused. Anything else is refused with one log
line naming the peer and why, and an HTTP 403 answer saying less (not whose token it was); the
signer keeps serving. At most :data:`MAX_CLIENTS` connections are served at once, each with
:data:`CLIENT_TIMEOUT` seconds per read and for its whole body. The party's side and the
command line are ``deploy/enroll.py``.
"""

from __future__ import annotations

import json
import signal
import ssl
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from privfed.common.errors import ConfigError
from privfed.deploy.certs import CA_DIR, coordinator_sans, issue, load_ca, private_dir, write_party
from privfed.deploy.signals import set_on_signals, wait_for
from privfed.deploy.tokens import BOOK, DATA_USER, NAME, SERVER, Entry, Refused, Spent, load_book

#: The signer's port in docker-compose.yml and deploy/k8s/.
PORT = 50052
#: The signer's own certificate name (its SANs: this, loopback and every ``--san``).
SIGNER = "privfed-signer"
#: Largest request body (a P-256 CSR in PEM is ~500 bytes).
MAX_BODY = 16 * 1024
#: Seconds a connected client has for each read or write, and for its whole request body: a
#: silent or slow one cannot hold a thread for long.
CLIENT_TIMEOUT = 5.0
#: Connections served at once; more are closed at once with a log line.
MAX_CLIENTS = 32


class Signer:
    """Signs CSRs for tokens (module docstring, ``serve``); thread-safe."""

    def __init__(self, pki: Path, state: Path, *, coordinator_names: list[str]):
        self.ca = load_ca(pki)
        self.book = load_book(pki / CA_DIR / BOOK)
        self.spent = Spent(state)
        self._coordinator_sans = coordinator_sans(coordinator_names)
        self._lock = threading.Lock()

    def sign(self, body: bytes) -> tuple[Entry, bool, bytes]:
        """The entry, whether it was signed before (for this key) and the PEM certificate for one
        request body; :class:`Refused` if not signed."""
        try:
            request = json.loads(body)
            name, token, csr_pem = (str(request[k]) for k in ("name", "token", "csr"))
            csr = x509.load_pem_x509_csr(csr_pem.encode())
            valid = csr.is_signature_valid
        except (ValueError, KeyError, TypeError):
            raise Refused("malformed request (JSON with name, token and a PEM csr expected)") from None
        if not NAME.fullmatch(name):
            raise Refused("not a party name (letters, digits, '.', '-', '_'; at most 64)")
        key = csr.public_key()
        if not (valid and isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1)):
            raise Refused("not a self-signed ECDSA P-256 certificate request", f"for {name}")
        der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        with self._lock:
            entry, again = self.spent.check(self.book, name, token, der)
            server = entry.role == SERVER
            sans = self._coordinator_sans if server else [name]
            unit = DATA_USER if entry.role == DATA_USER else None
            cert = issue(*self.ca, name, key, sans=sans, server=server, role=unit)
            if not again:
                self.spent.spend(entry, der)
        return entry, again, cert.public_bytes(serialization.Encoding.PEM)

    def server_context(self, state: Path, sans: list[str]) -> ssl.SSLContext:
        """A TLS server context with a fresh certificate for the signer itself."""
        d = write_party(
            private_dir(state) / "signer-tls",
            SIGNER,
            ca=self.ca,
            sans=list(dict.fromkeys([SIGNER, "localhost", "127.0.0.1", *sans])),
            server=True,
            force=True,
        )
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(d / f"{SIGNER}.pem", d / f"{SIGNER}-key.pem")
        return ctx


def log(line: str) -> None:
    print(f"enroll: {line}", file=sys.stderr, flush=True)


class _Handler(BaseHTTPRequestHandler):
    server: SignerServer
    timeout = CLIENT_TIMEOUT
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per decision is logged instead (log)

    def _reply(self, code: int, text: str) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self, length: int) -> bytes:
        """``length`` bytes of request body within :data:`CLIENT_TIMEOUT` seconds in all."""
        deadline, data = time.monotonic() + CLIENT_TIMEOUT, b""
        while len(data) < length:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("request body too slow")
            self.connection.settimeout(left)
            chunk = self.rfile.read1(length - len(data))
            if not chunk:
                raise ConnectionError("request body cut short")
            data += chunk
        return data

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._reply(200, "ok\n")
        else:
            self._reply(404, "not found\n")

    def do_POST(self) -> None:
        peer = self.client_address[0]
        try:
            if self.path != "/enroll":
                raise Refused(f"no such endpoint {self.path[:64]!r}")
            length = int(self.headers.get("Content-Length") or -1)
            if not 0 < length <= MAX_BODY:
                raise Refused(f"a request is 1 to {MAX_BODY} bytes with a Content-Length")
            entry, again, pem = self.server.signer.sign(self._body(length))
        except Refused as exc:
            log(f"refused a request from {peer}: {exc.reason}{f' ({exc.detail})' if exc.detail else ''}")
            self._reply(403, f"refused: {exc.reason}\n")
            return
        except (OSError, ValueError) as exc:  # a timeout, a reset, a bad header
            log(f"refused a request from {peer}: unreadable ({type(exc).__name__})")
            return
        log(
            f"signed {entry.name} ({entry.role}) for {peer}{' again: the same key (its answer was lost)' if again else ''}"
        )
        self._reply(200, pem.decode())


class SignerServer(ThreadingHTTPServer):
    """The signer's HTTPS server; :meth:`start` serves it in a thread."""

    daemon_threads = True
    request_queue_size = 128  # a fleet's pods enrol at once: don't drop their connections in the backlog

    def __init__(self, address: tuple[str, int], signer: Signer, ctx: ssl.SSLContext):
        super().__init__(address, _Handler)
        self.signer = signer
        self._ctx = ctx
        self._slots = threading.BoundedSemaphore(MAX_CLIENTS)

    def process_request(self, request, client_address):  # type: ignore[no-untyped-def]  # socketserver's hook
        if not self._slots.acquire(blocking=False):
            log(f"refused a request from {client_address[0]}: {MAX_CLIENTS} connections in progress")
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):  # type: ignore[no-untyped-def]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def get_request(self):  # type: ignore[no-untyped-def]  # socketserver's untyped hook
        conn, addr = super().get_request()
        conn.settimeout(CLIENT_TIMEOUT)
        # The handshake runs in the request's thread (first read), so a silent client never blocks accept().
        return self._ctx.wrap_socket(conn, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: object, client_address: object) -> None:
        log(f"refused a request from {client_address}: {sys.exc_info()[1]!r}")

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @classmethod
    def start(
        cls, pki: Path, state: Path, listen: str, *, sans: Sequence[str] = (), coordinator_names: Sequence[str] = ()
    ) -> SignerServer:
        """Bind ``listen`` (port 0: any free port, see :attr:`port`) and serve in a daemon thread."""
        signer = Signer(pki, state, coordinator_names=list(coordinator_names))
        server = cls(split_address(listen), signer, signer.server_context(state, list(sans)))
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
        log(
            f"signer listening on {listen.rpartition(':')[0]}:{server.port}: {len(signer.book)} tokens, {len(signer.spent)} spent"
        )
        return server

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"{address!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def serve(pki: Path, state: Path, listen: str, *, sans: list[str], coordinator_names: list[str]) -> None:
    """Serve ``POST /enroll`` on ``listen`` until SIGTERM or SIGINT."""
    stop = threading.Event()
    set_on_signals(stop, (signal.SIGTERM, signal.SIGINT))  # not Event.set in the handler (W11-11)
    server = SignerServer.start(pki, state, listen, sans=sans, coordinator_names=coordinator_names)
    wait_for(stop)  # timed: the handler runs whichever thread the signal reaches
    server.stop()
