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
