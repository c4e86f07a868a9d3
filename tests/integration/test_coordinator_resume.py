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
    if kill_after_round is not None:  # the killed run's report, written ahead of its batches, names the run going on
        _assert_resumed_in(out)
    debits = {}
    for i in range(2):
        path = tmp / f"owner-{i}.sqlite"
        with sqlite3.connect(path) as db:
            owner_ids = [r[0] for r in db.execute("SELECT DISTINCT owner_id FROM releases")]
        with Ledger(path, epsilon_budget=4.0) as ledger:
            for oid in owner_ids:
                debits[oid] = sorted((h["purpose"].split(":")[0], h["epsilon"]) for h in ledger.history(oid))
    return json.loads(model_path.read_text()), debits


def _assert_resumed_in(out: Path) -> dict:
    """The report of the run that finished a killed job; the killed run's report says the job went on there."""
    killed, resumed = (json.loads(p.read_text()) for p in sorted(out.glob("*/report.json")))
    assert resumed["status"] == "ok", resumed.get("error")
    assert killed["status"] == "failed" and killed["error"].startswith(
        "interrupted; a later run of its journal started in "
    ), killed
    assert killed["error"].endswith(str(sorted(out.glob("*/report.json"))[1].parent.resolve())), killed["error"]
    return resumed


def _booked(journal: Path) -> dict[str, float]:
    """Each owner -> the most the journal's recorded accounts book it for (each step's book holds the job's epsilon
    by owner so far)."""
    booked: dict[str, float] = {}
    with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as db:
        for row in db.execute("SELECT learner_account, sum_account FROM rounds"):
            for account in filter(None, row):
                for owner, epsilon in json.loads(account)["book"]["epsilon"].items():
                    booked[owner] = max(booked.get(owner, 0.0), epsilon)
    return booked


def _paid(ledger: Path) -> dict[str, float]:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as db:
        return dict(db.execute("SELECT owner_id, SUM(epsilon) FROM releases GROUP BY owner_id").fetchall())


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
        while True:  # stopped where owner-1 has paid for a step the journal has not recorded (walkthrough 14, W14-2)
            assert coordinator.poll() is None, (tmp_path / "coordinator.log").read_text()[-3000:]
            assert time.monotonic() < deadline and _rounds_done(journal) < ROUNDS, (
                "no unrecorded release before the end"
            )
            coordinator.send_signal(signal.SIGSTOP)  # the journal holds still while it is compared with the ledger
            booked, paid = _booked(journal), _paid(tmp_path / "owner-1.sqlite")
            unrecorded = {o for o, e in paid.items() if e > booked.get(o, 0.0) + 1e-9}
            if unrecorded:
                break
            coordinator.send_signal(signal.SIGCONT)
            time.sleep(0.005)
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
    report = _assert_resumed_in(out)
    assert report["lost_nodes"] == ["owner-1"], report
    # every owner that paid is named: owner-1's that paid in the step the killed run had not recorded too
    named = {o for o, e in report["epsilon_by_owner"].items() if e > 0} | set(report["epsilon_unanswered_by_owner"])
    paid = _paid(tmp_path / "owner-0.sqlite") | _paid(tmp_path / "owner-1.sqlite")
    assert unrecorded <= set(paid) <= named, (sorted(unrecorded), sorted(set(paid) - named))
    log = (tmp_path / "coordinator-resumed.log").read_text()
    assert "20 of them are not registered within 5 s" in log and "the job goes on over the 20 that did" in log, log
    with sqlite3.connect(tmp_path / "owner-1.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM releases").fetchone()[0] == before
    with Ledger(tmp_path / "owner-0.sqlite", epsilon_budget=4.0) as ledger:  # nobody paid past the job's epsilon
        assert all(ledger.spent(f"owner-0.o{i:05d}").epsilon <= 4.0 + 1e-9 for i in range(20))
