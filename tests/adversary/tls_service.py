"""The real coordinator service over mTLS, in this process, for the tests that call it with real certificates
(revocation of data users and certificates, data-user isolation)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def mtls_service(tmp_path: Path, coordinator_certs: Path, **config: Any) -> Iterator[tuple[Any, int]]:
    """``privfed serve``'s service on a free local port, its store in ``tmp_path``, the coordinator's certificate
    from ``coordinator_certs``, and ``config``'s other :class:`ServiceConfig` fields; yields it and its port, and
    stops it after."""
    from privfed.proto.transport import TlsFiles
    from privfed.server.service import CoordinatorService, ServiceConfig

    fields = {"store": tmp_path / "store", "listen": "127.0.0.1:0", "status_listen": None, "dataset": "synthetic"}
    svc = CoordinatorService(ServiceConfig(**(fields | config)), TlsFiles.in_dir(coordinator_certs, "coordinator"))
    port = svc.start()
    try:
        yield svc, port
    finally:
        svc.stop()
