"""Certificate enrolment for owner replicas: each owner makes its own key, the CA signs a CSR.

``docker-compose.yml`` scales one owner service to N identical replicas, and a replica learns
which node it is (``owner-<i>``) only at run time, when it claims slot i
(``deploy/owner_entry.py``). Compose can mount a volume per *service*, never per replica, so a
volume of pre-made owner keys would give every replica every owner's key. Instead:

1. ``init`` (the one-shot ``certs`` service, the only writer of the CA) makes the CA and, in a
   directory of its own, the coordinator pair, if missing (a second ``up`` keeps them), copies
   ``ca.pem`` into the exchange directory and clears the previous run's requests and certificates.
2. An owner replica, once it holds slot i, creates ``owner-<i>-key.pem`` (mode 0600) in a
   directory only it mounts (an anonymous volume: one per container), and writes a certificate
   signing request ``requests/owner-<i>.csr`` to the exchange directory (:func:`enroll`).
3. ``sign`` (the ``ca-signer`` service, which with ``certs`` is the only one to mount the CA)
   signs each ``owner-<i>`` request once, for ``i < --owners``, with client auth only and common
   name ``owner-<i>`` taken from the file name (the CSR only proves possession of its key), and
   writes ``issued/owner-<i>.pem``; it exits 0 once every slot is signed.
4. The replica waits for a certificate carrying *its* public key (a stale one from an earlier
   run never matches), copies it and ``ca.pem`` next to its key and runs ``privfed owner
   --certs`` on that directory.

The exchange directory holds only public material (CSRs, certificates, ``ca.pem``). A private
key never leaves the container that made it; the CA key never leaves the CA's volume.

Each slot is signed once per run: a replica that restarts after the signer has exited keeps its
key (the anonymous volume survives a restart) but, if it claims another slot, waits in vain and
exits with an error; ``docker compose up`` again starts a new run.

Trust: the signer signs whatever CSR appears for a slot it has not signed yet. Only owner
replicas mount the exchange, and they are one operator's identical containers: the point is
that neither the coordinator nor any service but the CA ever holds a key that is not its own.
"""

from __future__ import annotations

import argparse
import shutil
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
    COORDINATOR,
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

REQUESTS = "requests"
ISSUED = "issued"
POLL = 0.2  # seconds between looks at the exchange directory


def _public(obj: CertificatePublicKeyTypes) -> bytes:
    return obj.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def init(pki: Path, coordinator: Path, exchange: Path, *, sans: Sequence[str] = ()) -> None:
    """Make the CA in ``pki`` and the coordinator pair in ``coordinator`` if missing; reset ``exchange``.

    The coordinator pair goes to its own directory (in compose: the volume only the coordinator
    mounts), not under ``pki``, so that the signer, which mounts ``pki``, never sees that key.
    """
    make_certs(pki, owners=0, add=True, flat=False, coordinator=False)
    write_party(coordinator, COORDINATOR, ca=load_ca(pki), sans=coordinator_sans(sans), server=True, add=True)
    exchange.mkdir(parents=True, exist_ok=True)
    for sub in (REQUESTS, ISSUED):
        shutil.rmtree(exchange / sub, ignore_errors=True)
        (exchange / sub).mkdir()
    write_file(exchange / "ca.pem", (pki / "ca" / "ca.pem").read_bytes(), mode=0o644, replace=True)


def sign_pending(pki: Path, exchange: Path, names: list[str], done: set[str]) -> list[str]:
    """Sign every request in ``exchange`` for a name in ``names`` not in ``done``; return them.

    Raises
    ------
    ConfigError
        A request is not a valid, self-signed P-256 CSR.
    """
    signed = []
    ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate] | None = None
    for name in names:
        path = exchange / REQUESTS / f"{name}.csr"
        if name in done or not path.is_file():
            continue
        csr = x509.load_pem_x509_csr(path.read_bytes())
        key = csr.public_key()
        if (
            not csr.is_signature_valid
            or not isinstance(key, ec.EllipticCurvePublicKey)
            or not isinstance(key.curve, ec.SECP256R1)
        ):
            raise ConfigError(f"{path}: not a self-signed ECDSA P-256 certificate request")
        if ca is None:
            ca = load_ca(pki)
        cert = issue(*ca, name, key, sans=[name], server=False)
        write_file(
            exchange / ISSUED / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM), mode=0o644, replace=True
        )
        done.add(name)
        signed.append(name)
    return signed


def sign(pki: Path, exchange: Path, names: list[str], *, timeout: float) -> None:
    """Sign requests until every name in ``names`` has been signed once; raise on ``timeout``."""
    done: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(done) < len(names):
        for name in sign_pending(pki, exchange, names, done):
            print(f"enroll: signed {name}", file=sys.stderr, flush=True)
        if len(done) < len(names):
            if time.monotonic() > deadline:
                missing = ", ".join(n for n in names if n not in done)
                raise ConfigError(
                    f"no certificate request from {missing} within {timeout:g} s; are all owner replicas running?"
                )
            time.sleep(POLL)


def enroll(exchange: Path, tls_dir: Path, name: str, *, timeout: float) -> Path:
    """Make (or reuse) this node's key in ``tls_dir/name``, get it certified, return that directory.

    The directory then holds ``ca.pem``, ``<name>.pem`` and ``<name>-key.pem`` (0600), as
    ``TlsFiles.in_dir(directory, name)`` expects.
    """
    tls_dir.mkdir(parents=True, exist_ok=True)
    d = private_dir(tls_dir / name)
    key_path = d / f"{name}-key.pem"
    if key_path.exists():  # a restarted container keeps its key
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ConfigError(f"{key_path}: not an ECDSA key; delete it and enroll again")
    else:
        key = new_key()
        write_private_key(key_path, key)
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .sign(key, hashes.SHA256())
    )
    write_file(
        exchange / REQUESTS / f"{name}.csr", csr.public_bytes(serialization.Encoding.PEM), mode=0o644, replace=True
    )
    issued = exchange / ISSUED / f"{name}.pem"
    deadline = time.monotonic() + timeout
    while True:
        if issued.is_file():
            cert = x509.load_pem_x509_certificate(issued.read_bytes())
            if _public(cert.public_key()) == _public(key.public_key()):
                break
        if time.monotonic() > deadline:
            raise ConfigError(
                f"no certificate for {name} in {issued.parent} within {timeout:g} s; is the ca-signer service running?"
            )
        time.sleep(POLL)
    ca_pem = (exchange / "ca.pem").read_bytes()
    try:
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise ConfigError(
            f"{issued} is not signed by {exchange / 'ca.pem'} ({exc!r}); rerun the certs service"
        ) from None
    write_file(d / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM), mode=0o644, replace=True)
    write_file(d / "ca.pem", ca_pem, mode=0o644, replace=True)
    return d


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m privfed.deploy.enroll", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("init", help="CA and coordinator pair (kept if present); reset the exchange")
    q.add_argument("--pki", type=Path, required=True, help="CA root (DIR/ca)")
    q.add_argument("--coordinator-out", type=Path, required=True, help="directory of the coordinator's pair")
    q.add_argument("--exchange", type=Path, required=True, help="directory shared with the owners")
    q.add_argument("--san", action="append", default=[], help="extra coordinator name or IP (repeatable)")
    q = sub.add_parser("sign", help="sign owner-0..owner-<N-1> requests once each, then exit")
    q.add_argument("--pki", type=Path, required=True)
    q.add_argument("--exchange", type=Path, required=True)
    q.add_argument("--owners", type=int, required=True, help="owner node slots N")
    q.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for every request")
    args = p.parse_args(argv)
    try:
        if args.cmd == "init":
            init(args.pki, args.coordinator_out, args.exchange, sans=args.san)
            print(
                f"enroll: CA in {args.pki}, coordinator pair in {args.coordinator_out}; exchange {args.exchange} reset",
                file=sys.stderr,
            )
        else:
            if args.owners < 1:
                raise ConfigError(f"--owners must be >= 1, got {args.owners}")
            sign(args.pki, args.exchange, [f"owner-{i}" for i in range(args.owners)], timeout=args.timeout)
    except ConfigError as exc:
        print(f"enroll: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
