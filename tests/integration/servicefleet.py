"""A coordinator service (``privfed serve``) and owner daemons (``privfed owner --policy``) as real
processes, and the data user's commands (``privfed submit``, ``jobs``, ``job``) run as a user would."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedharness import DATASET, owner_cmd

from privfed.common.ledger import read_accounts
from privfed.deploy.certs import make_certs

NODES = ("owner-0", "owner-1", "owner-2")
OWNERS_PER_NODE = 10
#: Every owner's policy; a node's own entries (``limits``) override it.
POLICY = {
    "tasks": ["ncc", "bdt", "feddpdr", "lr"],
    "max_epsilon_per_job": 4.0,
    "max_delta_per_job": 1e-4,
    "data_users": ["alice"],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def toml(values: dict[str, Any]) -> str:
    return "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())


@dataclass
class ServiceFleet:
    tmp: Path
    limits: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> policy overrides
    procs: list[subprocess.Popen] = field(default_factory=list)
    #: Run the daemons as ``stall_owner.py``: :meth:`stall` makes one stop itself at its next release batch.
    stalls: bool = False
    node_timeout: float | None = None  # the service's --node-timeout (None: its default)

    def __post_init__(self) -> None:
        self.certs = make_certs(self.tmp / "certs", owners=len(NODES), data_users=["alice", "bob"])
        self.port, self.status_port = free_port(), free_port()
        self.store = self.tmp / "store"
        self.revoked = self.tmp / "revoked-data-users.txt"  # privfed serve --revoked-data-users: none at first
        self.revoked.write_text("# one data-user name per line\n")
        self.service: subprocess.Popen | None = None

    @classmethod
    @contextmanager
    def running(cls, tmp: Path, **settings: Any) -> Iterator[ServiceFleet]:
        """A service and its owner daemons started, and stopped on leaving (a module fixture's body)."""
        fleet = cls(tmp, **settings)
        try:
            fleet.start_service()
            fleet.start_owners()
            yield fleet
        finally:
            fleet.close()

    # ---------------------------------------------------------------- processes
    def start_service(self) -> None:
        log = open(self.tmp / "serve.log", "a")
        seen = self.service_log().count("serving on port") if (self.tmp / "serve.log").exists() else 0
        self.service = subprocess.Popen(
            [sys.executable, "-m", "privfed.deploy.cli", "serve", "--listen", f"127.0.0.1:{self.port}",
             "--certs", str(self.certs), "--store", str(self.store),
             "--status-listen", f"127.0.0.1:{self.status_port}", "--revoked-data-users", str(self.revoked), *DATASET,
             *([] if self.node_timeout is None else ["--node-timeout", str(self.node_timeout)])],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while self.service_log().count("serving on port") == seen:
            assert self.service.poll() is None, (self.tmp / "serve.log").read_text()
            assert time.monotonic() < deadline, "the service did not start"
            time.sleep(0.1)

    def stop_service(self, kill: bool = False) -> None:
        """SIGTERM (the service stops cleanly), or with ``kill`` SIGKILL (a crash: nothing more is written)."""
        assert self.service is not None
        if kill:
            self.service.kill()
            assert self.service.wait(timeout=20) == -signal.SIGKILL
            return
        self.service.terminate()
        assert self.service.wait(timeout=20) == 0

    def start_owners(self) -> None:
        for i, node in enumerate(NODES):
            policy = self.tmp / f"{node}-policy.toml"
            policy.write_text(toml(POLICY | self.limits.get(node, {})))
            cmd = owner_cmd(
                self.port, node, n_owners=len(NODES) * OWNERS_PER_NODE,
                shards=f"{i * OWNERS_PER_NODE}:{(i + 1) * OWNERS_PER_NODE}", ledger=self.ledger(node),
                budget=100.0, certs=self.certs, extra=["--policy", str(policy), "--delta-budget", "1e-3"],
            )  # fmt: skip
            env = None
            if self.stalls:  # the same arguments, through the test-only entry point
                cmd = [sys.executable, str(Path(__file__).with_name("stall_owner.py")), *cmd[3:]]
                env = os.environ | {"PRIVFED_TEST_STALL": str(self.tmp / f"stall-{node}")}
            self.procs.append(
                subprocess.Popen(cmd, stdout=open(self.tmp / f"{node}.log", "a"), stderr=subprocess.STDOUT, env=env)
            )

    def stall(self, node: str, at: str = "release") -> None:
        """``node`` (its daemon run as ``stall_owner.py``: ``stalls``) stops itself (SIGSTOP) before answering its
        next batch with a release task: after a job's accept round, in its first batch (``at="join"``: before
        answering the accept round). SIGCONT it when done."""
        assert self.stalls
        (self.tmp / f"stall-{node}").write_text(at)

    def node_log(self, node: str) -> str:
        return (self.tmp / f"{node}.log").read_text(errors="replace")

    def ledger(self, node: str) -> Path:
        return self.tmp / f"{node}.sqlite"

    def releases(self, node: str, job_id: str) -> list[dict]:
        """The node's ledger entries for the job (none while it has no ledger file: its first debit creates it)."""
        if not self.ledger(node).exists():
            return []
        return [r for a in read_accounts(self.ledger(node)) for r in a.releases if r["job"] == job_id]

    def close(self) -> None:
        if self.service is not None and self.service.poll() is None:
            self.service.terminate()
            self.service.wait(timeout=20)
        for p in self.procs:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    # ---------------------------------------------------------------- the data user's commands
    def cli(self, *args: str, name: str = "alice", certs: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "privfed.deploy.cli", *args,
             "--coordinator", f"127.0.0.1:{self.port}", "--certs", str(certs or self.certs), "--name", name],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    def submit(self, name: str = "alice", **job: Any) -> str:
        path = self.tmp / f"job-{len(list(self.tmp.glob('job-*.toml')))}.toml"
        path.write_text(toml(job))
        done = self.cli("submit", str(path), name=name)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[2]

    def jobs(self) -> dict[str, dict[str, Any]]:
        done = self.cli("jobs", "--json", "--all")
        assert done.returncode == 0, done.stderr
        return {j["job_id"]: j for j in json.loads(done.stdout)}

    def wait(self, job_id: str, states: tuple[str, ...] = ("done", "failed", "cancelled"), timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:  # the store's record (``privfed jobs`` shows the same; tested once, not polled)
            job = json.loads((self.job_dir(job_id) / "job.json").read_text())
            if job["state"] in states:
                return job
            assert time.monotonic() < deadline, f"job {job_id} still {job['state']}: {self.service_log()[-3000:]}"
            time.sleep(0.3)

    def job_dir(self, job_id: str) -> Path:
        return self.store / job_id

    def report(self, job_id: str) -> dict[str, Any]:
        return json.loads((self.job_dir(job_id) / "report.json").read_text())

    def service_log(self) -> str:
        return (self.tmp / "serve.log").read_text()
