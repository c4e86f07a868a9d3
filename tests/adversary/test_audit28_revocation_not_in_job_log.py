"""Audit 28, A28-3b: a running job's revocation watch (``CoordinatorService._watch_job``, 683d4e1) checks its
data user's name every second from its own thread, so it is the one that reads a change of the operator's
``--revoked-data-users`` file first. Its line ("--revoked-data-users PATH changed: N name(s) revoked", or the
error that refuses everyone) went to the running job's ``job.log``, which ``privfed job logs`` gives its data user:
alice read the operator's path and how many other data users were revoked, and when. In process: the real service,
its job log handler as ``_run`` adds it, and the real watch."""

from __future__ import annotations

import json
import logging
import os
import threading
import time

import pytest

from privfed.common.bounds import Bounds
from privfed.common.schema import FederationSchema
from privfed.server.joblog import JobRecords
from privfed.server.service import REVOCATION_CHECK, CoordinatorService, ServiceConfig

pytestmark = pytest.mark.in_process


@pytest.mark.parametrize("change", ["revoke", "unreadable"])
def test_a_change_of_the_revoked_file_is_not_in_a_running_jobs_log(tmp_path, caplog, change):
    (tmp_path / "schema.toml").write_text(json.dumps(FederationSchema.shorthand(Bounds.of(0.0, 1.0, 2), 2).to_dict()))
    revoked = tmp_path / "revoked.txt"
    revoked.write_text("trudy\n")
    config = ServiceConfig(
        store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, schema=tmp_path / "schema.toml",
        revoked_data_users=revoked,
    )  # fmt: skip
    service = CoordinatorService(config, tls=None)
    record = service.store.submit({"task": "nb", "epsilon": 1.0, "owners": 3}, "alice")
    job_log = tmp_path / "job.log"
    handler = logging.FileHandler(job_log, encoding="utf-8")  # as CoordinatorService._run adds it
    handler.addFilter(JobRecords())
    root = logging.getLogger("privfed")
    root.addHandler(handler)
    over = threading.Event()
    watcher = threading.Thread(target=service._watch_job, args=(record, over))
    try:
        with caplog.at_level(logging.INFO, logger="privfed"):
            watcher.start()
            if change == "revoke":
                revoked.write_text("trudy\nmallory\n")
                st = revoked.stat()
                os.utime(revoked, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a change the coarse clock cannot hide
            else:  # a directory in its place: unreadable (chmod is no use to root)
                revoked.unlink()
                revoked.mkdir()
            time.sleep(2.5 * REVOCATION_CHECK)
            over.set()
            watcher.join()
    finally:
        root.removeHandler(handler)
        handler.close()
    said = caplog.text
    assert "revoked-data-users" in said or "every data user is refused" in said, said  # the service's log has it
    text = job_log.read_text(encoding="utf-8")
    assert "revoked" not in text and str(revoked) not in text and "refused" not in text, text
