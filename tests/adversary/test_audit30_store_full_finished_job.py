"""Audit 30, A30-2: a job that finished is recorded failed when the store fills between its model and its record.

``run_federated_job`` writes the job's model and its ``done`` report; the service then writes the record
(``state = done``). When that last write meets a full disk, the OSError reaches the queue's loop, which records the
job ``failed`` ("the service could not write its job store") once there is room, and tells its nodes it failed:
the data user's ``privfed jobs`` says failed for a job whose model its owners paid for and which the service
serves, and a data user who believes it submits it again, its owners paying twice."""

from __future__ import annotations

import errno
import json
import time
from types import SimpleNamespace

from privfed.server.service import STORE_RETRY, CoordinatorService, ServiceConfig


def test_a_finished_job_whose_record_meets_a_full_disk_is_recorded_done_once_there_is_room(tmp_path, monkeypatch):
    import privfed.server.job as job_module

    def finished(server, job, report, **_):
        (report.run_dir() / "model.json").write_text("{}\n")  # what the owners paid for
        report.write(status="ok", accuracy=0.9)
        return SimpleNamespace(accuracy=0.9, warnings=())

    monkeypatch.setattr(job_module, "run_federated_job", finished)
    svc = CoordinatorService(ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None), None)
    full = {"left": 1}
    update = svc.store.update

    def update_on_a_disk_that_fills(job_id, **changes):
        if changes.get("state") == "done" and full["left"]:
            full["left"] -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return update(job_id, **changes)

    monkeypatch.setattr(svc.store, "update", update_on_a_disk_that_fills)
    svc.start()
    try:
        job_id = svc.submit({"task": "ncc", "epsilon": 1.0, "owners": 3}, "alice").job_id
        deadline = time.monotonic() + 10 + STORE_RETRY
        while svc.store.get(job_id).state in ("queued", "running"):
            assert time.monotonic() < deadline, svc.store.get(job_id)
            time.sleep(0.05)
        record = svc.store.get(job_id)
    finally:
        svc.stop()
    report = json.loads((tmp_path / "store" / job_id / "report.json").read_text())
    assert report["status"] == "ok" and (tmp_path / "store" / job_id / "model.json").exists()
    assert record.state == "done", record  # not "failed: the service could not write its job store"
    assert record.accuracy == 0.9


def test_a_restart_records_done_a_finished_job_whose_record_the_full_disk_kept_running(tmp_path):
    """The operator restarts the service to clear the full disk before the finished job's record was written: the
    next start judged it a job stopped mid-run, failed it ("its owners may have paid") and overwrote its ok report,
    while its model stays served."""
    from privfed.server.jobstore import JobStore

    store = JobStore(tmp_path / "store")
    job_id = store.submit({"task": "ncc", "epsilon": 1.0, "owners": 3}, "alice").job_id
    store.update(job_id, state="running", asked=True)
    (store.job_dir(job_id) / "model.json").write_text("{}\n")
    (store.job_dir(job_id) / "report.json").write_text(json.dumps({"status": "ok", "accuracy": 0.9}))
    svc = CoordinatorService(ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None), None)
    svc.start()
    try:
        record = svc.store.get(job_id)
        report = svc.report_of(job_id)
    finally:
        svc.stop()
    assert report is not None and report["status"] == "ok", report
    assert record.state == "done" and record.accuracy == 0.9, record
