"""Issue 14, item 1, over real processes: kill -9 of a ``privfed coordinator`` in the middle of a
10-round boosting job, then ``privfed coordinator --resume`` on the same address and journal.

The owner node processes live through it (they retry until the coordinator is back and register
again). The resumed job must end with the same model as an uninterrupted job with the same
seeds (same owners, same ``--seed``, owners' ``--rng seeded``), and no owner's ledger may hold
more than the uninterrupted run's debits.
"""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fedharness import owner_cmd

from privfed.common.ledger import Ledger

pytestmark = pytest.mark.slow

N_OWNERS, ROUNDS = 40, 10
DATA = ["--dataset", "synthetic", "--n-samples", "800", "--seed", "3", "--test-fraction", "0.25"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _coordinator(
    port: int, out: Path, journal: Path, *, resume: bool = False, register_timeout: int = 60
) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "privfed.deploy.cli", "coordinator", "--task", "bdt", "--insecure"]
    cmd += ["--listen", f"127.0.0.1:{port}", "--owners", str(N_OWNERS), "--epsilon", "4", "--rounds", str(ROUNDS)]
    cmd += ["--n-bins", "4", "--weight-bound", "4", "--max-owner-rows", "20", "--out", str(out), *DATA]
    cmd += ["--journal", str(journal), "--register-timeout", str(register_timeout)] + (["--resume"] if resume else [])
    log = open(out.parent / f"coordinator{'-resumed' if resume else ''}.log", "a")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def _owners(tmp: Path, port: int) -> list[subprocess.Popen]:
    procs = []
    for i, shards in enumerate(("0:20", "20:40")):
        cmd = owner_cmd(
            port,
            f"owner-{i}",
            n_owners=N_OWNERS,
            shards=shards,
            ledger=tmp / f"owner-{i}.sqlite",
            budget=4.0,
            certs=None,
            dataset=DATA,
            extra=["--connect-timeout", "60", "--seed", "7"],
        )
        procs.append(subprocess.Popen(cmd, stdout=open(tmp / f"owner-{i}.log", "a"), stderr=subprocess.STDOUT))
    return procs


def _rounds_done(journal: Path) -> int:
    try:
        with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT COUNT(*) FROM rounds WHERE n_parties IS NOT NULL").fetchone()[0])
    except sqlite3.Error:
        return 0


def _job(tmp: Path, kill_after_round: int | None) -> tuple[dict, dict]:
    tmp.mkdir()
    port, out, journal = _free_port(), tmp / "runs", tmp / "journal.sqlite"
    coordinator = _coordinator(port, out, journal)
    owners = _owners(tmp, port)
    try:
        if kill_after_round is not None:
            deadline = time.monotonic() + 120
            while _rounds_done(journal) < kill_after_round and time.monotonic() < deadline:
                assert coordinator.poll() is None, (tmp / "coordinator.log").read_text()[-3000:]
                time.sleep(0.01)
            assert _rounds_done(journal) < ROUNDS, "the job ended before the kill"
            coordinator.send_signal(signal.SIGKILL)
            assert coordinator.wait() == -signal.SIGKILL
            coordinator = _coordinator(port, out, journal, resume=True)
        assert coordinator.wait(timeout=240) == 0, sorted(tmp.glob("*.log"))
        for p in owners:
            p.wait(timeout=60)
    finally:
        for p in [coordinator, *owners]:
            if p.poll() is None:
                p.kill()
    model_path = sorted(out.glob("*/model.json"))[-1]
    if kill_after_round is not None:  # one run directory: the resumed coordinator finished the killed one's job
        assert len(list(out.glob("*/report.json"))) == 1
    debits = {}
    for i in range(2):
        path = tmp / f"owner-{i}.sqlite"
        with sqlite3.connect(path) as db:
            owner_ids = [r[0] for r in db.execute("SELECT DISTINCT owner_id FROM releases")]
        with Ledger(path, epsilon_budget=4.0) as ledger:
            for oid in owner_ids:
                debits[oid] = sorted((h["purpose"].split(":")[0], h["epsilon"]) for h in ledger.history(oid))
    return json.loads(model_path.read_text()), debits


def test_a_coordinator_killed_mid_job_resumes_to_the_same_model(tmp_path):
    clean_model, clean_debits = _job(tmp_path / "clean", None)
    resumed_model, resumed_debits = _job(tmp_path / "killed", kill_after_round=4)
    assert resumed_model == clean_model
    assert resumed_debits == clean_debits


def test_a_resumed_job_goes_on_without_a_node_that_never_came_back_while_its_quorum_stays(tmp_path):
    """Walkthrough 7, W7-10: a job resumed after its coordinator was killed waited for every owner its journal ran
    over, and failed (its rounds, paid for, thrown away) when one node never came back, though the owners that did
    were its quorum; a node lost without the restart would only have been dropped. Now it goes on over them, the
    node's owners asked nothing more and the node reported lost."""
    port, out, journal = _free_port(), tmp_path / "runs", tmp_path / "journal.sqlite"
    coordinator = _coordinator(port, out, journal)
    owners = _owners(tmp_path, port)
    try:
        deadline = time.monotonic() + 120
        while _rounds_done(journal) < 4 and time.monotonic() < deadline:
            assert coordinator.poll() is None, (tmp_path / "coordinator.log").read_text()[-3000:]
            time.sleep(0.01)
        assert _rounds_done(journal) < ROUNDS, "the job ended before the kill"
        for p in (owners[1], coordinator):  # the host of owner-1 and the coordinator go down; owner-1 stays down
            p.send_signal(signal.SIGKILL)
            p.wait()
        with sqlite3.connect(tmp_path / "owner-1.sqlite") as db:
            before = db.execute("SELECT COUNT(*) FROM releases").fetchone()[0]
        coordinator = _coordinator(port, out, journal, resume=True, register_timeout=5)
        assert coordinator.wait(timeout=240) == 0, (tmp_path / "coordinator-resumed.log").read_text()[-3000:]
        owners[0].wait(timeout=60)
    finally:
        for p in [coordinator, *owners]:
            if p.poll() is None:
                p.kill()
    (report_path,) = out.glob("*/report.json")
    report = json.loads(report_path.read_text())
    assert report["status"] == "ok" and report["lost_nodes"] == ["owner-1"], report.get("error")
    log = (tmp_path / "coordinator-resumed.log").read_text()
    assert "20 of them are not registered within 5 s" in log and "the job goes on over the 20 that did" in log, log
    with sqlite3.connect(tmp_path / "owner-1.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM releases").fetchone()[0] == before
    with Ledger(tmp_path / "owner-0.sqlite", epsilon_budget=4.0) as ledger:  # nobody paid past the job's epsilon
        assert all(ledger.spent(f"owner-0.o{i:05d}").epsilon <= 4.0 + 1e-9 for i in range(20))
