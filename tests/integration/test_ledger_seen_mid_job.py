"""A node killed mid-job, its ledger then put back from before the job, is caught at its next start.

Walkthrough 9 (W9-5's neighbour, W7-5 again) gave each node a ``.seen`` file beside its ledger: what the node saw
there, so that an older copy put back is refused (``privfed.owner.ledger_seen``). It was written at the start, after
each job the node heard end, and at the stop, so the releases of a job the node never heard end (killed mid-job: the
very case in which an operator reaches for a backup) were not in it, and a copy from before that job passed: its
owners had the budget of releases that had left the node back. The file is now written after each batch of
releases the ledger commits, before any of them is computed or sent.

Real processes: the coordinator in this process (:class:`fedharness.Federation`), two owner nodes; the second is
frozen once registered, so the one-round job stays open after the first has answered.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

from fedharness import Federation

from privfed.common.ledger import Ledger
from privfed.owner.data import federation_split
from privfed.owner.ledger_seen import seen_path
from privfed.server.strategies import make_strategy

N, EPSILON = 40, 1.0
DATASET = ["--dataset", "synthetic", "--n-samples", "400", "--seed", "5", "--test-fraction", "0.2"]


def _wait(what: str, ready, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _counts(ledger) -> tuple[int, int]:
    """(releases the ledger holds, releases its .seen file says the node saw there)."""
    with contextlib.closing(sqlite3.connect(ledger, timeout=5)) as db:  # read while the node writes (WAL mode)
        held = db.execute("SELECT COUNT(*) FROM releases").fetchone()[0]
    try:
        saw = json.loads(seen_path(ledger).read_text())["releases"]
    except (FileNotFoundError, ValueError):  # not yet written, or read while it was replaced
        saw = -1
    return held, saw


def test_a_ledger_put_back_from_before_a_job_the_node_was_killed_in_is_refused(tmp_path):
    _, test = federation_split("synthetic", seed=5, test_fraction=0.2, n_samples=400)
    ledger, before = tmp_path / "owner-0.sqlite", tmp_path / "before-the-job.sqlite"
    Ledger(ledger, epsilon_budget=EPSILON).close()
    shutil.copy(ledger, before)  # the operator's last backup, from before the job
    fed = Federation(tmp_path, node_timeout=10.0, n_nodes=2)
    try:
        victim = fed.spawn("owner-0", n_owners=N, shards=f"0:{N // 2}", budget=EPSILON, ledger=ledger, dataset=DATASET)
        frozen = fed.spawn("owner-1", n_owners=N, shards=f"{N // 2}:{N}", budget=EPSILON, dataset=DATASET)
        _wait("both nodes to register", lambda: all("registered" in fed.log(n) for n in ("owner-0", "owner-1")))
        os.kill(frozen.pid, signal.SIGSTOP)  # the job cannot end: this node holds its answers
        strategy = make_strategy("lr", solver="local", epsilon=EPSILON, n_classes=test.n_classes, bounds=test.bounds)
        job, box = fed.run_in_thread(strategy, N, register_timeout=2)  # the accept round waits 2 s for it (W10-8)
        _wait("the victim's releases", lambda: _counts(ledger)[0] == N // 2)
        _wait("its .seen file to count them", lambda: _counts(ledger)[1] == N // 2, timeout=20)
        victim.kill()  # mid-job: it never hears the job end
        victim.wait()
    finally:
        for proc in fed.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
        fed.close()
    job.join(30)
    assert not job.is_alive(), box  # it ended without the frozen node, or stopped with the service
    for log in (ledger.with_name(ledger.name + "-wal"), ledger.with_name(ledger.name + "-shm")):
        log.unlink(missing_ok=True)  # the killed node's write-ahead log goes with the file it belongs to
    shutil.copy(before, ledger)  # put back
    argv = [sys.executable, "-m", "privfed.deploy.cli", "owner", "--coordinator", "127.0.0.1:1", "--insecure",
            "--connect-timeout", "1", "--name", "owner-0", "--n-owners", str(N), "--shards", f"0:{N // 2}",
            "--ledger", str(ledger), "--epsilon-budget", repr(EPSILON), *DATASET]  # fmt: skip
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2, again.stderr
    assert re.search(rf"ledger {re.escape(str(ledger))} holds 0 release\(s\), fewer than the {N // 2} ", again.stderr)
