"""``privfed certs``: a federation CA and mTLS certificates, made with ``cryptography``.

Writes ``ca.pem``/``ca-key.pem``, ``coordinator.pem``/``coordinator-key.pem`` (server auth,
SANs = localhost, 127.0.0.1 and every ``--san``) and ``owner-<i>.pem``/``owner-<i>-key.pem``
(client auth, common name ``owner-<i>``: the node identity the coordinator checks). Keys are
ECDSA P-256. Keep ``ca-key.pem`` with whoever runs the federation CA, not on the coordinator:
whoever holds it can mint owner identities.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "privfed"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(path: Path, key) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    os.chmod(path, 0o600)


def _san(entry: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(entry))
    except ValueError:
        return x509.DNSName(entry)


def _issue(ca_key, ca_name, cn: str, sans: list[str], usages: list, now: dt.datetime):
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (x509.CertificateBuilder()
               .subject_name(_name(cn)).issuer_name(ca_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.SubjectAlternativeName([_san(s) for s in sans]), critical=False))
    return key, builder.sign(ca_key, hashes.SHA256())


def make_certs(out: str | Path, *, owners: int, sans: list[str] = (), owner_names: list[str] | None = None) -> Path:
    """Create a CA, a coordinator certificate and ``owners`` owner certificates in ``out``."""
    if owners < 0:
        raise ValueError(f"--owners must be >= 0, got {owners}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("privfed federation CA")
    ca_cert = (x509.CertificateBuilder()
               .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False,
                                            encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    (out / "ca.pem").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(out / "ca-key.pem", ca_key)
    # The coordinator also gets clientAuth so that its own health check (deploy/healthcheck.py,
    # the image's HEALTHCHECK) can present it to the mTLS server; it grants no owner identity.
    parties = [("coordinator", ["localhost", "127.0.0.1", "coordinator", *sans],
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])]
    names = owner_names if owner_names is not None else [f"owner-{i}" for i in range(owners)]
    parties += [(n, [n], [ExtendedKeyUsageOID.CLIENT_AUTH]) for n in names]
    for cn, party_sans, usage in parties:
        key, cert = _issue(ca_key, ca_name, cn, party_sans, usage, now)
        (out / f"{cn}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(out / f"{cn}-key.pem", key)
    return out
