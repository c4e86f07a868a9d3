"""Graceful shutdown on SIGTERM (what `docker compose stop` sends): the in-flight round is
aborted cleanly, the process exits 0, and the owner's ledger stays consistent: every share the
coordinator received was debited first, nothing is debited twice, and after SIGTERM a node
finishes at most the chunk it was computing (whose debits may then never be released: spent
but not sent, the safe side).

"Mid-round" is made deterministic without timing: the big node is frozen with SIGSTOP as soon
as its ledger shows its first debits, with most of its tasks still unanswered, and SIGTERM is
delivered while it is frozen (it runs when SIGCONT thaws the node).

The mid-round case waits for the coordinator to give up on the stopped node (its node timeout): its
coordinator runs in this process (``fedharness``) and measures that silence on a liveness clock
(``liveness``), so a loaded box that starves the healthy node cannot make it look dead too. The
cases that signal the coordinator run the ``privfed coordinator`` process."""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fedharness import Federation
from liveness import LivenessClock

from privfed.common.identity import owner_id
from privfed.common.ledger import Ledger
from privfed.owner.data import federation_split
from privfed.owner.node import CHUNK
from privfed.server.strategies import make_strategy

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "privfed.deploy.cli"]
BIG, SMALL = 2000, 10  # logical owners on node A (owner-0) and node B (owner-1)
N = BIG + SMALL
EPSILON = 1.0
DATASET = ["--dataset", "synthetic", "--n-samples", "10000", "--seed", "5", "--test-fraction", "0.2"]
WAIT = 120  # seconds a process may take before the test gives up on it
STOP_WAIT = 20  # seconds a process gets to exit after SIGTERM


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A `privfed coordinator` process (task lr) and the `privfed owner` processes of ``owners`` (of two:
    a node left out never registers, so the round cannot start), all started at once."""

    def __init__(self, tmp: Path, *, node_timeout: float, owners: tuple[str, ...] = ("owner-0", "owner-1")):
        self.tmp = tmp
        self.certs = tmp / "certs"
        subprocess.run(
            [*CLI, "certs", "--out", str(self.certs), "--owners", "2"], check=True, capture_output=True, timeout=WAIT
        )
        self.port = free_port()
        self.procs: dict[str, subprocess.Popen] = {}
        self.ledgers = {name: tmp / f"{name}.sqlite" for name in ("owner-0", "owner-1")}
        self.spawn(
            "coordinator",
            [
                "coordinator",
                "--listen",
                f"127.0.0.1:{self.port}",
                "--certs",
                str(self.certs),
                "--owners",
                str(N),
                "--epsilon",
                str(EPSILON),
                "--task",
                "lr",
                "--solver",
                "local",  # one round: every owner asked at once, so a node is frozen mid-round
                *DATASET,
                "--out",
                str(tmp / "runs"),
                "--node-timeout",
                str(node_timeout),
                "--register-timeout",
                str(WAIT),
                "--round-timeout",
                "600",
            ],
        )
        for name, shards in (("owner-0", f"0:{BIG}"), ("owner-1", f"{BIG}:{N}")):
            if name not in owners:
                continue
            self.spawn(
                name,
                [
                    "owner",
                    "--coordinator",
                    f"127.0.0.1:{self.port}",
                    "--name",
                    name,
                    "--certs",
                    str(self.certs),
                    "--n-owners",
                    str(N),
                    "--shards",
                    shards,
                    "--ledger",
                    str(self.ledgers[name]),
                    "--epsilon-budget",
                    str(EPSILON),
                    "--rng",
                    "seeded",
                    "--connect-timeout",
                    "30",
                    *DATASET,
                ],
            )

    def spawn(self, name: str, args: list[str]) -> None:
        log = open(self.tmp / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen([*CLI, *args], stdout=log, stderr=subprocess.STDOUT)

    def freeze_mid_round(self, name: str) -> int:
        return freeze_mid_round(self.procs[name], self.ledgers[name], self.logs)

    def terminate_frozen(self, name: str) -> None:
        terminate_frozen(self.procs[name])

    def wait(self, name: str, timeout: float = WAIT) -> int | None:
        return wait(self.procs[name], timeout)

    def wait_for_log(self, name: str, text: str) -> None:
        """Until ``text`` appears in ``name``'s log (the process must stay alive meanwhile)."""
        deadline = time.monotonic() + WAIT
        while text not in (self.tmp / f"{name}.log").read_text():
            assert self.procs[name].poll() is None and time.monotonic() < deadline, self.logs()
            time.sleep(0.05)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.tmp.glob("*.log")))

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
                proc.wait()


def debits(ledger: Path) -> int:
    """Releases recorded so far in a node's ledger (read while the node writes: WAL mode)."""
    if not ledger.exists():
        return 0
    conn = sqlite3.connect(ledger, timeout=5)
    try:
        return conn.execute("SELECT COUNT(*) FROM releases").fetchone()[0]
    except sqlite3.OperationalError:  # tables not created yet
        return 0
    finally:
        conn.close()


def freeze_mid_round(proc: subprocess.Popen, ledger: Path, logs: Callable[[], str]) -> int:
    """SIGSTOP the node ``proc`` at its first debits in ``ledger``; return how many it had made by then."""
    deadline = time.monotonic() + WAIT
    while debits(ledger) == 0:
        assert proc.poll() is None and time.monotonic() < deadline, logs()
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGSTOP)
    return debits(ledger)


def terminate_frozen(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGTERM)  # pending while stopped; handled once thawed
    os.kill(proc.pid, signal.SIGCONT)


def wait(proc: subprocess.Popen, timeout: float = WAIT) -> int | None:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def ledger_state(path: Path) -> dict[str, list[dict]]:
    """Every logical owner's releases, read through the project's Ledger, after an integrity check.
    A node's ledger is named after the node (``owner-0.sqlite``), whose owner ids are ``owner-0.o<i>``."""
    node = path.stem
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    with Ledger(path, epsilon_budget=EPSILON) as ledger:  # opens only if the stored budgets are intact
        return {owner_id(node, i): ledger.history(owner_id(node, i)) for i in range(N)}


def assert_consistent(history: dict[str, list[dict]]) -> set[str]:
    """At most one release per owner (the job's one lr task), for its whole ε; returns who released."""
    for oid, rows in history.items():
        assert len(rows) <= 1, (oid, rows)
        assert all(r["epsilon"] == EPSILON for r in rows), (oid, rows)
    return {oid for oid, rows in history.items() if rows}


def test_owner_sigterm_mid_round_exits_0_and_every_received_share_was_debited(tmp_path):
    """The lr job of :class:`Cluster` (one round, every owner asked at once), its coordinator in this
    process: it completes the round without the stopped node once that node is silent for the node
    timeout, counted on a liveness clock while the healthy node shows life (module docstring)."""
    _, test = federation_split("synthetic", seed=5, test_fraction=0.2, n_samples=10000)  # DATASET's split
    clock = LivenessClock(("owner-0", "owner-1"))
    fed = Federation(tmp_path, node_timeout=3.0, n_nodes=2, clock=clock)
    ledgers = {name: tmp_path / f"{name}.sqlite" for name in ("owner-0", "owner-1")}
    try:
        big = fed.spawn("owner-0", n_owners=N, shards=f"0:{BIG}", budget=EPSILON, dataset=DATASET)
        small = fed.spawn("owner-1", n_owners=N, shards=f"{BIG}:{N}", budget=EPSILON, dataset=DATASET)
        strategy = make_strategy("lr", solver="local", epsilon=EPSILON, n_classes=test.n_classes, bounds=test.bounds)
        job, box = fed.run_in_thread(strategy, N)
        seen = freeze_mid_round(big, ledgers["owner-0"], lambda: fed.log("owner-0") + fed.log("owner-1"))
        assert 0 < seen < BIG  # frozen mid-round: most of its tasks unanswered
        clock.forget("owner-0")  # silent from now on
        terminate_frozen(big)
        owner_code = wait(big, STOP_WAIT)
        job.join(WAIT)  # the coordinator completes the round without the silent node (after its node timeout)
        assert not job.is_alive(), "the job did not end"
        fed.server.dispatcher.shutdown()  # the job is over: owner-1 is told so at its next poll and exits
        small_code = wait(small)
    finally:
        fed.close()
    assert [owner_code, small_code] == [0, 0], fed.log("owner-0") + fed.log("owner-1")
    debited = assert_consistent(ledger_state(ledgers["owner-0"]))
    assert len(debited) <= seen + CHUNK  # it stopped working on the round: at most one more chunk
    assert assert_consistent(ledger_state(ledgers["owner-1"])) == {owner_id("owner-1", i) for i in range(BIG, N)}
    assert "outcome" in box, box.get("error")
    outcome = box["outcome"]
    assert outcome.lost_nodes == ["owner-0"]
    received = {oid for oid, eps in outcome.epsilon_by_owner.items() if eps > 0 and oid.startswith("owner-0.")}
    assert received <= debited  # a share left the node only after its debit (the rest: debited, never sent)
    # what the report says the rest may have spent (walkthrough 10, W10-3: it said nothing of the debits never sent)
    unanswered = outcome.epsilon_unanswered
    assert debited - received <= set(unanswered) and not set(unanswered) & received, (debited, received, unanswered)
    assert all(o.startswith("owner-0.") and e == EPSILON for o, e in unanswered.items()), unanswered


def test_owner_sigterm_while_waiting_for_tasks_exits_0_without_spending(tmp_path):
    cluster = Cluster(tmp_path, node_timeout=3.0, owners=("owner-0",))  # owner-1 never registers: no round
    try:
        cluster.wait_for_log("owner-0", "registered")
        cluster.procs["owner-0"].send_signal(signal.SIGTERM)
        code = cluster.wait("owner-0", STOP_WAIT)
    finally:
        cluster.close()
    assert code == 0, cluster.logs()
    assert assert_consistent(ledger_state(cluster.ledgers["owner-0"])) == set()


def test_compose_stop_mid_round_owners_then_coordinator_all_exit_0(tmp_path):
    """`docker compose stop` order: owners (dependents) first, then the coordinator. The owners say
    they leave, so the coordinator ends its round without them at once, not after its node timeout (far
    away): every process exits 0, whether the coordinator's SIGTERM comes while it finishes its job or after."""
    cluster = Cluster(tmp_path, node_timeout=600.0)
    try:
        seen = cluster.freeze_mid_round("owner-0")
        assert 0 < seen < BIG
        cluster.terminate_frozen("owner-0")
        cluster.procs["owner-1"].send_signal(signal.SIGTERM)
        owner_codes = [cluster.wait("owner-0", STOP_WAIT), cluster.wait("owner-1", STOP_WAIT)]
        cluster.procs["coordinator"].send_signal(signal.SIGTERM)
        coordinator_code = cluster.wait("coordinator", STOP_WAIT)
    finally:
        cluster.close()
    assert owner_codes == [0, 0], cluster.logs()
    debited = assert_consistent(ledger_state(cluster.ledgers["owner-0"]))
    assert len(debited) <= seen + CHUNK
    assert coordinator_code == 0, cluster.logs()


def test_coordinator_sigterm_while_waiting_for_owners_exits_0(tmp_path):
    cluster = Cluster(tmp_path, node_timeout=3.0, owners=())  # no owner registers
    try:
        cluster.wait_for_log("coordinator", "listening")
        cluster.procs["coordinator"].send_signal(signal.SIGTERM)
        code = cluster.wait("coordinator", STOP_WAIT)
    finally:
        cluster.close()
    assert code == 0, cluster.logs()
