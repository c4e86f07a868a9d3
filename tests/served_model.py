"""``privfed coordinator --load-model`` as a real process, for the tests that call it over the network."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from thread_signals import signal_a_worker_thread


@contextmanager
def served_model(model: Path, model_id: str, flags: list[str]) -> Iterator[int]:
    """Serve ``model`` (its saved id ``model_id``) with ``flags`` (``--insecure`` or ``--certs DIR``, ...) on a free
    port of 127.0.0.1; yield the port; on leaving, SIGTERM it and check it exits 0."""
    cmd = [sys.executable, "-m", "privfed.deploy.cli", "coordinator", "--load-model", str(model), *flags]
    proc = subprocess.Popen(
        cmd + ["--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        port = None
        for line in proc.stderr:
            if "listening on port" in line:
                port = int(line.rsplit(" ", 1)[1])
                break
        assert port is not None, f"it did not start: {proc.stderr.read()}"
        assert proc.stdout.readline().strip() == f"serving model_id={model_id}"
        yield port
    finally:
        if proc.poll() is None:  # the kernel may hand SIGTERM to any thread: here a worker (gRPC's) takes it
            signal_a_worker_thread(proc.pid, signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        finally:
            proc.kill()
        assert code == 0
