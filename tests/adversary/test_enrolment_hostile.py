"""Issue 20, finding 6: a hostile owner replica must not obtain another slot's certificate.

Compose runs identical owner replicas that learn their slot at run time (``owner_entry``) and
enrol through the ``ca-signer`` service (``deploy/enroll.py``). The signer runs here as the real
``python -m privfed.deploy.enroll sign`` process, exactly as docker-compose.yml starts it.
"""

from __future__ import annotations

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
from privfed.deploy.enroll import enroll, init
from privfed.deploy.owner_entry import claim_slot

NODES = 2


class Signer:
    """The ``ca-signer`` service's command as a process; its log lines collected as they come."""

    def __init__(self, pki: Path, exchange: Path, timeout: float = 20.0):
        cmd = [sys.executable, "-m", "privfed.deploy.enroll", "sign", "--pki", str(pki), "--exchange", str(exchange)]
        cmd += ["--owners", str(NODES), "--timeout", str(timeout)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self._reader.start()

    def wait_for(self, text: str, timeout: float = 20.0) -> bool:
        """Until a log line contains ``text`` (True) or the process ended or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return True
            if self.proc.poll() is not None:
                self._reader.join(5)
                return any(text in line for line in self.lines)
            time.sleep(0.05)
        return False

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


def _stolen(exchange: Path, ca: x509.Certificate, key: ec.EllipticCurvePrivateKey, name: str) -> bool:
    """Whether a CA-issued certificate for ``name`` carries the attacker's key."""
    for path in exchange.rglob("*.pem"):
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
        if names == [name] and _public(cert.public_key()) == _public(key.public_key()):
            cert.verify_directly_issued_by(ca)
            return True
    return False


def test_a_replica_cannot_enrol_for_another_slot(tmp_path):
    """Measured on main at bd5ff64 (before the fix): the hostile replica, holding slot 0, wrote
    requests for owner-0 and owner-1 with its own key before the honest replica claimed slot 1;
    the signer signed both, so the hostile replica held a CA-issued owner-1 certificate for its
    own key, and the honest replica of slot 1 waited in vain for a certificate."""
    pki, exchange, slots = tmp_path / "pki", tmp_path / "enroll", tmp_path / "slots"
    init(pki, tmp_path / "coordinator-tls", exchange)
    ca = x509.load_pem_x509_certificate((exchange / "ca.pem").read_bytes())
    hostile_slot, _hostile_lock = claim_slot(slots, NODES)
    assert hostile_slot == 0
    key = ec.generate_private_key(ec.SECP256R1())
    for i in range(NODES):  # pre-write a request for every slot, before the others claim theirs
        (exchange / "requests" / f"owner-{i}.csr").write_bytes(_csr(key, f"owner-{i}"))
    signer = Signer(pki, exchange)
    signer.wait_for(f"owner-{NODES - 1}")  # the signer has looked at the pre-written requests
    honest_slot, _honest_lock = claim_slot(slots, NODES)
    got: dict[str, object] = {}

    def honest() -> None:
        try:
            got["dir"] = enroll(exchange, tmp_path / "tls", f"owner-{honest_slot}", timeout=8.0)
        except ConfigError as exc:
            got["error"] = exc

    thread = threading.Thread(target=honest)
    thread.start()
    thread.join(30)
    log = signer.stop()
    print(f"\nsigner log:\n{log}honest replica: {got}")
    assert not _stolen(exchange, ca, key, f"owner-{honest_slot}"), "the hostile replica holds slot 1's identity"
    assert "dir" in got, f"the honest replica of slot {honest_slot} got no certificate: {got}"


def test_garbage_requests_do_not_crash_the_signer(tmp_path):
    """Measured on main at bd5ff64: one request file of garbage made the signer exit with a
    traceback (a ValueError from the CSR parser), so no replica could enrol afterwards."""
    pki, exchange, slots = tmp_path / "pki", tmp_path / "enroll", tmp_path / "slots"
    init(pki, tmp_path / "coordinator-tls", exchange)
    (exchange / "requests" / "owner-0.csr").write_bytes(b"-----BEGIN CERTIFICATE REQUEST-----\ngarbage\n")
    signer = Signer(pki, exchange)
    try:
        signer.wait_for("owner-0", timeout=5.0)  # the signer has looked at the garbage
        slot, _lock = claim_slot(slots, NODES)
        directory = enroll(exchange, tmp_path / "tls", f"owner-{slot}", timeout=8.0)
        assert (directory / f"owner-{slot}.pem").is_file()
    finally:
        log = signer.stop()
        print(f"\nsigner log:\n{log}")
    assert "Traceback" not in log
