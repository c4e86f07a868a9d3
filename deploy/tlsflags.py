"""The command line's TLS flags, the one place they are declared and read: ``--certs DIR``
(mTLS, the default transport) or ``--insecure`` (byte-capture tests only). Shared by
:mod:`privfed.deploy.cli` and :mod:`privfed.deploy.service_cli`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from privfed.common.errors import PrivfedError

if TYPE_CHECKING:
    from privfed.proto.transport import TlsFiles

log = logging.getLogger("privfed.coordinator")


def add_tls(p: argparse.ArgumentParser) -> None:
    """``--certs DIR`` or ``--insecure`` on parser ``p``."""
    tls = p.add_mutually_exclusive_group()
    tls.add_argument("--certs", type=Path, help="directory written by `privfed certs` (mTLS, the default transport)")
    tls.add_argument("--insecure", action="store_true", help="no TLS (byte-capture tests only)")


def tls_files(args: argparse.Namespace, name: str) -> TlsFiles | None:
    """The TLS files of party ``name`` in ``--certs`` (None with ``--insecure``)."""
    from privfed.proto.transport import TlsFiles

    if args.insecure:
        return None
    if args.certs is None:
        raise PrivfedError(
            "--certs DIR is required (mTLS is the default); --insecure exists only for byte-capture tests"
        )
    return TlsFiles.in_dir(args.certs, name)


def add_revoked_certificates(p: argparse.ArgumentParser) -> None:
    """``--revoked-certificates FILE`` on parser ``p`` (``privfed serve``, ``privfed coordinator``)."""
    p.add_argument(
        "--revoked-certificates",
        type=Path,
        metavar="FILE",
        help="SHA-256 fingerprints of certificates to refuse, one per line (# comments), read again when it changes: "
        "every call presenting one is refused, whoever's it is (default: revoked-certificates.txt in --certs, which "
        "privfed certs --reissue writes; watched from the start, so one written later is read at once)",
    )


def revoked_certificates(args: argparse.Namespace) -> Path | None:
    """``--revoked-certificates``, or by default ``revoked-certificates.txt`` in ``--certs``: a ``privfed certs
    --reissue`` protects without a flag (walkthrough 9, W9-2), also the federation's first, which makes the file
    while the coordinator runs (audit 30, A30-3: a file not there at the start was never read). The default file
    may be missing (it lists nothing until then); a file given by the flag must be there."""
    from privfed.server.revocation import REVOKED_FILE  # not deploy.certs: cryptography, in an idle coordinator

    if args.revoked_certificates is not None or args.certs is None:
        return args.revoked_certificates
    default = args.certs / REVOKED_FILE
    log.info("refusing the certificates listed in %s, if any (read again when it changes)", default)
    return default


def warn_expiry(tls: TlsFiles, name: str, log: logging.Logger) -> None:
    """Log a WARNING for each of ``tls``'s CA and party ``name``'s certificate that expires within 30 days
    (walkthrough 9, W9-3: nothing said so, and the federation would have stopped on one day with TLS errors)."""
    from privfed.common.certificates import expiry_warnings

    try:
        lines = expiry_warnings(tls.ca, tls.cert, name)
    except (OSError, ValueError):  # missing or unreadable files are the TLS set-up's to report
        return
    for line in lines:
        log.warning("%s", line)
