"""Certificate enrolment for owner replicas: each owner makes its own key, the CA signs a CSR.

``docker-compose.yml`` scales one owner service to N identical replicas, and a replica learns
which node it is (``owner-<i>``) only at run time, when it claims slot i by holding an exclusive
``flock`` on ``slot-<i>.lock`` (``deploy/owner_entry.py``). Compose can mount a volume per
*service*, never per replica, so a volume of pre-made owner keys would give every replica every
owner's key. Instead:

1. ``init`` (the one-shot ``certs`` service, the only writer of the CA) makes the CA and, in a
   directory of its own, the coordinator pair, if missing (a second ``up`` keeps them), and copies
   ``ca.pem`` into the exchange directory.
2. An owner replica, once it holds slot i, creates ``owner-<i>-key.pem`` (mode 0600) in a
   directory only it mounts (an anonymous volume: one per container) and sends a certificate
   signing request to the signer's Unix socket ``signer.sock`` in the exchange directory,
   together with the open file that holds its slot's lock (``SCM_RIGHTS``) (:func:`enroll`).
3. ``sign`` (the ``ca-signer`` service, which with ``certs`` is the only one to mount the CA)
   answers each request on that socket (:func:`answer`): it finds which slot's lock file the
   passed file is (device and inode), and signs ``owner-<i>`` only if that open file holds the
   slot's exclusive lock (:func:`holds_exclusive_flock`; another open file of the same lock file
   holds nothing), only once per slot and run, for ``i < --owners``, with client auth only and
   common name ``owner-<i>`` (the CSR only proves possession of its key). The certificate goes
   back over the same connection. It exits 0 once every slot is signed.
4. The replica checks that the certificate carries *its* public key, its slot's name and the
   CA's signature, copies it and ``ca.pem`` next to its key and runs ``privfed owner --certs``
   on that directory.

**Trust.** The credential of slot i is its lock, the one thing Compose's identical replicas do
not share: a per-slot token or secret would be mounted into every replica alike. Whoever holds
slot i's lock *is* owner-<i> (it gets slot i's logical owners and ledger too), and flock lets one
container hold it at a time. So a replica can enrol only for slots it holds; one that takes
other slots keeps the honest replicas out of them, and they exit with an error (no free slot,
or a slot already signed), so an identity is never silently shared. A request that is malformed,
comes without a lock file, passes another file, or names a slot held by someone else or signed
already is refused with a log line and an answer saying why; the signer keeps serving. The
exchange directory holds only public material (``ca.pem``, the slot lock files, the socket). A
private key never leaves the container that made it; the CA key never leaves the CA's volume.

Each slot is signed once per run: a replica that restarts after the signer has exited keeps its
key (the anonymous volume survives a restart) but cannot enrol again and exits with an error;
``docker compose up`` again starts a new run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import time
from collections.abc import Iterator, Sequence
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
from privfed.deploy.owner_entry import slot_lock, slot_name

#: The signer's Unix socket in the exchange directory.
SOCKET = "signer.sock"
#: Largest request (a P-256 CSR in PEM is ~500 bytes) and answer the two sides read.
MAX_MESSAGE = 16 * 1024
#: Seconds a connected client has to send its request: a silent one cannot hold the signer up longer.
CLIENT_TIMEOUT = 5.0
POLL = 0.2  # seconds between attempts to reach the signer
_OK, _REFUSED = b"ok\n", b"refused: "


class Refused(Exception):
    """A request the signer does not sign; the message says why (to the log and to the client)."""


def _public(obj: CertificatePublicKeyTypes) -> bytes:
    return obj.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


@contextlib.contextmanager
def _socket_name(path: Path) -> Iterator[str]:
    """``path`` as an address short enough for ``AF_UNIX`` (108 bytes): through ``/proc/self/fd``
    of its directory when the path itself is longer (deep temporary directories)."""
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def init(pki: Path, coordinator: Path, exchange: Path, *, sans: Sequence[str] = ()) -> None:
    """Make the CA in ``pki`` and the coordinator pair in ``coordinator`` if missing; reset ``exchange``.

    The coordinator pair goes to its own directory (in compose: the volume only the coordinator
    mounts), not under ``pki``, so that the signer, which mounts ``pki``, never sees that key.
    """
    make_certs(pki, owners=0, add=True, flat=False, coordinator=False)
    write_party(coordinator, COORDINATOR, ca=load_ca(pki), sans=coordinator_sans(sans), server=True, add=True)
    exchange.mkdir(parents=True, exist_ok=True)
    (exchange / SOCKET).unlink(missing_ok=True)  # the previous run's signer
    write_file(exchange / "ca.pem", (pki / "ca" / "ca.pem").read_bytes(), mode=0o644, replace=True)


def answer(
    conn: socket.socket,
    ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate],
    slots: Path,
    nodes: int,
    done: set[str],
) -> str:
    """Read one request from ``conn`` and sign it or refuse it (module docstring, step 3).

    Returns the slot signed (added to ``done``); raises :class:`Refused` after telling the
    client why.
    """
    fds: list[int] = []
    try:
        try:
            data, fds = _read_request(conn)
            name = _held_slot(fds, slots, nodes, done)
            csr = x509.load_pem_x509_csr(data)
            key = csr.public_key()
            valid = csr.is_signature_valid
        except (OSError, ValueError) as exc:  # a timeout, a reset, an unparsable request
            raise Refused(f"unreadable request ({str(exc).split('.')[0]})") from None
        if not (valid and isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1)):
            raise Refused("not a self-signed ECDSA P-256 certificate request")
        cert = issue(*ca, name, key, sans=[name], server=False)
        with contextlib.suppress(OSError):
            conn.sendall(_OK + cert.public_bytes(serialization.Encoding.PEM))
        done.add(name)
        return name
    except Refused as exc:
        with contextlib.suppress(OSError):
            conn.sendall(_REFUSED + str(exc).encode() + b"\n")
        raise
    finally:
        for fd in fds:
            os.close(fd)


def _read_request(conn: socket.socket) -> tuple[bytes, list[int]]:
    """The request's bytes (to the client's end of writing) and the files passed with them,
    within :data:`CLIENT_TIMEOUT` seconds in all."""
    deadline = time.monotonic() + CLIENT_TIMEOUT
    conn.settimeout(CLIENT_TIMEOUT)
    data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 1)
    try:
        chunk = data
        while chunk:
            if len(data) > MAX_MESSAGE:
                raise Refused(f"a request is at most {MAX_MESSAGE} bytes")
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = conn.recv(MAX_MESSAGE)
            data += chunk
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return data, fds


def _held_slot(fds: list[int], slots: Path, nodes: int, done: set[str]) -> str:
    """The name of the slot whose lock the one file passed holds, if not signed yet; else :class:`Refused`."""
    if len(fds) != 1:
        raise Refused("no slot lock file came with the request")
    passed = os.fstat(fds[0])
    index = None
    for i in range(nodes):
        with contextlib.suppress(FileNotFoundError):
            lock = slot_lock(slots, i).stat()
            if (lock.st_dev, lock.st_ino) == (passed.st_dev, passed.st_ino):
                index = i
    if index is None:
        raise Refused(f"the file passed is none of the {nodes} slot lock files")
    name = slot_name(index)
    if name in done:
        raise Refused(f"{name} was signed already in this run")
    if not holds_exclusive_flock(fds[0]):
        raise Refused(f"the file passed does not hold slot {index}'s lock (another replica holds it, or none does)")
    return name


def holds_exclusive_flock(fd: int) -> bool:
    """Whether the open file description behind ``fd`` holds an exclusive ``flock`` on its file.

    Read from ``/proc/self/fdinfo/<fd>``, which lists the locks owned by that very file
    description (Linux >= 4.1, fs/locks.c ``show_fd_locks``): another open file of the same file,
    even in the same process, shows none. Nothing is locked or probed here, so a replica claiming
    its slot at the same moment is never disturbed. Without ``/proc``: False (refuse).
    """
    try:
        with open(f"/proc/self/fdinfo/{fd}") as info:
            lines = info.read().splitlines()
    except OSError:
        return False
    return any(line.startswith("lock:") and " FLOCK " in line and " WRITE " in line for line in lines)


def sign(pki: Path, exchange: Path, slots: Path, nodes: int, *, timeout: float) -> None:
    """Serve requests on ``exchange/signer.sock`` until slots ``0..nodes-1`` are signed once each.

    Raises
    ------
    ConfigError
        The CA cannot be loaded, or ``timeout`` seconds passed with a slot still unsigned.
    """
    ca = load_ca(pki)
    done: set[str] = set()
    deadline = time.monotonic() + timeout
    path = exchange / SOCKET
    path.unlink(missing_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server, _socket_name(path) as address:
        server.bind(address)
        server.listen(16)
        while len(done) < nodes:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = ", ".join(slot_name(i) for i in range(nodes) if slot_name(i) not in done)
                raise ConfigError(
                    f"no certificate request from {missing} within {timeout:g} s; are all owner replicas running?"
                )
            server.settimeout(min(left, 1.0))
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                try:
                    line = f"signed {answer(conn, ca, slots, nodes, done)}"
                except Refused as exc:
                    line = f"refused a request: {exc}"
                except Exception as exc:  # noqa: BLE001 - nothing a client sends ends the signer
                    line = f"refused a request: {exc!r}"
            print(f"enroll: {line}", file=sys.stderr, flush=True)
    path.unlink(missing_ok=True)


def enroll(exchange: Path, tls_dir: Path, name: str, slot_lock_fd: int, *, timeout: float) -> Path:
    """Make (or reuse) this node's key in ``tls_dir/name``, get it certified, return that directory.

    ``slot_lock_fd`` is the open file holding this replica's slot lock (``owner_entry.claim_slot``):
    it goes to the signer with the request, as the proof that this replica holds the slot. The
    directory then holds ``ca.pem``, ``<name>.pem`` and ``<name>-key.pem`` (0600), as
    ``TlsFiles.in_dir(directory, name)`` expects.

    Raises
    ------
    ConfigError
        The signer refused the request, was not reachable within ``timeout`` seconds, or sent a
        certificate that is not for this key and name from the exchange's CA.
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
    reply = _request(exchange / SOCKET, csr.public_bytes(serialization.Encoding.PEM), slot_lock_fd, timeout)
    if not reply.startswith(_OK):
        reason = reply.removeprefix(_REFUSED).decode(errors="replace").strip()
        raise ConfigError(f"the CA signer refused {name}'s certificate request: {reason}")
    ca_pem = (exchange / "ca.pem").read_bytes()
    try:
        cert = x509.load_pem_x509_certificate(reply[len(_OK) :])
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise ConfigError(
            f"the signer's certificate for {name} is not signed by {exchange / 'ca.pem'} ({exc!r}); rerun the certs service"
        ) from None
    names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if _public(cert.public_key()) != _public(key.public_key()) or names != [name]:
        raise ConfigError(f"the signer's certificate is not {name}'s for this key (common names {names})")
    write_file(d / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM), mode=0o644, replace=True)
    write_file(d / "ca.pem", ca_pem, mode=0o644, replace=True)
    return d


def _request(path: Path, request: bytes, lock_fd: int, timeout: float) -> bytes:
    """Send ``request`` with ``lock_fd`` to the signer at ``path`` (retried until it listens); its answer."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            try:
                with _socket_name(path) as address:
                    conn.settimeout(max(0.1, deadline - time.monotonic()))
                    conn.connect(address)
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise ConfigError(
                        f"no CA signer at {path} within {timeout:g} s; is the ca-signer service running?"
                    ) from None
                time.sleep(POLL)
                continue
            try:
                sent = socket.send_fds(conn, [request], [lock_fd])
                conn.sendall(request[sent:])
                conn.shutdown(socket.SHUT_WR)
                reply = b""
                while len(reply) <= MAX_MESSAGE:
                    more = conn.recv(MAX_MESSAGE)
                    if not more:
                        return reply
                    reply += more
            except OSError as exc:
                raise ConfigError(f"the CA signer at {path} did not answer ({exc})") from None
            raise ConfigError(f"the CA signer at {path} answered more than {MAX_MESSAGE} bytes")


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
    q.add_argument("--slots", type=Path, required=True, help="the owners' slot lock directory (owner_entry --slots)")
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
            sign(args.pki, args.exchange, args.slots, args.owners, timeout=args.timeout)
    except (ConfigError, OSError) as exc:  # OSError: e.g. no exchange directory to listen in
        print(f"enroll: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
