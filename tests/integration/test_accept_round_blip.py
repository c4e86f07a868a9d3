"""Walkthrough 10, W10-8: a node that blips just as a job starts was left out of the whole job. Its owners were
registered and counted when the job started, its node fell silent during the accept round (before any release), and
the job ran without them: ``done`` with 100 of the 150 owners its file asked for, though a job that starts with fewer
registered owners waits for them. The accept round now waits (up to the register timeout) for such a node to call
again, when the job would otherwise start with fewer owners than it asked for, and asks its owners once more.

A coordinator service and three owner daemons as real processes (mTLS); owner-2 stops itself (SIGSTOP) as the
accept round's batch reaches it, and the test lets it go on (SIGCONT) once the service has seen it silent.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from servicefleet import NODES, OWNERS_PER_NODE, ServiceFleet

from privfed.common.ledger import read_accounts

pytestmark = pytest.mark.slow

OWNERS = len(NODES) * OWNERS_PER_NODE
SILENT = "round accept completed with 10 task(s) unanswered (owner-2: silent)"


def test_a_node_that_blips_during_the_accept_round_is_asked_again_and_takes_part(tmp_path):
    with ServiceFleet.running(tmp_path, stalls=True, node_timeout=2.0) as fleet:
        blipping = fleet.procs[NODES.index("owner-2")]
        warm = fleet.submit(task="ncc", epsilon=1.0, owners=OWNERS)  # every node registered and answering
        assert fleet.wait(warm, timeout=90)["state"] == "done", fleet.service_log()[-3000:]
        fleet.stall("owner-2", at="join")
        job_id = fleet.submit(task="ncc", epsilon=1.0, owners=OWNERS)
        deadline = time.monotonic() + 60
        while SILENT not in fleet.service_log():
            assert time.monotonic() < deadline, fleet.service_log()[-3000:]
            time.sleep(0.2)
        time.sleep(1.0)  # silent a while longer, then back
        os.kill(blipping.pid, signal.SIGCONT)
        job = fleet.wait(job_id, timeout=90)
        log = fleet.service_log()
        assert job["state"] == "done", (job, log[-3000:])
        report = fleet.report(job_id)
        assert report["answered"] == OWNERS, report  # W10-8: 20 of 30, the blipping node's owners left out
        assert report["lost_nodes"] == [], report["lost_nodes"]
        assert "accept round: node(s) owner-2 fell silent; the job asked for 30 owners and 20 answered, so it" in log
        assert "accept round: node(s) owner-2 called again and are asked once more" in log
        paid = [
            a.owner_id for a in read_accounts(fleet.ledger("owner-2")) if any(r["job"] == job_id for r in a.releases)
        ]
        assert len(paid) == OWNERS_PER_NODE, paid
