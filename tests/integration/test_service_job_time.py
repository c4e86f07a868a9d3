"""Audit 28, A28-3: ``privfed serve --max-job-wait`` bounds each wait of a job (its register and round timeouts), not
how many waits it makes. A job of many rounds whose owner polls but never answers its evaluations waited its whole
round timeout in each round, and every other data user's jobs waited behind it. ``--max-job-time`` cancels a job that
has run that long. The real service (its queue, its watch thread, its gRPC server), no node: the job waits for owners
that never come, within a register timeout far longer than its time."""

from __future__ import annotations

import time

import pytest

from privfed.server.service import CoordinatorService, ServiceConfig


@pytest.fixture
def service(tmp_path):
    svc = CoordinatorService(
        ServiceConfig(
            store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, dataset="synthetic", max_job_time=2.0
        ),
        tls=None,
    )
    svc.start()
    yield svc
    svc.stop()


def _wait(svc: CoordinatorService, job_id: str, states: tuple[str, ...], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while (state := svc.store.get(job_id).state) not in states:
        assert time.monotonic() < deadline, (state, svc.store.get(job_id))
        time.sleep(0.05)
    return state


def test_a_job_past_the_services_time_is_cancelled_and_the_next_one_starts(service):
    waiting = service.submit({"task": "ncc", "epsilon": 1.0, "owners": 3, "register_timeout": 600}, "alice")
    behind = service.submit({"task": "ncc", "epsilon": 1.0, "owners": 3, "register_timeout": 600}, "bob")
    _wait(service, waiting.job_id, ("running",), 10)
    started = time.monotonic()
    assert _wait(service, waiting.job_id, ("cancelled", "failed", "done"), 30) == "cancelled"
    took = time.monotonic() - started
    assert 1.0 < took < 10, took  # its 2 s and the watch's second, not the register timeout's 600 s
    record = service.store.get(waiting.job_id)
    assert record.error == (
        "cancelled by the operator: the job ran for longer than this service lets a job run (2 s, privfed serve "
        "--max-job-time)"
    ), record.error
    assert service.report_of(waiting.job_id)["status"] == "cancelled"
    assert _wait(service, behind.job_id, ("running", "cancelled"), 10) == "running"  # the queue goes on
