"""A service restarted with another federation schema gets nothing more from an owner daemon that read its rows
by the first one (walkthrough 3).

The daemon had loaded its file by the service's schema at its first registration and kept those rows on every
later one, never comparing the schema a re-registration brings: restarted with the classes listed in the
other order, the service ran an nb job to "done" on 100 owners' releases read by the old schema (0.41 where
the same job scored 0.82), and a change of a fill value did the same. A node started against the new schema
was refused. Now a re-registration under another schema makes the node refuse and stop, before any task of
the new service is answered; its ledger holds nothing of it.

The real service in this process, restarted on the same port and store; the owner daemon a real process.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time

import numpy as np
import pytest
from servicefleet import POLICY, toml

from privfed.common.ledger import Ledger
from privfed.deploy.commands import owner_argv
from privfed.server.jobapi import job_settings
from privfed.server.service import CoordinatorService, ServiceConfig

pytestmark = pytest.mark.slow
SCHEMA = 'features = ["a", "b"]\nclasses = [{}]\ntest = "test.csv"\n[bounds]\nlo = -3\nhi = 5\n'


def wait_for(done, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_owner_daemon_refuses_a_service_restarted_with_another_schema(tmp_path, caplog):
    rng = np.random.default_rng(3)
    for name, n in (("rows.csv", 40), ("test.csv", 60)):
        y = rng.integers(0, 2, n)
        X = np.clip(rng.normal(size=(n, 2)) + 2 * y[:, None], -3.0, 5.0)
        (tmp_path / name).write_text("a,b,y\n" + "".join(f"{a:.3f},{b:.3f},{v}\n" for (a, b), v in zip(X, y)))
    (tmp_path / "first.toml").write_text(SCHEMA.format("0, 1"))
    (tmp_path / "second.toml").write_text(SCHEMA.format("1, 0"))  # the classes in the other order
    (tmp_path / "policy.toml").write_text(toml(POLICY))
    port, ledger = free_port(), tmp_path / "owner-0.sqlite"

    def service(schema: str) -> CoordinatorService:
        config = ServiceConfig(
            store=tmp_path / "store", listen=f"127.0.0.1:{port}", status_listen=None, schema=tmp_path / schema
        )
        started = CoordinatorService(config, tls=None)
        started.start()
        return started

    first = service("first.toml")
    log = tmp_path / "owner-0.log"
    node = subprocess.Popen(
        [*owner_argv(f"127.0.0.1:{port}", "owner-0"), "--data", str(tmp_path / "rows.csv"), "--shards", "4",
         "--ledger", str(ledger), "--epsilon-budget", "100", "--delta-budget", "1",
         "--policy", str(tmp_path / "policy.toml"), "--insecure"],
        stdout=open(log, "w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    second = None
    try:
        job = first.submit(job_settings({"task": "ncc", "epsilon": 2.0, "owners": 4}), "alice").job_id
        wait_for(lambda: first.store.get(job).state in ("done", "failed"), "the first job did not end")
        assert first.store.get(job).state == "done", log.read_text()[-2000:]
        first.stop()
        caplog.set_level(logging.WARNING, logger="privfed.coordinator")
        second = service("second.toml")  # it says so at its start (walkthrough 14, W14-4: only the daemons' exits did)
        said = [r.getMessage() for r in caplog.records if "is not the one its last job" in r.getMessage()]
        assert len(said) == 1 and job in said[0] and "refuses this one and stops for good" in said[0], said
        again = second.submit(job_settings({"task": "ncc", "epsilon": 2.0, "owners": 4, "min_owners": 1}), "alice")
        wait_for(lambda: node.poll() is not None, "the owner daemon kept serving under another schema")
        assert node.returncode == 2
        assert "the coordinator's federation schema changed (sha256 " in log.read_text(), log.read_text()[-2000:]
        with Ledger(ledger, epsilon_budget=100.0, delta_budget=1.0) as book:
            jobs = {h["job"] for o in range(4) for h in book.history(f"owner-0.o{o:05d}")}
        assert again.job_id not in jobs and job in jobs, jobs  # nothing released to the restarted service
    finally:
        for s in (first, second):
            if s is not None:
                s.stop()
        node.terminate()
        node.wait(timeout=20)
