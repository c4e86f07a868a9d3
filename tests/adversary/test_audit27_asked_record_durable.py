"""Audit 27: the store's record that a job asked its owners is on disk before the job's first release task is queued.

``privfed serve`` writes ``asked=True`` into the job's record (``Dispatcher.on_first_ask``, walkthrough 7, W7-6)
before a node can take the job's first release task. A job without a journal whose record still says
``asked=False`` (what the claim writes) is run again at the next start. An owner's ledger syncs each debit
(``synchronous=FULL``), but the store wrote its record with ``write_text`` and ``os.replace`` and synced nothing.
After a power cut or a kernel crash (not after SIGKILL: the page cache outlives the process) the machine could
come back with the claim's record and the owners' debits both on disk. The job then ran again, and its owners
paid for it twice. Checked here with the real store and the service's own hook: the new record is synced before
it replaces the old one, and the directory's rename is synced after.
"""

from __future__ import annotations

import os

import pytest

from privfed.server.jobstore import JobStore

pytestmark = pytest.mark.in_process


def test_the_asked_record_is_synced_before_and_after_its_rename(tmp_path, monkeypatch):
    store = JobStore(tmp_path / "store")
    record = store.submit({"task": "ncc", "epsilon": 1.0}, "alice")
    assert store.transition(record.job_id, "queued", state="running", asked=False) is not None
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    store.update(record.job_id, asked=True)  # what the service's on_first_ask hook does
    job_dir = str(store.job_dir(record.job_id))
    record_path = os.path.join(job_dir, "job.json")
    kinds = [
        (kind, "record" if path == record_path else "dir" if path == job_dir else "new record") for kind, path in events
    ]
    assert kinds == [("fsync", "new record"), ("replace", "record"), ("fsync", "dir")], events
    assert store.get(record.job_id).asked is True
