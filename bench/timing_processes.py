"""Timing side channels of an owner node, measured over real processes (the worst cases of
``bench/timing_channels.py``).

A hostile coordinator (``tests/adversary/hostile.py``: the real wire, mTLS, honest ``privfed owner``
processes) sends one task at a time (``--task``: an LR share, or FedDPDR's ``ovr-huber`` SVM share) and
times it from queueing to the pushed result: what a coordinator sees. Three nodes of one owner each,
``N`` rows:

* ``A``: a two-class mixture, whose rows an earlier node name (same file, same ledger) spent a little of;
* ``A-rows-spent``: the same file, whose rows an earlier node name spent nearly all of (the ledger's
  ``RowsUnused``: the owner answers its fallback). Whether a row was spent is stop 35's membership bit;
* the in-process run's strongest data contrast for the task: every value at a bound (``lr_share``), one
  class only (``svm_share``).

Printed as ``bench/timing_channels.py`` prints (medians, difference over the MAD, KS, and the
accuracy of a one-timing threshold rule fitted on even repeats and scored on odd ones).

    python bench/timing_processes.py [--task lr_share|svm_share] [--model M] [--repeats 200] [--owner-pythonpath DIR]

``--owner-pythonpath DIR`` runs the owner nodes from another checkout laid out as ``DIR/privfed`` or as
this repository (e.g. the code before a change: ``git archive <commit> | tar -x -C DIR``); the
coordinator stays this one. About a minute; not run in CI.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # bench.*
sys.path.append(str(ROOT / "tests" / "adversary"))  # the hostile coordinator
from hostile import (  # type: ignore[import-not-found]  # noqa: E402 - tests/adversary, not a package
    HostileCoordinator,
    bounds_matrix,
    kind,
    lr_task,
    make_federation_certs,
    owner_command,
    svm_task,
    write_rows,
)

from bench.checkout import package_root  # noqa: E402
from bench.timing_stats import HEADER, pair_line, uptime  # noqa: E402
from privfed.common.feddpdr.choices import SVM_MODELS  # noqa: E402
from privfed.proto import privfed_pb2 as pb  # noqa: E402

N, D, BOUND = 300, 10, 4.0
BUDGET = 1000.0
SPEND = 25.0  # within PM's public ε ceiling


def lr_share_task(task_id: str, owner_id: str, epsilon: float) -> pb.Task:
    return lr_task(task_id, owner_id, d=D, epsilon=epsilon, param_bound=4.0, bounds=bounds_matrix(D, -BOUND, BOUND))


def svm_share_task(task_id: str, owner_id: str, epsilon: float, model: str = "ovr-huber") -> pb.Task:
    """FedDPDR's phase 2 (``--model``, default the seed's one-vs-rest Huber SVM) on a public 3-dimensional subspace;
    delta 1e-6 for the models that spend one (a node's delta budget, 1e-3, covers every repeat)."""
    bounds = bounds_matrix(D, -BOUND, BOUND)
    return svm_task(task_id, owner_id, d=D, epsilon=epsilon, lam=1e-3, bounds=bounds, k=3, model=model, delta=1e-6)


#: The task a run times, and the rows its data contrast holds (``bench/timing_channels.py``'s strongest).
TASKS = {"lr_share": (lr_share_task, "at-bounds"), "svm_share": (svm_share_task, "one-class")}


class Nodes:
    """Owner node processes against one hostile coordinator, each on its own file and ledger."""

    def __init__(self, tmp: Path, owner_pythonpath: str | None) -> None:
        self.tmp = tmp
        self.certs = make_federation_certs(tmp / "certs", owners=6)  # node names owner-0 .. owner-5
        self.hc = HostileCoordinator(self.certs)
        self.env = dict(os.environ)
        if owner_pythonpath:
            self.env["PYTHONPATH"] = str(package_root(Path(owner_pythonpath), tmp / "owner-checkout"))
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, data: Path, ledger: Path) -> str:
        cmd = owner_command(
            self.hc.port, name, data=data, n_owners=1, ledger=ledger, certs=self.certs, budget=BUDGET,
            lo=-BOUND, hi=BOUND,
        )  # fmt: skip
        log = open(self.tmp / f"{name}.log", "a")  # noqa: SIM115 - the process writes it until stopped
        self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.tmp))
        owner = f"{name}.o00000"
        self.hc.wait_registered([owner])
        return owner

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        proc.terminate()
        proc.wait(timeout=30)

    def answer(self, task: pb.Task) -> tuple[float, pb.Result]:
        t0 = time.perf_counter()
        result = self.hc.run([task])[task.task_id]
        return time.perf_counter() - t0, result

    def close(self) -> None:
        self.hc.shutdown = True
        for proc in self.procs:
            if proc.poll() is None:
                self.stop(proc)
        self.hc.stop()


def rows(kind: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, N)
    if kind == "at-bounds":
        return rng.choice([-BOUND, BOUND], size=(N, D)), y
    if kind == "one-class":
        y = np.zeros(N, dtype=np.int64)
    X = rng.normal(size=(N, D)) + np.where(np.arange(D) % 2 == y[:, None], 0.8, -0.8)
    return np.clip(X, -BOUND, BOUND), y


def spent_ledger(nodes: Nodes, node: int, data: Path, epsilon: float) -> Path:
    """A ledger in which an earlier node name (``owner-<node>``) held the rows of ``data`` and spent
    ``epsilon`` of them (in releases of at most the mechanism's ε ceiling each)."""
    ledger = nodes.tmp / f"{node}.sqlite"
    owner = nodes.start(f"owner-{node}", data, ledger)
    for i, part in enumerate([SPEND] * int(epsilon // SPEND) + [epsilon % SPEND]):
        _, result = nodes.answer(lr_share_task(f"spend-{node}-{i}", owner, part))
        if kind(result) != "lr_share":
            raise SystemExit(f"spending owner-{node}'s rows was refused: {result}")
    nodes.stop(nodes.procs.pop())
    return ledger


def rows_spent(ledger: Path) -> float:
    """The most any row account of ``ledger`` spent (read only, as ``privfed ledger`` would)."""
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as conn:
        return float(conn.execute("SELECT max(epsilon) FROM accounts").fetchone()[0])


def run(task: str, repeats: int, seed: int, owner_pythonpath: str | None, model: str = "ovr-huber") -> None:
    make, contrast = TASKS[task]
    label = f"{task} (processes)"
    if task == "svm_share":
        make, label = functools.partial(svm_share_task, model=model), f"svm/{model} (processes)"
    print(uptime())
    print(f"# {repeats} repeats per arm, n={N} rows, d={D}; wall time from queueing a {task} task to its result")
    tmp = Path(tempfile.mkdtemp(prefix="timing-processes-"))
    nodes = Nodes(tmp, owner_pythonpath)
    try:
        rng = np.random.default_rng(seed)
        a = write_rows(tmp / "a.csv", *rows("mixture", rng))
        b = write_rows(tmp / "b.csv", *rows(contrast, rng))
        arms = {
            "A": nodes.start("owner-3", a, spent_ledger(nodes, 0, a, 0.5)),
            "A-rows-spent": nodes.start("owner-4", a, spent_ledger(nodes, 1, a, BUDGET - 0.5)),
            contrast: nodes.start("owner-5", b, spent_ledger(nodes, 2, b, 0.5)),
        }
        times: dict[str, list[float]] = {name: [] for name in arms}
        order, shuffle = list(arms), np.random.default_rng(seed)
        for r in range(repeats + 10):  # the first 10: warm-up (imports, caches), not counted
            shuffle.shuffle(order)
            for name in order:
                dt, result = nodes.answer(make(f"t{r}-{name}", arms[name], 1.0))
                if kind(result) != task:
                    raise SystemExit(f"{name}: {result}")
                if r >= 10:
                    times[name].append(dt)
        spent = {name: rows_spent(tmp / f"{i}.sqlite") for i, name in enumerate(arms)}
        print(f"# the rows' spent epsilon after the run (most-spent row): {spent}")
        print(HEADER)
        for name in ("A-rows-spent", contrast):
            print(pair_line(label, "A vs " + name, times["A"], times[name]))
    finally:
        nodes.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(uptime())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200, help="timings per arm (default 200)")
    parser.add_argument("--task", choices=sorted(TASKS), default="lr_share", help="the task timed (default lr_share)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--owner-pythonpath", default=None, help="run owner nodes from DIR (another checkout)")
    parser.add_argument("--model", choices=SVM_MODELS, default="ovr-huber", help="svm_share's classifier")
    args = parser.parse_args()
    if args.repeats < 4:
        parser.error("--repeats must be at least 4")
    run(args.task, args.repeats, args.seed, args.owner_pythonpath, args.model)


if __name__ == "__main__":
    main()
