"""What a federation certificate is known by when it is revoked, and when it stops working.

A revoked certificate is listed by the SHA-256 fingerprint of its DER bytes (walkthrough 9, W9-2): a re-issued
party keeps its name, so the name cannot tell its old key from its new one, and a serial number is only unique
per CA, while a fingerprint names exactly one certificate. ``privfed certs --reissue`` writes the fingerprints
and ``privfed serve --revoked-certificates`` refuses them.

Certificates expire (W9-3: nothing said when, and the whole federation would have stopped on one day):
:func:`expiry_warnings` says, some weeks ahead, which of a party's own certificate and its CA expire soon and
what to run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes

#: How long before a certificate's end ``privfed serve`` and ``privfed owner`` start warning: long enough for an
#: operator to reissue and hand the files over, short enough not to cry wolf for months.
EXPIRY_WARNING = dt.timedelta(days=30)


def fingerprint(cert: x509.Certificate) -> str:
    """The certificate's SHA-256 fingerprint (of its DER bytes), 64 lowercase hex digits."""
    return cert.fingerprint(hashes.SHA256()).hex()


def pem_fingerprint(pem: bytes) -> str:
    """:func:`fingerprint` of a PEM certificate."""
    return fingerprint(x509.load_pem_x509_certificate(pem))


#: The orders of the curves an ECDSA certificate signature may be over: P-256 (``privfed certs``), P-384, P-521.
_CURVE_ORDERS = (
    0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551,
    0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFC7634D81F4372DDF581A0DB248B0A77AECEC196ACCC52973,
    int(
        "01FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFA"
        "51868783BF2F966B7FCC0148F709A5D03BB5C9B8899C47AEBB6FB71E91386409",
        16,
    ),
)
#: ecdsa-with-SHA1 and ecdsa-with-SHA2 (SHA-224 .. SHA-512) signature algorithms' OIDs start so.
_ECDSA_OID = "1.2.840.10045.4."


def _der(tag: int, content: bytes) -> bytes:
    n = len(content)
    if n < 0x80:
        return bytes([tag, n]) + content
    size = (n.bit_length() + 7) // 8
    return bytes([tag, 0x80 | size]) + n.to_bytes(size, "big") + content


def fingerprints(cert: x509.Certificate) -> frozenset[str]:
    """:func:`fingerprint` of ``cert`` and of each certificate its signer's same signature makes as valid.

    A certificate's signature lies outside what it signs, and an ECDSA signature (r, s) has a twin (r, n - s)
    that verifies as well (audit 30, A30-1): whoever holds a certificate can re-encode it with the other s, the CA
    still vouches for it, and its DER fingerprint is another. A revocation check asks whether any is listed."""
    found = {fingerprint(cert)}
    if cert.signature_algorithm_oid.dotted_string.startswith(_ECDSA_OID):
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
        from cryptography.hazmat.primitives.serialization import Encoding

        der = cert.public_bytes(Encoding.DER)
        content = der[2 + (der[1] & 0x7F if der[1] & 0x80 else 0) :]  # the outer SEQUENCE's content
        signature = _der(0x03, b"\x00" + cert.signature)
        if content.endswith(signature):
            signed = content[: -len(signature)]  # the tbsCertificate and signatureAlgorithm
            r, s = decode_dss_signature(cert.signature)
            for n in _CURVE_ORDERS:
                if 0 < s < n:
                    twin = _der(0x30, signed + _der(0x03, b"\x00" + encode_dss_signature(r, n - s)))
                    found.add(hashlib.sha256(twin).hexdigest())
    return frozenset(found)


def pem_fingerprints(pem: bytes) -> frozenset[str]:
    """:func:`fingerprints` of a PEM certificate."""
    return fingerprints(x509.load_pem_x509_certificate(pem))


def normal_fingerprint(text: str) -> str:
    """A fingerprint as written by hand or by ``openssl x509 -fingerprint -sha256`` (``AB:CD:...``, or its whole line
    ``sha256 Fingerprint=AB:CD:...``), hex pairs apart or not, in the form :func:`fingerprint` gives (audit 32, A32-1:
    openssl's line pasted whole, or spaced pairs, listed nothing and the certificate still got through)."""
    if "=" in text and "fingerprint" in text.split("=", 1)[0].lower():
        text = text.split("=", 1)[1]
    return "".join(text.split()).replace(":", "").lower()


def is_fingerprint(text: str) -> bool:
    """Whether ``text`` (normal) is a SHA-256 fingerprint as :func:`fingerprint` gives it: 64 lowercase hex digits."""
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def expiry_warnings(
    ca: Path, cert: Path, name: str, *, now: dt.datetime | None = None, within: dt.timedelta = EXPIRY_WARNING
) -> list[str]:
    """One line for each of the CA certificate ``ca`` and party ``name``'s certificate ``cert`` that expires
    within ``within`` of ``now`` (or has expired), naming the date and the command that renews it."""
    now = dt.datetime.now(dt.UTC) if now is None else now
    lines = []
    for path, whose, renew in (
        (cert, f"the certificate of {name!r} ({cert})", f"privfed certs --out DIR --reissue {name}"),
        (
            ca,
            f"the federation CA ({ca}), and with it every certificate it signed,",
            "privfed certs --out DIR --force (a new CA: every party needs its new directory)",
        ),
    ):
        end = x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc
        if end - now <= within:
            when = "expired on" if end <= now else f"expires in {(end - now).days} day(s), on"
            lines.append(f"{whose} {when} {end:%Y-%m-%d %H:%M} UTC: renew it with `{renew}`")
    return lines
