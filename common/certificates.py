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


def normal_fingerprint(text: str) -> str:
    """A fingerprint as written by hand or by ``openssl x509 -fingerprint -sha256`` (``AB:CD:...``), in the form
    :func:`fingerprint` gives."""
    return text.replace(":", "").lower()


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
