"""Enrolment over the network: a party makes its own key, the CA signer certifies it for a token.

Roles (``docker-compose.yml`` and ``deploy/k8s/`` run them as separate containers):

``init`` (the admin; in Compose the one-shot ``certs`` service)
    Makes the CA in ``--pki`` if missing and mints one-time tokens (``deploy/tokens.py``) for the
    coordinator and owner nodes that have none; copies ``ca.pem`` to a public directory and each
    party's token into that party's own directory (``--deliver``), which only it mounts.
``serve`` (the signer, the only process that holds the CA key; ``deploy/signer.py``)
    Signs a party's certificate request over HTTPS once per token, for the name and role the
    token was minted for; refuses anything else with a log line.
``request`` (a party; in Kubernetes an init container, in Compose the step before the party's
    own command, which ``--`` then execs)
    Makes its key (0600, in a directory of its own) unless it has one, sends the CSR with its
    token, checks the certificate (this key, this name, issued by the CA) and writes it beside
    the key. A party already holding a valid certificate for its key does not ask again, so a
    restarted container (its key and certificate on its own volume) needs no new token.

So no private key ever crosses the network, the CA key stays in the signer, and a token
is good for one key and one name, whoever holds it and whichever host it runs on.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import http.client
import json
import os
import ssl
import sys
import time
from collections.abc import Sequence
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
    make_certs,
    new_key,
    private_dir,
    write_file,
    write_private_key,
)
from privfed.deploy.signer import MAX_BODY, PORT, log, serve, split_address
from privfed.deploy.tokens import mint, party_roles, read_token

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
        except ssl.SSLCertVerificationError as exc:  # a server that is not the federation's signer: no retry
            raise ConfigError(f"{signer} is not the federation's CA signer (TLS: {exc.verify_message})") from None
        except OSError as exc:  # not listening yet, no route yet, a name not resolvable yet, busy (closed)
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
            log(f"CA in {args.pki / CA_DIR}; tokens minted for {', '.join(minted) or 'nobody new'}")
        elif args.cmd == "serve":
            serve(args.pki, args.state, args.listen, sans=args.san, coordinator_names=args.coordinator_san)
        else:
            d = request(args.signer, args.ca, args.tls_dir, args.name, args.token_file, timeout=args.timeout)
            log(f"{args.name} enrolled: {d}")
    except (ConfigError, OSError) as exc:
        print(f"enroll: error: {exc}", file=sys.stderr)
        return 2
    command = args.command[1:] if getattr(args, "command", [])[:1] == ["--"] else getattr(args, "command", [])
    if command:
        os.execvp(command[0], command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
