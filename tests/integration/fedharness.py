"""Real federations for integration tests: a coordinator gRPC server in this process and
owner nodes as separate OS processes (``python -m privfed.deploy.cli owner``)."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from liveness import LivenessClock, LivenessInterceptor

from privfed.common.ledger import Ledger
from privfed.deploy.certs import make_certs
from privfed.deploy.commands import owner_argv
from privfed.proto.transport import MAX_MESSAGE_BYTES, TlsFiles
from privfed.server.app import CoordinatorServer
from privfed.server.job import run_job

DATASET = ["--dataset", "synthetic", "--n-samples", "600", "--seed", "3", "--test-fraction", "0.25"]


def owner_cmd(
    port: int,
    name: str,
    *,
    n_owners: int,
    shards: str,
    ledger: Path,
    budget: float,
    certs: Path | None,
    extra: list[str] = (),
    dataset: list[str] = DATASET,
) -> list[str]:
    cmd = [
        *owner_argv(f"127.0.0.1:{port}", name),
        "--n-owners",
        str(n_owners),
        "--shards",
        shards,
        "--ledger",
        str(ledger),
        "--epsilon-budget",
        repr(budget),
        "--rng",
        "seeded",
        *([] if "--policy" in extra else ["--connect-timeout", "20"]),  # a daemon takes none
        *dataset,
        *extra,
    ]
    return cmd + (["--insecure"] if certs is None else ["--certs", str(certs)])


@dataclass
class Federation:
    tmp: Path
    secure: bool = True
    node_timeout: float = 15.0
    n_nodes: int = 4  # owner-node certificates to make: owner-0 .. owner-<n_nodes - 1>
    procs: list[subprocess.Popen] = field(default_factory=list)
    interceptors: tuple = ()  # gRPC server interceptors (capture.RecordingInterceptor)
    max_message_bytes: int = MAX_MESSAGE_BYTES  # the coordinator's bound (small_message_owner.py nodes know it)
    #: The coordinator's clock (None: the wall clock). A test that waits for a killed node's node timeout
    #: passes a :class:`liveness.LivenessClock` of the nodes it expects alive (and forgets its victim when
    #: it kills it), so a loaded machine that starves a healthy node cannot make it look dead.
    clock: LivenessClock | None = None

    def __post_init__(self):
        self.certs = make_certs(self.tmp / "certs", owners=self.n_nodes) if self.secure else None
        tls = TlsFiles.in_dir(self.certs, "coordinator") if self.secure else None
        watch = (LivenessInterceptor(self.clock),) if self.clock is not None else ()
        self.server = CoordinatorServer(
            tls=tls,
            node_timeout=self.node_timeout,
            interceptors=(*watch, *self.interceptors),
            max_message_bytes=self.max_message_bytes,
        )
        if self.clock is not None:  # the dispatcher's clock, injected as its unit tests inject theirs
            self.server.dispatcher._clock = self.clock
        self.port = self.server.start("127.0.0.1:0")

    def spawn(
        self,
        name: str,
        *,
        n_owners: int,
        shards: str,
        budget: float,
        port: int | None = None,
        ledger: Path | None = None,
        extra: list[str] = (),
        module_cmd: list[str] | None = None,
        certs: Path | None = None,
        dataset: list[str] = DATASET,
        env: dict | None = None,
    ) -> subprocess.Popen:
        ledger = ledger or self.tmp / f"{name}.sqlite"
        cmd = owner_cmd(
            port or self.port,
            name,
            n_owners=n_owners,
            shards=shards,
            ledger=ledger,
            budget=budget,
            certs=certs if certs is not None else self.certs,
            extra=extra,
            dataset=dataset,
        )
        if module_cmd is not None:  # run a test-only entry point with the same arguments
            cmd = [sys.executable, *module_cmd, *cmd[3:]]
        log = open(self.tmp / f"{name}.log", "a")
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=None if env is None else {**os.environ, **env}
        )
        self.procs.append(proc)
        return proc

    def run(self, strategy, expected_owners: int, **kw):
        kw = {"register_timeout": 60} | kw
        return run_job(self.server, strategy, expected_owners=expected_owners, show_progress=False, **kw)

    def run_in_thread(self, strategy, expected_owners: int, **kw):
        """The job in a thread; its outcome goes to ``box["outcome"]``, or what it raised to ``box["error"]`` (a job
        the test stops mid-way ends in an error, which pytest reported as an unhandled exception of a later test)."""
        box = {}

        def run() -> None:
            try:
                box["outcome"] = self.run(strategy, expected_owners, **kw)
            except Exception as exc:
                box["error"] = exc

        t = threading.Thread(target=run)
        t.start()
        return t, box

    def close(self):
        self.server.dispatcher.shutdown()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.server.stop(0)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def coordinator_job(
    tmp: Path,
    flags: list[str],
    nodes: dict[str, tuple[str, float]],
    *,
    n_owners: int,
    dataset: list[str],
    node_codes: dict[str, int] | None = None,
    scripts: dict[str, Path] | None = None,
    code: int = 0,
) -> tuple[dict, Path]:
    """A ``privfed coordinator`` process (``flags``: its learning flags) with one ``privfed owner`` process
    per node (name -> (shards, budget)), insecure on loopback; waits for the coordinator to exit 0 and each node
    with its exit code in ``node_codes`` (default 0), and returns the coordinator's ``report.json`` and its path
    (``code``: the coordinator's exit code, 0 by default).
    ``scripts``: a node run by a test's wrapper of the owner CLI instead (``garble_owner.py``)."""
    import json

    port, out = free_port(), tmp / "runs"
    cmd = [sys.executable, "-m", "privfed.deploy.cli", "coordinator", *flags, "--insecure"]
    cmd += ["--listen", f"127.0.0.1:{port}", "--owners", str(n_owners), "--out", str(out)]
    cmd += ["--register-timeout", "60", *dataset]
    procs = [subprocess.Popen(cmd, stdout=open(tmp / "coordinator.log", "w"), stderr=subprocess.STDOUT)]
    for name, (shards, budget) in nodes.items():
        owner = owner_cmd(
            port, name, n_owners=n_owners, shards=shards, ledger=tmp / f"{name}.sqlite", budget=budget, certs=None,
            dataset=dataset, extra=["--connect-timeout", "60"],
        )  # fmt: skip
        if name in (scripts or {}):
            owner = [sys.executable, str((scripts or {})[name]), *owner[3:]]  # past `python -m privfed.deploy.cli`
        procs.append(subprocess.Popen(owner, stdout=open(tmp / f"{name}.log", "w"), stderr=subprocess.STDOUT))
    try:
        assert procs[0].wait(timeout=180) == code, (tmp / "coordinator.log").read_text()[-3000:]
        codes = {name: p.wait(timeout=60) for name, p in zip(nodes, procs[1:], strict=True)}
        assert codes == {name: (node_codes or {}).get(name, 0) for name in nodes}, codes
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    (path,) = out.glob("*/report.json")
    return json.loads(path.read_text()), path


def ledger_entries(tmp: Path, nodes, budget: float) -> dict[str, list[dict]]:
    """Every owner's ledger entries on the nodes of a :func:`coordinator_job` (their ``{name}.sqlite`` in ``tmp``)."""
    entries: dict[str, list[dict]] = {}
    for name in nodes:
        path = tmp / f"{name}.sqlite"
        with sqlite3.connect(path) as db:
            owner_ids = [r[0] for r in db.execute("SELECT DISTINCT owner_id FROM releases")]
        with Ledger(path, epsilon_budget=budget) as ledger:
            entries |= {oid: ledger.history(oid) for oid in owner_ids}
    return entries


def assert_one_report_each(report: dict, tmp: Path, nodes, n_owners: int, epsilon: float, purpose: str) -> None:
    """A one-round job of a :func:`coordinator_job`: every owner asked once and released once, the privacy split
    one release of ``purpose`` at ``epsilon``, and every owner's ledger exactly that one entry."""
    (round_,) = report["rounds"]
    assert round_["asked"] == round_["released"] == n_owners and not report["refused"]
    (part,) = report["privacy"]["releases"]
    assert part == {"purpose": purpose, "epsilon": epsilon, "delta": 0.0, "releases": 1}
    entries = ledger_entries(tmp, nodes, epsilon)
    assert len(entries) == n_owners
    for history in entries.values():
        (entry,) = history
        assert entry["purpose"].startswith(f"{purpose}:") and entry["epsilon"] == epsilon


#: The survey of the one-report-per-owner jobs: 755 training rows, one owner each.
ANES96 = ["--dataset", "anes96", "--seed", "1", "--test-fraction", "0.2"]


def one_report_job(
    tmp: Path, flags: list[str], purpose: str, *, epsilon: float, n_owners: int = 755
) -> tuple[dict, Path]:
    """A one-round job (``flags``: its learning flags, ``--epsilon`` added) on two owner nodes sharing anes96's
    ``n_owners`` one-row owners: it learns well above the majority class and every owner releases once, one
    ledger entry of ``purpose`` at ``epsilon`` (:func:`assert_one_report_each`). The report and its path."""
    half = n_owners // 2
    nodes = {"owner-0": (f"0:{half}", epsilon), "owner-1": (f"{half}:{n_owners}", epsilon)}
    report, path = coordinator_job(tmp, [*flags, "--epsilon", str(epsilon)], nodes, n_owners=n_owners, dataset=ANES96)
    assert report["status"] == "ok" and report["config"]["quorum"] == (n_owners + 1) // 2  # half, checked before
    assert report["accuracy"] > report["baselines"]["majority_class"] + 0.15, report["accuracy"]
    assert_one_report_each(report, tmp, nodes, n_owners, epsilon, purpose)
    assert not any(e["nonprivate"] for h in ledger_entries(tmp, nodes, epsilon).values() for e in h)
    return report, path
