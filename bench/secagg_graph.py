"""The pairwise-mask secure sum's neighbour graph: what computing it costs the coordinator and every node.

:func:`privfed.common.secagg.masking.neighbour_graph` is computed once per (run, group) by the coordinator
and by each owner node hosting a member; at 10^4 members the implementation before the vectorisation
(kept below as the baseline, :func:`graph_before`: one ``np.any`` along a short axis per cycle try, up to
64 tries per cycle, and one ``np.unique`` per member) took 0.37-0.48 s. The candidate is the module's
function, called with a new run id each time (so never from its cache). Both must give the same graph (``tests/unit/test_secagg_graph_pins.py`` pins it); the
bench checks that too before timing.

Lines (STYLE rule 14): ``name  baseline  candidate  ratio`` (candidate / baseline) and ``old/new`` (the
speed-up), seconds, the median of ``--repeats`` calls of each (at least 5) on the same groups (run ids
``bench-0``, ``bench-1``, ...), alternated in the same run, with ``uptime`` before and after.

    python bench/secagg_graph.py [--sizes 1000,10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from privfed.common.secagg.masking import degree, neighbour_graph
from privfed.server.report import host_info

Graph = dict[str, tuple[str, ...]]


def graph_before(run_id: str, members: tuple[str, ...]) -> Graph:
    """The graph as commit 90c2d12 computed it, for members too many for the complete graph (the baseline)."""
    n, k = len(members), degree(len(members))
    seed = int.from_bytes(hashlib.sha256(b"privfed-secagg-graph\0" + run_id.encode("utf-8")).digest(), "big")
    rng = np.random.default_rng(seed)
    near = np.full((n, k), -1, dtype=np.int64)
    for c in range(k // 2):
        best, fewest = np.arange(n), n + 1
        for _ in range(64):
            cycle = rng.permutation(n)
            shared = int(np.count_nonzero((near[cycle, : 2 * c] == np.roll(cycle, -1)[:, None]).any(axis=1)))
            if shared < fewest:
                best, fewest = cycle, shared
            if not shared:
                break
        near[best, 2 * c], near[best, 2 * c + 1] = np.roll(best, -1), np.roll(best, 1)
    return {members[i]: tuple(members[j] for j in np.unique(near[i]).tolist()) for i in range(n)}


def seconds(graph: Callable[[str, tuple[str, ...]], Graph], run_id: str, members: tuple[str, ...]) -> float:
    start = time.perf_counter()
    graph(run_id, members)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="members per group, comma-separated")
    parser.add_argument("--repeats", type=int, default=5, help="calls of each, alternated (default 5)")
    args = parser.parse_args()
    if args.repeats < 5:
        parser.error("--repeats: at least 5 (STYLE rule 14)")
    print(f"# neighbour graph of one secure-sum group, {host_info()}")
    print(f"# uptime: {os.popen('uptime').read().strip()}")
    print(f"{'name':24} {'baseline':>10} {'candidate':>10} {'ratio':>7} {'old/new':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        members = tuple(sorted(f"owner-{i // 1000}.o{i:06d}" for i in range(n)))
        assert degree(n) < n - 1, "the complete graph (few members) has no cycles to time"
        assert neighbour_graph("bench", members) == graph_before("bench", members)
        old, new = [], []
        for r in range(args.repeats):
            run_id = f"bench-{r}"
            old.append(seconds(graph_before, run_id, members))
            new.append(seconds(neighbour_graph, run_id, members))  # a new run id: not cached
        base, cand = statistics.median(old), statistics.median(new)
        print(f"{f'graph of {n} members s':24} {base:10.4f} {cand:10.4f} {cand / base:7.3f} {base / cand:8.2f}")
    print(f"# uptime: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
