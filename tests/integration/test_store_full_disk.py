"""Walkthrough 9, W9-1: the service's store on a disk that fills up. A job that failed while the disk was full killed
the queue's thread with a traceback: the job showed running for good, no job ran again until a restart, and its
``report.json`` (like a finished job's ``model.json``) was truncated in place to 0 bytes. A submit on the full disk
answered a raw "Exception calling application: [Errno 28] ..." and left an empty job folder behind.

A real disk that fills: a 1 MiB tmpfs (root only; skipped where it cannot be mounted), under the real service (its
queue, its gRPC job API) with no owner node: its job waits for owners that never come, and fails when its register
timeout ends, with the disk full."""

from __future__ import annotations

import subprocess
import time

import grpc
import pytest

from privfed.common.files import replace_file
from privfed.proto.jobwire import JOB_SERVICE, decode_json, encode_json
from privfed.server.service import STORE_RETRY, CoordinatorService, ServiceConfig


@pytest.fixture
def disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk):
    """Fill ``disk`` to its last byte; returns the filler file (unlink it to free the disk)."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 16, 1 << 10, 1):
            try:
                while f.write(b"\0" * size):
                    pass
            except OSError:
                continue
    return filler


def test_a_file_replaced_on_a_full_disk_keeps_its_old_content_and_leaves_no_temporary_file(disk):
    model = disk / "model.json"
    replace_file(model, '{"old": true}\n')
    _fill(disk)
    with pytest.raises(OSError):
        replace_file(model, "x" * 100_000)
    assert model.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "model.json"]


def _submit(port: int, job: dict) -> dict:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(
            f"/{JOB_SERVICE}/Submit", request_serializer=encode_json, response_deserializer=decode_json
        )
        return call({"job": job}, timeout=10)


def _state(svc: CoordinatorService, job_id: str, want: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while svc.store.get(job_id).state != want:
        assert time.monotonic() < deadline, svc.store.get(job_id)
        time.sleep(0.05)


def test_a_full_store_fails_its_job_in_one_line_and_the_queue_goes_on_once_it_has_room(disk, caplog):
    store = disk / "store"
    svc = CoordinatorService(ServiceConfig(store=store, listen="127.0.0.1:0", status_listen=None), tls=None)
    port = svc.start()
    try:
        first = _submit(port, {"task": "ncc", "epsilon": 1.0, "owners": 3, "register_timeout": 2})["job_id"]
        _state(svc, first, "running", 10)
        filler = _fill(disk)
        with pytest.raises(grpc.RpcError) as refused:  # a submit on the full disk
            _submit(port, {"task": "ncc", "epsilon": 1.0, "owners": 3})
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "cannot write its job store" in refused.value.details()
        assert sorted(p.name for p in store.iterdir() if p.is_dir() and not p.name.startswith(".")) == [
            first
        ]  # no empty one
        deadline = time.monotonic() + 15  # the first job's register timeout ends: it fails, on the full disk
        while svc.store_error is None or svc.current is not None:
            assert time.monotonic() < deadline, (svc.store_error, svc.current)
            time.sleep(0.05)
        assert "Traceback" not in caplog.text and "failed unexpectedly" not in caplog.text, caplog.text
        assert svc.snapshot()["store_error"] == svc.store_error
        report = store / first / "report.json"
        assert not report.exists() or report.stat().st_size > 0  # never truncated in place
        filler.unlink()  # room again: the failure is recorded, and the queue takes the next job
        _state(svc, first, "failed", 10 + STORE_RETRY)
        assert svc.store.get(first).error.startswith("the service could not write its job store (No space left")
        assert str(store) not in svc.store.get(first).error  # the store's place is the operator's
        second = _submit(port, {"task": "ncc", "epsilon": 1.0, "owners": 3, "register_timeout": 60})["job_id"]
        _state(svc, second, "running", 10 + STORE_RETRY)
        assert svc.store_error is None and svc.snapshot()["store_error"] is None
    finally:
        svc.stop()
