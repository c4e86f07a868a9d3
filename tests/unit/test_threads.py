"""BLAS threads of node processes (issue 27, item 1; ``privfed.deploy.threads``): a pinned process
starts one BLAS thread, also when numpy was loaded first, and every launcher that starts several
nodes on one host gives each its share of the CPUs."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from privfed.deploy.owner_entry import with_threads
from privfed.deploy.simulate import owner_command
from privfed.deploy.simulation_config import SimulationConfig
from privfed.deploy.threads import THREAD_VARIABLES, thread_env, threads_per_node
from privfed.server.config import JobConfig

#: Prints OpenBLAS's thread count (threadpoolctl) and this process's threads, after ``SETUP``.
PROBE = textwrap.dedent("""
    import json, os, sys
    from privfed.deploy.threads import pin_threads
    {setup}
    import numpy  # noqa: F401
    tpc_before = "threadpoolctl" in sys.modules
    import threadpoolctl
    blas = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    print(json.dumps({{"blas": blas, "tasks": len(os.listdir("/proc/self/task")), "tpc_before": tpc_before}}))
""")


def _probe(setup: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}  # not the test session's pin
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(setup=setup)], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_pinned_before_numpy_loads_no_pool_is_started():
    got = _probe("pin_threads(1)")
    assert got["blas"] == [1]
    assert got["tasks"] == 1  # OpenBLAS started no worker thread
    assert not got["tpc_before"]  # the environment did it: threadpoolctl was not needed


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="OpenBLAS starts one thread per CPU: needs two")
def test_unpinned_openblas_takes_every_cpu():
    """The control of the test above: without a pin, OpenBLAS starts a worker per extra CPU."""
    got = _probe("")
    assert got["blas"] == [len(os.sched_getaffinity(0))] and got["tasks"] > 1


def test_pinned_after_numpy_loaded_resizes_the_pool():
    got = _probe("import numpy; pin_threads(1)")
    assert got["blas"] == [1] and got["tpc_before"]


def test_threads_per_node_splits_the_cpus_or_the_launchers_budget(monkeypatch):
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert [threads_per_node(n) for n in (1, 2, 3, 8, 20)] == [8, 4, 2, 1, 1]
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # e.g. privfed reproduce, several experiments at once
    assert [threads_per_node(n) for n in (1, 2, 5)] == [4, 2, 1]
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "not a number")
    assert threads_per_node(1) == 4
    assert thread_env(3) == dict.fromkeys(THREAD_VARIABLES, "3")


def test_launchers_give_each_node_its_share(monkeypatch, tmp_path):
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))
    sim = SimulationConfig(job=JobConfig(task="lr", owners=8, epsilon=1.0), processes=4)
    cmd = owner_command(sim, node=0, shards=range(0, 2), port=1, certs=None, ledger=tmp_path / "l", budget=1.0, seed=0)
    assert cmd[cmd.index("--threads") + 1] == "1"
    assert with_threads(["--n-owners", "8"], 2) == ["--n-owners", "8", "--threads", "2"]  # compose replicas
    assert with_threads(["--threads=3"], 2) == ["--threads=3"]  # the operator's choice stands
