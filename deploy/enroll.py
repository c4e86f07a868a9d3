"""Enrolment over the network: a party makes its own key, the CA signer certifies it for a token.

Roles (``docker-compose.yml`` and ``deploy/k8s/`` run them as separate containers):

``init`` (the admin; in Compose the one-shot ``certs`` service)
    Makes the CA in ``--pki`` if missing and mints one-time tokens (``deploy/tokens.py``) for the
    coordinator and owner nodes that have none; copies ``ca.pem`` to a public directory and each
    party's token into that party's own directory (``--deliver``), which only it mounts.
``serve`` (the signer, the only process that holds the CA key)
    An HTTPS endpoint (``POST /enroll``, ``GET /healthz``) with a server certificate it issues
    itself from the CA at start: parties trust it by ``ca.pem`` alone. A request carries a node
    name, a token and a certificate signing request (CSR). The signer signs when the token is
    that name's, never used, and the CSR is a valid P-256 request (it proves possession of the
    key only: the name and the role come from the token). The token is recorded as spent on disk
    before the certificate leaves. Anything else is refused with a log line naming the name, the
    peer and why, and an HTTP 4xx answer; the signer keeps serving.
``request`` (a party; in Kubernetes an init container, in Compose the step before the party's
    own command, which ``--`` then execs)
    Makes its key (0600, in a directory of its own) unless it has one, sends the CSR with its
    token, checks the certificate (this key, this name, issued by the CA) and writes it beside
    the key. A party already holding a valid certificate for its key does not ask again, so a
    restarted container (its key and certificate on its own volume) needs no new token.

So no private key ever crosses the network, the CA key stays in the signer, and a token
is good for one certificate for one name, whoever holds it and whichever host it runs on.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import http.client
import json
import os
import signal
import ssl
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes
from cryptography.x509.oid import NameOID

from privfed.common.errors import ConfigError
from privfed.deploy.certs import (
    CA_DIR,
    coordinator_sans,
    issue,
    load_ca,
    make_certs,
    new_key,
    private_dir,
    write_file,
    write_party,
    write_private_key,
)
from privfed.deploy.tokens import (
    BOOK,
    DATA_USER,
    NAME,
    SERVER,
    Entry,
    Refused,
    Spent,
    load_book,
    mint,
    party_roles,
    read_token,
)

#: The signer's port in docker-compose.yml and deploy/k8s/.
PORT = 50052
#: The signer's own certificate name (its SANs: this, loopback and every ``--san``).
SIGNER = "privfed-signer"
#: Largest request body (a P-256 CSR in PEM is ~500 bytes).
MAX_BODY = 16 * 1024
#: Seconds a connected client has for each read or write: a silent one cannot hold a thread for long.
CLIENT_TIMEOUT = 5.0
POLL = 0.5  # seconds between attempts to reach the signer


def init(
    pki: Path,
    owners: list[str],
    *,
    data_users: Sequence[str] = (),
    public: Path | None = None,
    deliver: dict[str, Path] | None = None,
) -> list[str]:
    """Make the CA (if missing) and tokens for the coordinator, ``owners`` and ``data_users`` without one.

    ``ca.pem`` is copied into ``public``; a party's new token into ``deliver[name]/token`` (in
    Compose: the party's own volume). Returns the names minted now.
    """
    make_certs(pki, owners=0, add=True, flat=False, coordinator=False)
    minted = mint(pki, party_roles(owners, data_users))
    if public is not None:
        public.mkdir(parents=True, exist_ok=True)
        write_file(public / "ca.pem", (pki / CA_DIR / "ca.pem").read_bytes(), mode=0o644, replace=True)
    for name, directory in (deliver or {}).items():
        if name in minted:
            directory.mkdir(parents=True, exist_ok=True)
            write_file(directory / "token", minted[name].read_bytes(), mode=0o600, replace=True)
    return sorted(minted)


class Signer:
    """Signs CSRs for tokens (module docstring, ``serve``); thread-safe."""

    def __init__(self, pki: Path, state: Path, *, coordinator_names: list[str]):
        self.ca = load_ca(pki)
        self.book = load_book(pki / CA_DIR / BOOK)
        self.spent = Spent(state)
        self._coordinator_sans = coordinator_sans(coordinator_names)
        self._lock = threading.Lock()

    def sign(self, body: bytes) -> tuple[Entry, bytes]:
        """The entry and PEM certificate for one request body; :class:`Refused` if not signed."""
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
        with self._lock:
            entry = self.spent.check(self.book, name, token)
            server = entry.role == SERVER
            sans = self._coordinator_sans if server else [name]
            unit = DATA_USER if entry.role == DATA_USER else None
            cert = issue(*self.ca, name, key, sans=sans, server=server, role=unit)
            self.spent.spend(entry)
        return entry, cert.public_bytes(serialization.Encoding.PEM)

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


def _log(line: str) -> None:
    print(f"enroll: {line}", file=sys.stderr, flush=True)


class _Handler(BaseHTTPRequestHandler):
    server: SignerServer
    timeout = CLIENT_TIMEOUT
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per decision is logged instead (_log)

    def _reply(self, code: int, text: str) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

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
            entry, pem = self.server.signer.sign(self.rfile.read(length))
        except Refused as exc:
            _log(f"refused a request from {peer}: {exc.reason}{f' ({exc.detail})' if exc.detail else ''}")
            self._reply(403, f"refused: {exc.reason}\n")
            return
        except (OSError, ValueError) as exc:  # a timeout, a reset, a bad header
            _log(f"refused a request from {peer}: unreadable ({type(exc).__name__})")
            return
        _log(f"signed {entry.name} ({entry.role}) for {peer}")
        self._reply(200, pem.decode())


class SignerServer(ThreadingHTTPServer):
    """The signer's HTTPS server; :meth:`start` serves it in a thread."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], signer: Signer, ctx: ssl.SSLContext):
        super().__init__(address, _Handler)
        self.signer = signer
        self._ctx = ctx

    def get_request(self):  # type: ignore[no-untyped-def]  # socketserver's untyped hook
        conn, addr = super().get_request()
        conn.settimeout(CLIENT_TIMEOUT)
        # The handshake runs in the request's thread (first read), so a silent client never blocks accept().
        return self._ctx.wrap_socket(conn, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: object, client_address: object) -> None:
        _log(f"refused a request from {client_address}: {sys.exc_info()[1]!r}")

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
        _log(
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
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = SignerServer.start(pki, state, listen, sans=sans, coordinator_names=coordinator_names)
    stop.wait()
    server.stop()


# ---- the party's side ---------------------------------------------------------------------


def _spki(key: CertificatePublicKeyTypes) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _check_certificate(pem: bytes, ca: x509.Certificate, key: ec.EllipticCurvePrivateKey, name: str) -> None:
    """Raise :class:`ConfigError` unless ``pem`` is a current CA-issued certificate of ``name`` for ``key``."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise ConfigError(f"the certificate for {name} is not issued by the federation CA ({exc!r})") from None
    names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if _spki(cert.public_key()) != _spki(key.public_key()) or names != [name]:
        raise ConfigError(f"the certificate is not {name}'s for this key (common names {names})")
    if cert.not_valid_after_utc <= dt.datetime.now(dt.UTC):
        raise ConfigError(f"the certificate of {name} expired on {cert.not_valid_after_utc:%Y-%m-%d}")


def _own_key(path: Path) -> ec.EllipticCurvePrivateKey:
    if not path.exists():
        key = new_key()
        write_private_key(path, key)
        return key
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"{path}: not an ECDSA key; delete it and enrol again with a new token")
    return key


def request(signer: str, ca_file: Path, tls_dir: Path, name: str, token_file: Path, *, timeout: float) -> Path:
    """Enrol ``name``: its key and certificate in ``tls_dir/name`` (made if missing); return that directory.

    The directory then holds ``ca.pem``, ``<name>.pem`` and ``<name>-key.pem`` (0600), as
    ``TlsFiles.in_dir(directory, name)`` expects.

    Raises
    ------
    ConfigError
        The signer refused (the message says why), was not reachable over TLS with a certificate
        from ``ca_file`` within ``timeout`` seconds, or answered with a certificate that is not
        this name's for this key.
    """
    ca_pem = ca_file.read_bytes()
    ca = x509.load_pem_x509_certificate(ca_pem)
    tls_dir.mkdir(parents=True, exist_ok=True)
    d = private_dir(tls_dir / name)
    key = _own_key(d / f"{name}-key.pem")
    cert_path = d / f"{name}.pem"
    if cert_path.exists():
        with contextlib.suppress(ConfigError):
            _check_certificate(cert_path.read_bytes(), ca, key, name)
            write_file(d / "ca.pem", ca_pem, mode=0o644, replace=True)
            return d  # enrolled before (a restarted container): no token needed
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .sign(key, hashes.SHA256())
    )
    body = json.dumps(
        {"name": name, "token": read_token(token_file), "csr": csr.public_bytes(serialization.Encoding.PEM).decode()}
    ).encode()
    status, text = _post(signer, ssl.create_default_context(cadata=ca_pem.decode()), body, timeout)
    if status != 200:
        raise ConfigError(f"the CA signer at {signer} refused {name}: {text.strip().removeprefix('refused: ')}")
    _check_certificate(text.encode(), ca, key, name)
    write_file(cert_path, text.encode(), mode=0o644, replace=True)
    write_file(d / "ca.pem", ca_pem, mode=0o644, replace=True)
    return d


def _post(signer: str, ctx: ssl.SSLContext, body: bytes, timeout: float) -> tuple[int, str]:
    """``POST /enroll`` to ``signer`` (retried while it is not reachable); status and answer."""
    host, port = split_address(signer)
    deadline = time.monotonic() + timeout
    while True:
        conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=max(1.0, deadline - time.monotonic()))
        try:
            conn.request("POST", "/enroll", body=body, headers={"Content-Type": "application/json"})
            reply = conn.getresponse()
            return reply.status, reply.read(MAX_BODY).decode(errors="replace")
        except ssl.SSLError as exc:  # a server that is not the federation's signer: no retry
            raise ConfigError(f"{signer} is not the federation's CA signer (TLS: {exc.reason})") from None
        except OSError as exc:  # not listening yet, no route yet, a name not resolvable yet
            if time.monotonic() > deadline:
                raise ConfigError(f"no CA signer at {signer} within {timeout:g} s ({exc})") from None
        finally:
            conn.close()
        time.sleep(POLL)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m privfed.deploy.enroll", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("init", help="CA and tokens if missing; ca.pem and tokens delivered")
    q.add_argument("--pki", type=Path, required=True, help="CA root (DIR/ca, DIR/tokens)")
    q.add_argument("--owners", type=int, required=True, help="owner nodes owner-0..owner-<N-1>")
    q.add_argument("--data-user", action="append", default=[], help="a data user's name (repeatable)")
    q.add_argument("--public", type=Path, help="directory to copy ca.pem into")
    q.add_argument(
        "--deliver", nargs=2, action="append", default=[], metavar=("NAME", "DIR"), help="put NAME's token into DIR"
    )
    q = sub.add_parser("serve", help="the CA signer: sign CSRs for one-time tokens over HTTPS")
    q.add_argument("--pki", type=Path, required=True, help="directory holding ca/ca.pem, ca/ca-key.pem, ca/tokens.json")
    q.add_argument("--state", type=Path, required=True, help="writable directory: spent tokens, own TLS pair")
    q.add_argument("--listen", default=f"0.0.0.0:{PORT}", help="HOST:PORT to serve on")
    q.add_argument("--san", action="append", default=[], help="the signer's DNS name or IP as parties dial it")
    q.add_argument("--coordinator-san", action="append", default=[], help="extra coordinator certificate name")
    q = sub.add_parser("request", help="make this party's key and get it certified; then exec the rest")
    q.add_argument("--signer", required=True, help="HOST:PORT of the CA signer")
    q.add_argument("--ca", type=Path, required=True, help="the federation's ca.pem (trust anchor)")
    q.add_argument("--name", required=True, help="this party's name (the token's)")
    q.add_argument("--token-file", type=Path, required=True, help="this party's one-time token")
    q.add_argument("--tls-dir", type=Path, required=True, help="where NAME/ (key, certificate) is kept")
    q.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the signer")
    q.add_argument("command", nargs=argparse.REMAINDER, help="-- then a command to exec once enrolled")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "init":
            minted = init(
                args.pki,
                [f"owner-{i}" for i in range(args.owners)],
                data_users=args.data_user,
                public=args.public,
                deliver={name: Path(d) for name, d in args.deliver},
            )
            _log(f"CA in {args.pki / CA_DIR}; tokens minted for {', '.join(minted) or 'nobody new'}")
        elif args.cmd == "serve":
            serve(args.pki, args.state, args.listen, sans=args.san, coordinator_names=args.coordinator_san)
        else:
            d = request(args.signer, args.ca, args.tls_dir, args.name, args.token_file, timeout=args.timeout)
            _log(f"{args.name} enrolled: {d}")
    except (ConfigError, OSError) as exc:
        print(f"enroll: error: {exc}", file=sys.stderr)
        return 2
    command = args.command[1:] if getattr(args, "command", [])[:1] == ["--"] else getattr(args, "command", [])
    if command:
        os.execvp(command[0], command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
