"""``privfed coordinator --task lr --solver gd`` with real ``privfed owner`` processes (issue 22 item 4).

A coordinator process and two owner node processes over gRPC, one row per owner (755 owners of the
anes96 survey): LDP gradient descent learns well above the majority class at ε = 8; the report has one
round per group, every owner asked once; each owner's ledger holds exactly one gradient at ε; the
model is saved and served as ``--solver local``'s is (a linear model).
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from fedharness import owner_cmd

from privfed.common.learners.exported import TrainedClassifier
from privfed.common.ledger import Ledger

EPSILON, OWNERS = 8.0, 755
DATA = ["--dataset", "anes96", "--seed", "1", "--test-fraction", "0.2"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gradient_descent_learns_over_the_wire_one_gradient_per_owner(tmp_path: Path):
    port, out = _free_port(), tmp_path / "runs"
    cmd = [sys.executable, "-m", "privfed.deploy.cli", "coordinator", "--task", "lr", "--solver", "gd"]
    cmd += ["--insecure", "--listen", f"127.0.0.1:{port}", "--owners", str(OWNERS), "--epsilon", str(EPSILON)]
    cmd += ["--out", str(out), "--register-timeout", "60", *DATA]
    procs = [subprocess.Popen(cmd, stdout=open(tmp_path / "coordinator.log", "w"), stderr=subprocess.STDOUT)]
    half = OWNERS // 2
    for name, shards in (("owner-0", f"0:{half}"), ("owner-1", f"{half}:{OWNERS}")):
        owner = owner_cmd(
            port, name, n_owners=OWNERS, shards=shards, ledger=tmp_path / f"{name}.sqlite", budget=EPSILON,
            certs=None, dataset=DATA, extra=["--connect-timeout", "60"],
        )  # fmt: skip
        procs.append(subprocess.Popen(owner, stdout=open(tmp_path / f"{name}.log", "w"), stderr=subprocess.STDOUT))
    try:
        assert procs[0].wait(timeout=180) == 0, (tmp_path / "coordinator.log").read_text()[-3000:]
        assert [p.wait(timeout=60) for p in procs[1:]] == [0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    (path,) = out.glob("*/report.json")
    report = json.loads(path.read_text())
    assert report["status"] == "ok" and report["config"]["solver"] == "gd"
    assert report["accuracy"] > report["baselines"]["majority_class"] + 0.15, report["accuracy"]

    rounds = report["rounds"]
    assert len(rounds) == 8 and all(r["phase"] == "gradient" and r["released"] == r["asked"] for r in rounds)
    assert sum(r["asked"] for r in rounds) == OWNERS and not report["refused"]
    (part,) = report["privacy"]["releases"]
    assert part == {"purpose": "lr-gradient", "epsilon": EPSILON, "delta": 0.0, "releases": 1}

    debited = 0
    for name in ("owner-0", "owner-1"):
        ledger_path = tmp_path / f"{name}.sqlite"
        with sqlite3.connect(ledger_path) as db:
            owner_ids = [r[0] for r in db.execute("SELECT DISTINCT owner_id FROM releases")]
        with Ledger(ledger_path, epsilon_budget=EPSILON) as ledger:
            for oid in owner_ids:
                (entry,) = ledger.history(oid)
                assert entry["purpose"].startswith("lr-gradient:") and entry["epsilon"] == EPSILON
                debited += 1
    assert debited == OWNERS

    from privfed.common.learners.logistic import LinearModel

    model = TrainedClassifier.from_file(str(path.parent / "model.json"))
    assert isinstance(model.model_, LinearModel) and model.model_.coef_.shape[0] == 1  # as --solver local's
