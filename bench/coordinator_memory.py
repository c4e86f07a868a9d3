"""Bytes per owner the coordinator holds during a one-round job (issue 27: bounded by its bookkeeping,
not by the replies), measured with tracemalloc.

The coordinator's own job runner (:func:`privfed.server.job.run_job`, its dispatcher, job book and
strategy) runs an LR or NCC round for N owners; one stand-in node (a thread calling the dispatcher
as the servicer does: register, pull, push 200 results a call) answers every task with a reply
of the right shape. No gRPC and no owner processes, so everything traced is the coordinator's.
Per N it prints the peak of traced memory during the job and that over N, and the ratio of
each per-owner figure to the smallest N's::

    python bench/coordinator_memory.py [--owners 10000,100000] [--tasks lr,ncc] [--pythonpath DIR]

``--pythonpath DIR`` measures another checkout laid out as ``DIR/privfed`` (before/after).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the repository root: bench.*
from bench.checkout import checkout_env  # noqa: E402

CHILD = r"""
import threading, tracemalloc, sys
import numpy as np
from privfed.common.bounds import Bounds
from privfed.common.identity import owner_id
from privfed.common.mechanisms import make_mechanism
from privfed.common.tasks import LrShareReply, NccShareReply, OwnerInfo, Result
from privfed.server.app import CoordinatorServer
from privfed.server.job import run_job
from privfed.server.strategies import make_strategy

task, n = sys.argv[1], int(sys.argv[2])
d, k = 10, 2
bounds = Bounds(np.zeros(d), np.ones(d))
server = CoordinatorServer(tls=None)  # never started: the dispatcher is called directly
from privfed.server import parameters
one_round = {"solver": "local"} if task == "lr" and "solver" in getattr(parameters, "LR", {}) else {}  # not gd
strategy = make_strategy(task, n_classes=k, bounds=bounds, epsilon=1.0, mechanism="pm", **one_round)
rng = np.random.default_rng(0)


def replies(specs):
    # valid replies (the task's mechanism on a zero row): the job checks every reply's contract
    spec = specs[0]
    width = d + 1 if task == "lr" else d
    values = make_mechanism(spec.mechanism, epsilon=spec.epsilon, d=width).privatize(np.zeros((len(specs), width)), rng)
    if task == "lr":
        return [LrShareReply(v[None, :]) for v in values]
    return [NccShareReply(v[None, :], np.array([int(rng.integers(k))])) for v in values]


def node():
    dispatcher = server.dispatcher
    while True:
        tasks, over = dispatcher.pull("owner-0", 0.5)
        if over:
            return
        for start in range(0, len(tasks), 200):
            batch = tasks[start : start + 200]
            answers = replies([t.spec for t in batch])
            dispatcher.push("owner-0", [Result(t.task_id, t.owner_id, a) for t, a in zip(batch, answers)])


key, signature = b"k" * 32, b"s" * 72  # an X25519 key and an ECDSA signature's sizes
tracemalloc.start()
server.dispatcher.register("owner-0", [OwnerInfo(owner_id("owner-0", i), key, signature) for i in range(n)])
registered = tracemalloc.get_traced_memory()[0]
thread = threading.Thread(target=node, daemon=True)
thread.start()
outcome = run_job(server, strategy, expected_owners=n, show_progress=False)
current, peak = tracemalloc.get_traced_memory()
server.dispatcher.shutdown()
thread.join()
print(task, n, registered, peak, outcome.answered)
"""


def measure(task: str, n: int, pythonpath: str | None) -> tuple[int, int]:
    with tempfile.TemporaryDirectory(prefix="privfed-memory-") as into:
        env = checkout_env(pythonpath, Path(into))
        done = subprocess.run(
            [sys.executable, "-c", CHILD, task, str(n)], capture_output=True, text=True, env=env, cwd=into, check=False
        )
    if done.returncode != 0:
        raise SystemExit(f"{task} N={n} failed:\n{done.stderr[-3000:]}")
    _, _, registered, peak, answered = done.stdout.split()
    if int(answered) != n:
        raise SystemExit(f"{task} N={n}: {answered} owners answered")
    return int(registered), int(peak)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--owners", default="10000,100000")
    p.add_argument("--tasks", default="lr,ncc")
    p.add_argument("--pythonpath", default=None)
    args = p.parse_args()
    print("task        N  registered_MB  peak_MB  registered B/owner  peak B/owner")
    for task in args.tasks.split(","):
        rows = []
        for n in (int(x) for x in args.owners.split(",")):
            registered, peak = measure(task, n, args.pythonpath)
            rows.append((n, registered, peak))
            print(
                f"{task:4} {n:>8}  {registered / 2**20:13.1f}  {peak / 2**20:7.1f}  {registered / n:18.0f}  {peak / n:12.0f}"
            )
        (n0, _, p0) = rows[0]
        for n, _, peak in rows[1:]:
            print(
                f"{task} N={n} vs N={n0} peak B/owner  {p0 / n0:10.0f}  {peak / n:10.0f}  {peak / n / (p0 / n0):6.2f}"
            )


if __name__ == "__main__":
    main()
