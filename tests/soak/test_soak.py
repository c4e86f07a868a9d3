"""Issue 14, item 4: soak and load over real processes.

* Consecutive jobs: one coordinator server (this process) and one fleet of owner node processes
  run ``PRIVFED_SOAK_JOBS`` small NCC jobs back to back (100; ``make soak``: 1000). After a
  warm-up of :data:`WARMUP` jobs, the threads, open file descriptors and RSS of the coordinator
  and of every node may not grow by more than the bounds below over the remaining jobs: a
  leak of one thread, one socket or a few hundred KB per job shows.
* Registration load: ``PRIVFED_SOAK_NODES`` node processes of ``PRIVFED_SOAK_OWNERS`` logical
  owners each (CI: 10 × 100; ``make soak``: 100 × 100) started at once all register, and a
  job over all of them completes.
"""

from __future__ import annotations

import math
import os
import threading
import time

import numpy as np
import pytest
from fedharness import Federation

from privfed.common.datasets import federation_split
from privfed.server.strategies import make_strategy

pytestmark = pytest.mark.slow

JOBS = int(os.environ.get("PRIVFED_SOAK_JOBS", "100"))
NODES = int(os.environ.get("PRIVFED_SOAK_NODES", "10"))
OWNERS_PER_NODE = int(os.environ.get("PRIVFED_SOAK_OWNERS", "100"))
WARMUP = 3
#: Growth allowed from the end of the warm-up to the last job, per process.
MAX_THREAD_GROWTH = 2
MAX_FD_GROWTH = 4
MAX_RSS_GROWTH_MB = 25.0
FLEET_NODES, FLEET_OWNERS = 2, 20  # per node


def _usage(pid: int | str = "self") -> dict[str, float]:
    """Threads, open file descriptors and RSS (MB) of a process, from /proc."""
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            status[key] = value.split()
    return {
        "threads": int(status["Threads"][0]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "rss_mb": int(status["VmRSS"][0]) / 1024.0,
    }


def test_consecutive_jobs_do_not_leak(tmp_path):
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    n = FLEET_NODES * FLEET_OWNERS
    fed = Federation(tmp_path)
    try:
        nodes = [
            fed.spawn(
                f"owner-{i}",
                n_owners=n,
                shards=f"{i * FLEET_OWNERS}:{(i + 1) * FLEET_OWNERS}",
                budget=1000.0,
            )
            for i in range(FLEET_NODES)
        ]
        assert fed.server.dispatcher.wait_for_owners(n, 60) == n
        samples, t0 = [], time.perf_counter()
        for job in range(JOBS):
            strategy = make_strategy("ncc", mechanism="pm", epsilon=0.5, n_classes=2, bounds=test.bounds)
            outcome = fed.run(strategy, n)
            assert outcome.answered == n and not outcome.refused, (job, outcome.refused)
            samples.append({"coordinator": _usage(), **{f"node{i}": _usage(p.pid) for i, p in enumerate(nodes)}})
        wall = time.perf_counter() - t0
        base, last = samples[WARMUP - 1], samples[-1]
        print(f"\n{JOBS} jobs in {wall:.1f} s; usage after warm-up -> after the last job:")
        for proc in base:
            print(f"  {proc:12s} " + "  ".join(f"{k} {base[proc][k]:.0f} -> {last[proc][k]:.0f}" for k in base[proc]))
        for proc in base:
            grew = {k: last[proc][k] - base[proc][k] for k in base[proc]}
            assert grew["threads"] <= MAX_THREAD_GROWTH, (proc, grew, samples)
            assert grew["fds"] <= MAX_FD_GROWTH, (proc, grew)
            assert grew["rss_mb"] <= MAX_RSS_GROWTH_MB, (proc, grew)
        assert all(p.poll() is None for p in nodes), "a node died during the soak"
        assert threading.active_count() < 100
    finally:
        fed.close()


def test_many_nodes_register_at_once(tmp_path):
    n = NODES * OWNERS_PER_NODE
    dataset = ["--dataset", "synthetic", "--n-samples", str(2 * n), "--seed", "3", "--test-fraction", "0.25"]
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=2 * n)
    fed = Federation(tmp_path, n_nodes=NODES)
    try:
        t0 = time.perf_counter()
        for i in range(NODES):
            fed.spawn(
                f"owner-{i}",
                n_owners=n,
                shards=f"{i * OWNERS_PER_NODE}:{(i + 1) * OWNERS_PER_NODE}",
                budget=math.inf,
                dataset=dataset,
            )
        registered = fed.server.dispatcher.wait_for_owners(n, 300)
        t_register = time.perf_counter() - t0
        assert registered == n, f"only {registered} of {n} owners registered"
        outcome = fed.run(make_strategy("ncc", mechanism="pm", epsilon=math.inf, n_classes=2, bounds=test.bounds), n)
        print(f"\n{NODES} nodes x {OWNERS_PER_NODE} owners registered in {t_register:.1f} s; job {outcome.timings}")
        assert outcome.answered == n
        assert float(np.mean(outcome.model.predict(test.X) == test.y)) > 0.6
    finally:
        fed.close()
