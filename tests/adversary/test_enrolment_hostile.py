"""Issue 20, finding 6: a hostile owner replica must not obtain another slot's certificate.

Compose runs identical owner replicas that learn their slot at run time by holding its lock
(``owner_entry.claim_slot``) and enrol through the ``ca-signer`` service (``deploy/enroll.py``),
which runs here as the real ``python -m privfed.deploy.enroll sign`` process, exactly as
docker-compose.yml starts it. The hostile replica holds slot 0; the honest one claims slot 1 and
enrols with the same functions ``owner_entry`` calls.

Measured on main at bd5ff64, before enrolment was authenticated (requests were files in a shared
``requests/`` directory, signed first come): the hostile replica pre-wrote requests for owner-0
and owner-1 with its own key before the honest replica claimed slot 1; the signer signed both,
so the hostile replica held a CA-issued owner-1 certificate for its own key and the honest
replica of slot 1 waited in vain (no certificate within its timeout). One request file of
garbage made the signer exit with a traceback (a ValueError from the CSR parser).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from privfed.common.errors import ConfigError
from privfed.deploy.enroll import SOCKET, enroll, init
from privfed.deploy.owner_entry import claim_slot, slot_lock

NODES = 2


class Signer:
    """The ``ca-signer`` service's command as a process; its log lines collected as they come."""

    def __init__(self, pki: Path, exchange: Path, slots: Path, timeout: float = 30.0):
        cmd = [sys.executable, "-m", "privfed.deploy.enroll", "sign", "--pki", str(pki), "--exchange", str(exchange)]
        cmd += ["--slots", str(slots), "--owners", str(NODES), "--timeout", str(timeout)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self._reader.start()

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(5)
        return "".join(self.lines)


def _csr(key: ec.EllipticCurvePrivateKey, name: str) -> bytes:
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    )
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def _public(key) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _ask(exchange: Path, data: bytes, fds: list[int], timeout: float = 20.0) -> bytes:
    """What a hostile replica can do: any bytes, any files, straight to the signer's socket."""
    deadline = time.monotonic() + timeout
    while not (exchange / SOCKET).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(str(exchange / SOCKET))
        try:
            sent = socket.send_fds(conn, [data], fds) if fds else conn.send(data)
            conn.sendall(data[sent:])
            conn.shutdown(socket.SHUT_WR)
        except BrokenPipeError:  # the signer stopped reading (a request too long): its answer is queued
            pass
        reply = b""
        try:
            while chunk := conn.recv(65536):
                reply += chunk
        except ConnectionResetError:  # closed with our unread bytes in its buffer: nothing was signed
            return b""
        return reply


def _certified(reply: bytes, ca: x509.Certificate) -> tuple[str, bytes] | None:
    """(common name, public key) of a CA-issued certificate in the signer's reply, if any."""
    if not reply.startswith(b"ok\n"):
        return None
    cert = x509.load_pem_x509_certificate(reply[3:])
    cert.verify_directly_issued_by(ca)
    return cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value, _public(cert.public_key())


@pytest.fixture
def federation(tmp_path):
    pki, exchange = tmp_path / "pki", tmp_path / "enroll"
    init(pki, tmp_path / "coordinator-tls", exchange)
    return pki, exchange, exchange / "slots"


def test_a_replica_cannot_enrol_for_another_slot(federation, tmp_path):
    pki, exchange, slots = federation
    ca = x509.load_pem_x509_certificate((exchange / "ca.pem").read_bytes())
    hostile_slot, hostile_lock = claim_slot(slots, NODES)
    assert hostile_slot == 0
    key = ec.generate_private_key(ec.SECP256R1())
    (exchange / "requests").mkdir()  # today's attack: requests pre-written for every slot
    for i in range(NODES):
        (exchange / "requests" / f"owner-{i}.csr").write_bytes(_csr(key, f"owner-{i}"))
    signer = Signer(pki, exchange, slots)
    try:
        replies = {"own lock, asking for owner-1": _ask(exchange, _csr(key, "owner-1"), [hostile_lock])}
        replies["own lock again"] = _ask(exchange, _csr(key, "owner-1"), [hostile_lock])
        unheld = os.open(slot_lock(slots, 1), os.O_RDWR | os.O_CREAT, 0o644)  # slot 1, before anyone holds it
        replies["slot 1's lock file, not held"] = _ask(exchange, _csr(key, "owner-1"), [unheld])
        honest_slot, honest_lock = claim_slot(slots, NODES)  # the honest replica takes slot 1 all the same
        replies["slot 1's lock file, held by the honest replica"] = _ask(exchange, _csr(key, "owner-1"), [unheld])
        os.close(unheld)
        with open(exchange / "ca.pem", "rb") as unrelated:
            replies["another file"] = _ask(exchange, _csr(key, "owner-1"), [unrelated.fileno()])
        replies["no file"] = _ask(exchange, _csr(key, "owner-1"), [])
        directory = enroll(exchange, tmp_path / "tls", f"owner-{honest_slot}", honest_lock, timeout=20.0)
        code = signer.proc.wait(timeout=30)
    finally:
        log = signer.stop()
        for fd in (hostile_lock, locals().get("honest_lock")):
            if fd is not None:
                os.close(fd)
    print(f"\nsigner log:\n{log}")
    got = {what: _certified(reply, ca) for what, reply in replies.items()}
    assert got.pop("own lock, asking for owner-1") == ("owner-0", _public(key.public_key()))  # its own slot only
    assert got == dict.fromkeys(got), f"a hostile request was signed: {got}"
    assert all(r.startswith(b"refused: ") for what, r in replies.items() if what != "own lock, asking for owner-1")
    honest = x509.load_pem_x509_certificate((directory / f"owner-{honest_slot}.pem").read_bytes())
    assert honest.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "owner-1"
    assert _public(honest.public_key()) != _public(key.public_key())
    assert code == 0 and "Traceback" not in log
    assert log.count("enroll: refused a request") == 5 and log.count("enroll: signed") == NODES


def test_garbage_requests_do_not_crash_the_signer(federation, tmp_path):
    pki, exchange, slots = federation
    slot, lock = claim_slot(slots, NODES)
    other_slot, other_lock = claim_slot(slots, NODES)
    signer = Signer(pki, exchange, slots)
    try:
        garbage = [
            (b"-----BEGIN CERTIFICATE REQUEST-----\ngarbage\n", [lock]),
            (os.urandom(512), [lock]),
            (b"", [lock]),
            (b"x" * (1 << 20), [lock]),  # more than a request may be
            (_csr(ec.generate_private_key(ec.SECP384R1()), "owner-0"), [lock]),  # not the federation's curve
        ]
        replies = [_ask(exchange, data, fds) for data, fds in garbage]
        assert signer.proc.poll() is None, signer.stop()
        dirs = [
            enroll(exchange, tmp_path / "tls", f"owner-{i}", fd, timeout=20.0)
            for i, fd in ((slot, lock), (other_slot, other_lock))
        ]
        code = signer.proc.wait(timeout=30)
    finally:
        log = signer.stop()
        os.close(lock)
        os.close(other_lock)
    print(f"\nsigner log:\n{log}")
    too_long = replies.pop(3)
    assert all(r.startswith(b"refused: ") for r in replies), replies
    assert too_long == b"" or too_long.startswith(b"refused: ")
    assert log.count("enroll: refused a request") == len(garbage) and "Traceback" not in log
    assert code == 0 and all((d / f"{d.name}.pem").is_file() for d in dirs)


def test_an_owner_replica_is_told_why_it_was_refused(federation, tmp_path):
    pki, exchange, slots = federation
    slot, lock = claim_slot(slots, NODES)
    signer = Signer(pki, exchange, slots, timeout=10.0)
    try:
        enroll(exchange, tmp_path / "a", f"owner-{slot}", lock, timeout=20.0)
        with pytest.raises(ConfigError, match="signed already"):
            enroll(exchange, tmp_path / "b", f"owner-{slot}", lock, timeout=20.0)
    finally:
        signer.stop()
        os.close(lock)
