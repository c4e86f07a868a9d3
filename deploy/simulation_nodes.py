"""The owner node processes of ``privfed simulate``: their command lines, a watch that stops the job
when one exits, and the ε their ledgers recorded after the run."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from privfed.common.errors import ConfigError, PrivfedError
from privfed.common.files import sole_writer
from privfed.common.identity import owner_id
from privfed.common.ledger import Ledger
from privfed.deploy.commands import owner_argv
from privfed.deploy.simulation_config import SimulationConfig
from privfed.deploy.threads import threads_per_node
from privfed.server.app import CoordinatorServer

#: How often the launcher checks that its owner node processes are still running (seconds).
WATCH_INTERVAL = 0.1
#: Seconds a node has, once told the job is over, to close its ledger (or exit) before it is terminated.
EXIT_TIMEOUT = 15.0


class NodeExited(PrivfedError):
    """An owner node process exited while the job still needed it."""


def node_ranges(n_owners: int, processes: int, sizes: Sequence[int] = ()) -> list[range]:
    """Each node process's logical owners: ``n_owners`` split evenly over ``processes``, or, with ``sizes`` (the
    rows of the owners' own files, one node each), in proportion to each file's rows (:func:`owners_per_file`)."""
    counts = owners_per_file(n_owners, sizes) if sizes else np.diff(np.linspace(0, n_owners, processes + 1).astype(int))
    edges = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    return [range(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def owners_per_file(n_owners: int, sizes: Sequence[int]) -> np.ndarray:
    """How many of ``n_owners`` each file's node hosts: at least one and at most its rows, so that the largest
    owner (a file's rows over its owners, rounded up: the federation's public rows per owner) is as small as it
    can be, and the owners that leaves over in proportion to the rows still free. ``--owners`` equal to the files'
    rows gives every owner one row, whatever the files' sizes (walkthrough 13, W13-5: an even split could not
    express a federation of uneven sites with one row per owner)."""
    rows = np.asarray(sizes, dtype=np.int64)
    if n_owners > rows.sum():
        raise ConfigError(
            f"--owners {n_owners}: the --data files hold {int(rows.sum())} rows "
            f"({', '.join(str(int(r)) for r in rows)}), and every owner needs a row; give --owners at most "
            f"{int(rows.sum())} (that many is one row per owner)"
        )
    if n_owners < len(rows):
        raise ConfigError(f"--owners {n_owners} is fewer than the {len(rows)} --data files: each hosts an owner")
    lo, hi = 1, int(rows.max())  # the smallest largest owner: the owners it needs fit in n_owners
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if int(np.ceil(rows / mid).sum()) <= n_owners else (mid + 1, hi)
    counts = np.ceil(rows / lo).astype(np.int64)
    free = rows - counts
    if free.sum():
        counts += (n_owners - int(counts.sum())) * free // int(free.sum())
    for _ in range(n_owners - int(counts.sum())):  # fewer than one per file
        counts[int(np.argmax(np.where(counts < rows, rows / counts, -np.inf)))] += 1
    return counts


def owner_command(
    config: SimulationConfig,
    *,
    node: int,
    shards: range,
    port: int,
    certs: Path | None,
    ledger: Path,
    budget: float,
    seed: int,
) -> list[str]:
    cmd = [
        *owner_argv(f"127.0.0.1:{port}", f"owner-{node}"),
        *(
            ["--data", str(config.data[node]), "--shards", str(len(shards))]  # checked against the coordinator's schema
            if config.data
            else [
                "--dataset",
                config.job.dataset,
                "--n-owners",
                str(config.owners),
                "--shards",
                f"{shards.start}:{shards.stop}",
            ]
        ),
        "--seed",
        str(seed),
        "--test-fraction",
        str(config.job.test_fraction),
        "--ledger",
        str(ledger),
        "--epsilon-budget",
        repr(budget),
        "--rng",
        config.rng,
        "--connect-timeout",
        "60",
        "--delta-budget",
        repr(config.job.delta),
        "--threads",  # the nodes share this host: BLAS threads each, so that they do not fight over the CPUs
        str(threads_per_node(config.n_processes)),
    ]
    if config.job.n_samples and not config.data:
        cmd += ["--n-samples", str(config.job.n_samples)]
    if config.job.clear_labels:
        cmd += ["--allow-clear-labels"]
    if config.work_rows is not None:
        cmd += ["--work-rows", str(config.work_rows)]
    cmd += ["--insecure"] if certs is None else ["--certs", str(certs)]
    return cmd


def last_line(path: Path) -> str:
    """The last non-empty line of a log file (a node's one-line error, or a traceback's last line)."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


class NodeWatch:
    """Stops a job within :data:`WATCH_INTERVAL` of an owner node process exiting.

    The job needs every node it started: a node that exits (a bad configuration, more owners
    than rows, a crash) aborts the dispatcher, so the job raises ``JobAborted`` at once instead of
    waiting out the registration or round timeout; :meth:`error` then names the node and its
    last log line. Call :meth:`stop` before telling the nodes the job is over.
    """

    def __init__(self, procs: list[subprocess.Popen], logs: list[Path], server: CoordinatorServer):
        self._procs, self._logs, self._server = procs, logs, server
        self._done = threading.Event()
        self.exited: tuple[int, int] | None = None  # (node index, exit code)
        self._thread = threading.Thread(target=self._watch, name="node-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(WATCH_INTERVAL):
            for i, p in enumerate(self._procs):
                if p.poll() is not None:
                    self.exited = (i, p.returncode)
                    self._server.dispatcher.abort()
                    return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def error(self) -> NodeExited:
        if self.exited is None:
            return NodeExited("no owner node has exited")
        i, code = self.exited
        return NodeExited(f"owner node {i} exited with code {code} during the job: {last_line(self._logs[i])}")

    def reason(self) -> str | None:
        """What stopped the job, for its report (None while every node runs)."""
        return None if self.exited is None else str(self.error())


def ledgers_closed(procs: list[subprocess.Popen], ledgers: list[Path], timeout: float = EXIT_TIMEOUT) -> None:
    """Return once every node has let go of its ledger's writer lock (:func:`~privfed.common.files.sole_writer`:
    it closed the ledger and writes nothing more) or exited; a node that did neither within ``timeout`` s
    is terminated (the kernel drops its lock). Its ledger can then be read while the process still tears
    down its heap (issue 27: at 10^5 owners, seconds of both nodes' exit the launcher waited out before it
    read a ledger)."""
    deadline = time.monotonic() + timeout
    for proc, path in zip(procs, ledgers):
        while proc.poll() is None:
            try:
                with sole_writer(path):
                    break
            except ConfigError:  # still held
                if time.monotonic() >= deadline:
                    proc.terminate()
                    proc.wait()
                    break
                time.sleep(WATCH_INTERVAL / 2)


def spent_by_owner(
    ledgers: list[Path], ranges: list[range], budget: float, delta: float
) -> tuple[dict[str, float], int]:
    """ε spent per owner and the number of non-private entries, read from each node's own ledger after the run."""
    spent, nonprivate = {}, 0
    for node, (path, shards) in enumerate(zip(ledgers, ranges)):
        with Ledger(path, epsilon_budget=budget, delta_budget=delta) as ledger:
            ids = [owner_id(f"owner-{node}", i) for i in shards]
            spent.update({o: ledger.spent(o).epsilon for o in ids})
            nonprivate += sum(ledger.nonprivate_count(o) for o in ids)
    return spent, nonprivate
