"""Walkthrough 10, W10-5: the service's log said nothing when nodes went silent between jobs (its own link down
for a minute left no trace) nor when they came back. It now logs one WARNING when a node makes no call within the
node timeout and one line when it calls again. The real service in this process; the node registers with its
dispatcher and then stays silent."""

from __future__ import annotations

import logging
import time

from privfed.common.identity import owner_id
from privfed.common.tasks import OwnerInfo
from privfed.server.jobapi import job_settings
from privfed.server.registration import Expected, status
from privfed.server.service import CoordinatorService, ServiceConfig


def _wait_for(caplog, text: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in caplog.text:
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{caplog.text}"
        time.sleep(0.05)


def test_a_node_going_silent_and_calling_again_is_logged(tmp_path, caplog):
    config = ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, dataset="synthetic",
                           node_timeout=1.0)  # fmt: skip
    svc = CoordinatorService(config, None)
    svc.start()
    try:
        with caplog.at_level(logging.INFO, logger="privfed.coordinator"):
            owners = [OwnerInfo(owner_id("hosp-b", i)) for i in range(3)]
            svc.server.dispatcher.register("hosp-b", owners)
            _wait_for(
                caplog, "node hosp-b silent: no call within the node timeout (1 s); its 3 owner(s) are not counted"
            )
            svc.server.dispatcher.register("hosp-b", owners)  # it calls again
            _wait_for(caplog, "node hosp-b calls again: its 3 owner(s) are counted")
    finally:
        svc.stop()
    assert caplog.text.count("node hosp-b silent") == 1  # once per change, not once a second


def test_a_node_of_the_last_run_is_named_not_back_only_until_a_job_has_run(tmp_path):
    """Audit 33: the nodes of the last run not back since a restart stayed named ("hosp-b not back since the
    restart", in waiting lines and in what a data user's submission is told) until the next restart, a node retired
    for good too. Once a job has run after the restart, the restart is behind: the names go."""
    config = ServiceConfig(store=tmp_path / "store", listen="127.0.0.1:0", status_listen=None, dataset="synthetic",
                           node_timeout=0.5)  # fmt: skip
    CoordinatorService(config, None).store.remember_nodes(["hosp-a", "hosp-b"])  # the last run's nodes
    svc = CoordinatorService(config, None)
    svc.start()
    try:
        d = svc.server.dispatcher
        d.register("hosp-a", [OwnerInfo(owner_id("hosp-a", i)) for i in range(2)])
        deadline = time.monotonic() + 20
        while d.known_before != {"hosp-a", "hosp-b"}:  # read from the store as the service starts
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "hosp-b not back since the restart" in status(d, Expected(owners=4))
        job_id = svc.submit(
            job_settings({"task": "ncc", "epsilon": 1.0, "owners": 4, "register_timeout": 1}), "alice"
        ).job_id
        while svc.store.get(job_id).state not in ("done", "failed") or svc.current is not None:
            assert time.monotonic() < deadline, svc.store.get(job_id)
            time.sleep(0.05)
        assert "not back" not in status(d, Expected(owners=4))
    finally:
        svc.stop()
