"""Owner-side guarantees over real processes: ledger refusal and persistence across a
restart, unauthenticated nodes rejected, malformed data files rejected with a clear error."""

import re
import subprocess
import sys

import pytest

from privfed.common.messages import Refusal
from privfed.deploy.certs import make_certs
from privfed.owner.data import federation_split
from privfed.server.strategies import make_strategy

from fedharness import Federation, owner_cmd

pytestmark = pytest.mark.slow


def ncc(eps):
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    return make_strategy("ncc", mechanism="pm", epsilon=eps, n_classes=2, bounds=test.bounds)


def test_overspend_is_refused_and_nothing_released(tmp_path):
    fed = Federation(tmp_path)
    try:
        fed.spawn("owner-0", n_owners=10, shards="0:10", budget=1.0)
        fed.server.dispatcher.wait_for_owners(10, 60)
        tasks = ncc(2.0).configure([f"o{i:05d}" for i in range(10)], "r1")
        result = fed.server.dispatcher.run(tasks, timeout=60)
    finally:
        fed.close()
    payloads = [r.payload for r in result.results.values()]
    assert len(payloads) == 10
    assert all(isinstance(p, Refusal) and p.code == "budget_exceeded" for p in payloads)
    assert "budget" in payloads[0].message


def test_ledger_survives_restart(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    fed = Federation(tmp_path)
    try:
        first = fed.spawn("owner-0", n_owners=5, shards="0:5", budget=1.0, ledger=ledger)
        outcome = fed.run(ncc(1.0), 5)
        assert outcome.answered == 5 and not outcome.refused
        first.kill()          # no clean shutdown: the debit must already be on disk
        first.wait()
        fed.spawn("owner-0", n_owners=5, shards="0:5", budget=1.0, ledger=ledger)
        tasks = ncc(1.0).configure([f"o{i:05d}" for i in range(5)], "r2")
        result = fed.server.dispatcher.run(tasks, timeout=60)
    finally:
        fed.close()
    payloads = [r.payload for r in result.results.values()]
    assert len(payloads) == 5 and all(isinstance(p, Refusal) and p.code == "budget_exceeded" for p in payloads)


def test_node_with_certificate_from_another_ca_is_rejected(tmp_path):
    rogue_certs = make_certs(tmp_path / "rogue", owners=1)
    fed = Federation(tmp_path)
    try:
        rogue = fed.spawn("owner-0", n_owners=5, shards="0:5", budget=1.0, certs=rogue_certs,
                          extra=["--connect-timeout", "3"])
        code = rogue.wait(timeout=60)
        assert fed.server.dispatcher.owners() == {}
    finally:
        fed.close()
    assert code == 2
    assert "unreachable" in fed.log("owner-0") or "refused" in fed.log("owner-0")


def test_node_claiming_another_identity_is_rejected(tmp_path):
    fed = Federation(tmp_path)
    impostor_dir = tmp_path / "impostor"
    impostor_dir.mkdir()
    # a valid certificate of our CA, but for owner-1, presented by a node calling itself owner-0
    for suffix in (".pem", "-key.pem"):
        (impostor_dir / f"owner-0{suffix}").write_bytes((fed.certs / f"owner-1{suffix}").read_bytes())
    (impostor_dir / "ca.pem").write_bytes((fed.certs / "ca.pem").read_bytes())
    try:
        impostor = fed.spawn("owner-0", n_owners=5, shards="0:5", budget=1.0, certs=impostor_dir)
        code = impostor.wait(timeout=60)
        assert fed.server.dispatcher.owners() == {}
    finally:
        fed.close()
    assert code == 2
    assert "does not match its certificate" in fed.log("owner-0")


@pytest.mark.parametrize("content,expect", [
    ("1.0,2.0,0\n3.0,nan,1\n", "(row|line) 2"),
    ("1.0,2.0,0\n3.0,4.0\n", "(row|line) 2"),
    ("1.0,2.0,0\n3.0,abc,1\n", "(row|line) 2"),
    ("1.0,2.0,0\n3.0,4.0,x\n", "(row|line) 2"),
])
def test_malformed_data_file_gives_one_line_error(tmp_path, content, expect):
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    cmd = [sys.executable, "-m", "privfed.deploy.cli", "owner", "--coordinator", "127.0.0.1:1", "--name", "owner-0",
           "--data", str(bad), "--bounds", "0:10", "--ledger", str(tmp_path / "l.sqlite"), "--epsilon-budget", "1",
           "--insecure"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    err = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(err) == 1 and "bad.csv" in err[0] and re.search(expect, err[0]), proc.stderr


def test_missing_data_file_gives_clear_error(tmp_path):
    cmd = [sys.executable, "-m", "privfed.deploy.cli", "owner", "--coordinator", "127.0.0.1:1", "--name", "owner-0",
           "--data", str(tmp_path / "nope.csv"), "--bounds", "0:10", "--ledger", str(tmp_path / "l.sqlite"),
           "--epsilon-budget", "1", "--insecure"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "nope.csv" in proc.stderr
