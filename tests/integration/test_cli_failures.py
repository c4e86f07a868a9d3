"""Failures reach the person running the job (issue 11, item 2), over real processes: a node that
exits stops ``privfed simulate`` at once with its error; owners' refusals reach the coordinator's
message and report; a failed job still writes its report; a taken port or an unreadable file is
one line and exit 2; a serving coordinator releases its owners when training ends."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from privfed.common.errors import ConfigError
from privfed.server.app import CoordinatorServer

PRIVFED = [sys.executable, "-m", "privfed.deploy.cli"]
DATA = ["--dataset", "synthetic", "--n-samples", "200", "--seed", "1"]


def _privfed(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*PRIVFED, *argv], capture_output=True, text=True, timeout=timeout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_error_line(proc: subprocess.CompletedProcess, command: str) -> str:
    """The one error line on stderr (log lines, which start with their timestamp, aside)."""
    lines = [line for line in proc.stderr.strip().splitlines() if not re.match(r"\d{4}-\d\d-\d\d ", line)]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith(f"privfed {command}: error: "), proc.stderr
    return lines[0]


def _report(out: Path) -> dict:
    (path,) = out.glob("*/report.json")
    return json.loads(path.read_text())


@pytest.mark.slow
def test_a_node_that_exits_stops_simulate_with_its_error_and_a_report(tmp_path):
    # 160 training rows for 300 owners: every owner node refuses to start
    t0 = time.monotonic()
    proc = _privfed("simulate", "--owners", "300", "--processes", "2", "--epsilon", "1", "--out", str(tmp_path), *DATA)
    elapsed = time.monotonic() - t0
    line = _one_error_line(proc, "simulate")
    assert "owner node" in line and "exited with code 2" in line
    assert "300 owners for 160 rows" in line  # the node's own last line
    assert elapsed < 60, f"simulate waited {elapsed:.0f} s for owners that had exited (registration allows 120 s)"
    report = _report(tmp_path)
    assert report["status"] == "failed" and "300 owners for 160 rows" in report["error"]
    assert report["version"]["privfed"] and "baselines" in report


def test_a_taken_port_is_one_line_exit_2():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = _privfed("coordinator", "--owners", "1", "--epsilon", "1", "--insecure", "--listen", f"127.0.0.1:{port}")
    line = _one_error_line(proc, "coordinator")
    assert f"--listen 127.0.0.1:{port}" in line and "in use" in line


def test_a_second_coordinator_cannot_share_a_port():
    first = CoordinatorServer(tls=None)
    port = first.start("127.0.0.1:0")
    try:
        with pytest.raises(ConfigError, match="--listen"):
            CoordinatorServer(tls=None).start(f"127.0.0.1:{port}")
    finally:
        first.stop(0)


@pytest.mark.parametrize("what", ["missing data file", "data is a directory", "ledger directory missing"])
def test_an_unreadable_file_is_one_line_exit_2(tmp_path, what):
    data = {"missing data file": tmp_path / "nope.csv", "data is a directory": tmp_path}.get(what)
    ledger = tmp_path / ("no-such-dir/l.sqlite" if what == "ledger directory missing" else "l.sqlite")
    source = ["--data", str(data), "--bounds", "-1:16"] if data is not None else DATA
    proc = _privfed(
        "owner", "--coordinator", "127.0.0.1:1", "--name", "owner-0", "--insecure",
        "--ledger", str(ledger), "--epsilon-budget", "1", *source,
    )  # fmt: skip
    line = _one_error_line(proc, "owner")
    assert str(data if data is not None else ledger) in line


def test_a_node_whose_data_file_is_missing_makes_no_ledger(tmp_path):
    """Walkthrough 14, W14-9: a node started with a mistyped --data stopped with its one line, but after making a
    ledger, its lock and its .seen file at --ledger (an empty ledger whose owners start at zero, and a .seen that
    then vouches for it). A command that fails on a file it cannot read should leave nothing behind (README: an
    unreadable file is checked before anything else is done)."""
    ledger = tmp_path / "ledgers" / "a.sqlite"
    ledger.parent.mkdir()
    proc = _privfed(
        "owner", "--coordinator", "127.0.0.1:1", "--name", "owner-0", "--insecure", "--ledger", str(ledger),
        "--epsilon-budget", "1", "--data", str(tmp_path / "a.csv"), "--bounds", "-1:16", "--classes", "2",
    )  # fmt: skip
    assert "a.csv" in _one_error_line(proc, "owner")
    assert sorted(p.name for p in ledger.parent.iterdir()) == [], "a failed start left a ledger behind"


def _coordinator(port: int, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*PRIVFED, "coordinator", "--owners", "5", "--epsilon", "1", "--insecure", "--listen", f"127.0.0.1:{port}",
         "--out", str(out), "--register-timeout", "90", *DATA, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _owner(port: int, ledger: Path, log: Path, budget: str = "1") -> subprocess.Popen:
    with open(log, "w") as f:
        return subprocess.Popen(
            [*PRIVFED, "owner", "--coordinator", f"127.0.0.1:{port}", "--name", "owner-0", "--insecure",
             "--n-owners", "5", "--shards", "0:5", "--ledger", str(ledger), "--epsilon-budget", budget,
             "--rng", "seeded", "--connect-timeout", "60", *DATA],
            stdout=f, stderr=subprocess.STDOUT,
        )  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A ``coordinator --serve`` job over one owner node hosting 5 owners, each spending its whole ε."""
    tmp = tmp_path_factory.mktemp("serve")
    port = _free_port()
    coordinator = _coordinator(port, tmp / "runs", "--serve")
    owner = _owner(port, tmp / "ledger.sqlite", tmp / "owner.log")
    try:
        owner_code = owner.wait(timeout=120)
        still_serving = coordinator.poll() is None
    finally:
        coordinator.terminate()
        out, err = coordinator.communicate(timeout=30)
        if owner.poll() is None:
            owner.kill()
    return {"tmp": tmp, "owner_code": owner_code, "still_serving": still_serving, "out": out, "err": err,
            "code": coordinator.returncode}  # fmt: skip


@pytest.mark.slow
def test_a_serving_coordinator_releases_its_owners_when_training_ends(served):
    assert served["owner_code"] == 0 and served["still_serving"], served["err"]
    assert "coordinator ended the job" in (served["tmp"] / "owner.log").read_text()
    assert served["code"] == 0
    assert "chance 0.5000" in served["out"] and "majority class" in served["out"]
    report = _report(served["tmp"] / "runs")
    assert report["status"] == "ok" and report["refusal_summary"] == ""
    assert report["baselines"]["chance"] == 0.5 and report["version"]["privfed"]


@pytest.mark.slow
def test_a_spent_ledger_reaches_the_coordinator_as_refusals_and_a_failed_report(served):
    tmp = served["tmp"]
    port = _free_port()
    coordinator = _coordinator(port, tmp / "runs2")
    owner = _owner(port, tmp / "ledger.sqlite", tmp / "owner2.log")
    try:
        out, err = coordinator.communicate(timeout=120)
        owner_code = owner.wait(timeout=30)
    finally:
        for p in (coordinator, owner):
            if p.poll() is None:
                p.kill()
    lines = err.strip().splitlines()
    assert coordinator.returncode == 2, err
    assert lines[-1].startswith("privfed coordinator: error: only 0 of 5 owners take part in the job")
    assert "5/5 owners refused: budget_exceeded" in lines[-1] and "report:" in lines[-1]
    assert "Traceback" not in err
    report = _report(tmp / "runs2")
    assert report["status"] == "failed" and "5/5 owners refused: budget_exceeded" in report["error"]
    assert len(report["refused"]) == 5 and report["rejected_owners"] == {}  # what became of each owner
    # told the job is over, not left to find the coordinator gone; and it exits 2, having released nothing
    # (walkthrough 4, m6: it exited 0, and a cron job could not tell)
    owner_log = (tmp / "owner2.log").read_text()
    assert owner_code == 2 and "coordinator ended the job" in owner_log, owner_log
    assert "released nothing in job" in owner_log and "(budget_exceeded: 5)" in owner_log, owner_log


def test_a_coordinator_stopped_while_waiting_writes_a_failed_report(tmp_path):
    port = _free_port()
    coordinator = _coordinator(port, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # serving: the port is taken
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        coordinator.send_signal(signal.SIGTERM)
        coordinator.communicate(timeout=30)
    finally:
        if coordinator.poll() is None:
            coordinator.kill()
    assert coordinator.returncode == 0
    report = _report(tmp_path)
    assert report["status"] == "failed" and report["error"].startswith("stopped by SIGTERM")


def _released(ledger: Path) -> bool:
    """Whether the node's ledger file records a release yet (read-only; nothing while the file is being made)."""
    try:
        with closing(sqlite3.connect(f"{ledger.resolve().as_uri()}?mode=ro", uri=True)) as db:
            return db.execute("SELECT COUNT(*) FROM releases").fetchone()[0] > 0
    except sqlite3.Error:
        return False


def _wait_for(path: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        assert time.monotonic() < deadline, f"{text!r} not in {path}"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_duplicate_node_and_foreign_certificates_fail_fast_and_are_named_at_both_ends(tmp_path):
    """Issue 23, items 4 and 5, over real processes with mTLS: a second process with a node's certificate
    is refused (ALREADY_EXISTS) with one line at both ends; a node that does not trust the coordinator's
    certificate exits at once with the cause; the coordinator logs each handshake it rejects with the
    peer's address."""
    from privfed.deploy.certs import make_certs

    certs, rogue = Path(make_certs(tmp_path / "certs", owners=2)), Path(make_certs(tmp_path / "rogue", owners=2))
    foreign = tmp_path / "foreign"  # the federation's CA, but a certificate another CA signed
    foreign.mkdir()
    (foreign / "ca.pem").write_bytes((certs / "ca.pem").read_bytes())
    for suffix in (".pem", "-key.pem"):
        (foreign / f"owner-1{suffix}").write_bytes((rogue / f"owner-1{suffix}").read_bytes())
    port, log = _free_port(), tmp_path / "coordinator.log"

    def owner(name: str, cert_dir: Path, shards: str, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [*PRIVFED, "owner", "--coordinator", f"127.0.0.1:{port}", "--name", name, "--certs", str(cert_dir),
             "--n-owners", "3", "--shards", shards, "--ledger", str(tmp_path / f"{name}-{cert_dir.name}-{shards}.sqlite"),
             "--epsilon-budget", "1", "--rng", "seeded", "--connect-timeout", "60", *extra, *DATA],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    with open(log, "w") as coordinator_log:
        coordinator = subprocess.Popen(
            [*PRIVFED, "coordinator", "--owners", "3", "--epsilon", "1", "--certs", str(certs),
             "--listen", f"127.0.0.1:{port}", "--out", str(tmp_path / "runs"), "--register-timeout", "120", *DATA],
            stdout=subprocess.DEVNULL, stderr=coordinator_log,
        )  # fmt: skip
    first = owner("owner-0", certs, "0:2")
    procs = [coordinator, first]
    try:
        _wait_for(log, "node owner-0 registered 2 owner(s)")
        second = owner("owner-0", certs, "0:2", "--ledger", str(tmp_path / "another-host.sqlite"))  # not the first's
        distrusting = owner("owner-1", rogue, "2:3")
        untrusted = owner("owner-1", foreign, "2:3", "--connect-timeout", "2")
        procs += [second, distrusting, untrusted]
        _, distrust_err = distrusting.communicate(timeout=50)  # it would retry for its --connect-timeout 60 s
        _, second_err = second.communicate(timeout=60)
        untrusted.communicate(timeout=60)
        _wait_for(log, "TLS handshake from")
        coordinator.send_signal(signal.SIGTERM)  # still waiting for owner-1: stop it, it reports why
        coordinator.wait(timeout=60)
        first.communicate(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert distrusting.returncode == 2 and "retrying" not in distrust_err, distrust_err  # no retry: it cannot heal
    assert (
        distrust_err.strip()
        .splitlines()[-1]
        .endswith(
            "failed: the coordinator's certificate is not signed by this node's CA (ca.pem): certificate signature failure"
        )
    ), distrust_err
    assert second.returncode == 2
    line = second_err.strip().splitlines()[-1]
    assert line.startswith("privfed owner: error: register refused by coordinator: ALREADY_EXISTS: node id 'owner-0'")
    assert "already registered by another live process" in line
    text = log.read_text()
    assert re.search(r"rejecting call from ipv4:127.0.0.1:\d+: node id 'owner-0' is already registered", text)
    assert re.search(r"TLS handshake from ipv4:127.0.0.1:\d+ rejected: the node's certificate is not signed", text)
    assert re.search(r"TLS handshake from ipv4:127.0.0.1:\d+ rejected: the peer closed the connection", text)
    assert coordinator.returncode == 0 and first.returncode == 0  # the first node was told the job is over
    report = _report(tmp_path / "runs")
    assert report["status"] == "failed" and report["error"].startswith("stopped by SIGTERM")


@pytest.mark.slow
def test_a_node_whose_job_failed_after_its_releases_exits_2_saying_so(tmp_path):
    """A boosting job that fails after the node released its first round: the node exited 0 (the coordinator
    only said the job was over), and a cron job could not tell. Now the coordinator says it failed and the node
    exits 2 with one line. The failure: once the node's first release is recorded, the test holds its ledger's
    write lock, so the node's next debit waits and the round runs past the coordinator's --round-timeout. (An
    owner whose budget cannot pay the job no longer makes it fail mid-way: it declines at the accept round.)"""
    port = _free_port()
    job = ("--task", "bdt", "--release", "shares", "--rounds", "2", "--epsilon", "2", "--round-timeout", "4")
    coordinator = _coordinator(port, tmp_path / "runs", *job)
    ledger_path = tmp_path / "ledger.sqlite"
    owner = _owner(port, ledger_path, tmp_path / "owner.log", budget="2")
    try:
        deadline = time.monotonic() + 90
        while not _released(ledger_path):
            assert time.monotonic() < deadline and coordinator.poll() is None, "the node released nothing"
            time.sleep(0.01)
        with closing(sqlite3.connect(ledger_path, timeout=30)) as lock:
            lock.execute("BEGIN EXCLUSIVE")  # the node's next debit waits (its busy timeout is 30 s)
            while not list((tmp_path / "runs").glob("*/report.json")):  # the round timed out: the job failed
                assert time.monotonic() < deadline + 60 and coordinator.poll() is None, "the job did not fail"
                time.sleep(0.05)
        _, err = coordinator.communicate(timeout=120)
        owner_code = owner.wait(timeout=60)
    finally:
        for p in (coordinator, owner):
            if p.poll() is None:
                p.kill()
    assert coordinator.returncode == 2 and "round" in err, err
    assert _report(tmp_path / "runs")["status"] == "failed"
    owner_log = (tmp_path / "owner.log").read_text()
    last = owner_log.strip().splitlines()[-1]
    assert owner_code == 2, owner_log
    assert last.startswith("privfed owner: error: job ") and "ended without its result at the coordinator" in last, last


def test_a_node_refuses_an_older_copy_of_its_ledger_and_a_ledger_made_anew_where_it_kept_one(tmp_path):
    """Walkthrough 9 (walkthrough 7's W7-5 again): an older copy of a node's ledger, put back, gave its owners the
    budget of every release made since, and only an INFO line said what it held; a ledger deleted and started again
    did the same. The node now stops with one line (what it saw, what the ledger holds, what to do), until the
    ``.seen`` file beside the ledger is removed on purpose."""
    from privfed.common.ledger import Ledger
    from privfed.common.ledger_file import backup_file
    from privfed.owner.ledger_seen import seen_path

    ledger, copy = tmp_path / "ledger.sqlite", tmp_path / "backup.sqlite"
    start = ("owner", "--coordinator", "127.0.0.1:1", "--connect-timeout", "1", "--name", "owner-0", "--insecure",
             "--n-owners", "2", "--ledger", str(ledger), "--epsilon-budget", "4", *DATA)  # fmt: skip
    with Ledger(ledger, epsilon_budget=4.0) as led:
        led.debit("owner-0.o00000", 1.0, purpose="p", release_id="r1")
        backup_file(ledger, copy)  # the copy `privfed ledger backup` makes
        led.debit("owner-0.o00000", 1.0, purpose="p", release_id="r2")
    first = _privfed(*start)  # no coordinator: it stops when it cannot connect, after what it saw is recorded
    assert "fewer than" not in first.stderr and seen_path(ledger).is_file(), first.stderr
    shutil.copy(copy, ledger)  # the older copy put back
    line = _one_error_line(_privfed(*start), "owner")
    assert f"ledger {ledger} holds 1 release(s), fewer than the 2 this node saw there on " in line, line
    assert f"remove {seen_path(ledger)} to go on with it" in line
    ledger.unlink()  # a ledger made anew
    line = _one_error_line(_privfed(*start), "owner")
    assert f"ledger {ledger} is not the ledger this node last used there, which held 2 release(s)" in line, line
    seen_path(ledger).unlink()  # the owner means it
    assert "is not the ledger" not in _privfed(*start).stderr
