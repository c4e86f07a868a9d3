"""Real owner node processes hold the BLAS/OpenMP threads they were given (issue 27, item 1).

Two ``privfed owner`` processes run one real logistic-regression job over gRPC (the local fits load
scipy, whose OpenBLAS is a second pool next to numpy's). Each is started through ``PROBE``: the CLI's
own ``main`` with an ``atexit`` hook that prints, as the process ends, every thread pool that
threadpoolctl finds loaded in it. The launcher's environment asks for two threads; one node is
given ``--threads 1`` and must hold one in every pool, the other keeps the launcher's two.
"""

import json
import math

import pytest
from fedharness import Federation

from privfed.common.datasets import SPLIT_CACHE_ENV
from privfed.deploy.threads import THREAD_VARIABLES
from privfed.owner.data import federation_split
from privfed.server.strategies import make_strategy

pytestmark = pytest.mark.slow

#: ``privfed owner ARGS`` with every loaded thread pool printed (JSON) when the process exits.
PROBE = """
import atexit, json, sys
import threadpoolctl  # loads no numpy

atexit.register(lambda: print("POOLS " + json.dumps(threadpoolctl.threadpool_info()), flush=True))
from privfed.deploy.cli import main

sys.exit(main(sys.argv[1:]))
"""


def _pools(log: str) -> list[dict]:
    line = next(t for t in log.splitlines() if t.startswith("POOLS "))
    return json.loads(line.removeprefix("POOLS "))


def test_owner_processes_hold_the_threads_they_were_given(tmp_path):
    _, test = federation_split("synthetic", seed=3, test_fraction=0.25, n_samples=600)
    launcher = dict.fromkeys(THREAD_VARIABLES, "2")  # e.g. a node alone on a two-CPU host
    launcher[SPLIT_CACHE_ENV] = ""  # the split computed, not read from the session's cache (conftest): scipy loaded
    fed = Federation(tmp_path, secure=False)
    try:
        for name, shards, extra in (("owner-0", "0:1", ["--threads", "1"]), ("owner-1", "1:2", [])):
            fed.spawn(
                name, n_owners=2, shards=shards, budget=math.inf, extra=extra, module_cmd=["-c", PROBE], env=launcher
            )
        strategy = make_strategy(
            "lr", solver="local", mechanism="pm", epsilon=math.inf, n_classes=2, bounds=test.bounds
        )
        outcome = fed.run(strategy, 2)
    finally:
        fed.close()
    assert outcome.answered == 2
    pinned, default = _pools(fed.log("owner-0")), _pools(fed.log("owner-1"))
    for pools in (pinned, default):
        blas = {p["filepath"] for p in pools if p["user_api"] == "blas"}
        assert len(blas) >= 2, pools  # numpy's OpenBLAS and scipy's (the local fit): both pools are checked
    assert {p["num_threads"] for p in pinned} == {1}, pinned
    assert {p["num_threads"] for p in default} == {2}, default
