"""Walkthrough 10, W10-5: the service's log said nothing when nodes went silent between jobs (its own link down
for a minute left no trace) nor when they came back. It now logs one WARNING when a node makes no call within the
node timeout and one line when it calls again. The real service in this process; the node registers with its
dispatcher and then stays silent."""

from __future__ import annotations

import logging
import time

from privfed.common.identity import owner_id
from privfed.common.tasks import OwnerInfo
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
