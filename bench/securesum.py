"""Ring secure sum (SPEC §11.2) in-process: time for N parties and the per-owner slope (STYLE rule 14).

Runs :func:`privfed.common.securesum.run_ring_in_process` -- the same :class:`RingParty` state
machines as the networked driver, every hop sealed with AES-GCM and passed through
``to_bytes``/``from_bytes`` -- with every party in this process: the pure core, no sockets.
The gRPC variant (hops relayed by the coordinator over loopback with mTLS) is
``bench/securesum_grpc.py``, owned by the networked-path work.

Each party holds ``m`` values (default 2: a boosting round's ``(err_sum, w_sum)``). Lines read
``name  baseline  candidate  ratio``, medians of ``--repeats`` (>= 5) runs on the same input:

* ``ring N=...``: baseline = numpy sum of the same fixed-point encodings (what the ring computes,
  without masks, encryption or hops); candidate = the ring with the parties' boxes built beforehand
  (a federation keeps its X25519 keys and boxes across aggregations; the ring draws a fresh mask
  and session id every time).
* ``ring+keys N=...``: baseline = the ring as above; candidate = the ring including fresh X25519
  keys and boxes for every party (``run_ring_in_process`` with ``boxes=None``).
* ``slope``: least-squares slope over N of the baseline and candidate times, per owner.

Run: ``python bench/securesum.py`` (N = 10, 100, 1000) or ``--quick``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import numpy as np

from privfed.common.e2e import generate_private_key, local_boxes
from privfed.common.fixedpoint import FixedPoint
from privfed.common.securesum import ring_peers, run_ring_in_process
from privfed.server.report import host_info


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_ring(n: int, m: int, repeats: int, seed: int) -> dict:
    """Times (seconds) of the plain encoded sum, the ring with cached boxes, and the ring with fresh keys."""
    values = np.random.Generator(np.random.PCG64([seed, n])).uniform(0.0, 1.0, size=(n, m))
    fp = FixedPoint.choose(n, 1.0)
    ids = [f"o{i}" for i in range(n)]
    by_party = dict(zip(ids, values))
    boxes = local_boxes({p: generate_private_key() for p in ids}, partial(ring_peers, ids))
    total = run_ring_in_process(by_party, fp, boxes)  # warm-up and check
    exact = fp.decode(np.sum(fp.encode(values), axis=0, dtype=np.uint64))
    if not np.array_equal(total, exact):
        raise AssertionError(f"ring total {total} differs from the encoded sum {exact}")
    return {
        "n": n,
        "plain": _median_time(lambda: fp.decode(np.sum(fp.encode(values), axis=0, dtype=np.uint64)), repeats),
        "ring": _median_time(lambda: run_ring_in_process(by_party, fp, boxes), repeats),
        "ring_keys": _median_time(lambda: run_ring_in_process(by_party, fp), repeats),
    }


def _slope(ns, ts) -> float:
    return float(np.polyfit(np.asarray(ns, dtype=np.float64), np.asarray(ts), 1)[0])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 10, 30, 100 for a CI smoke run")
    parser.add_argument("--n", type=int, nargs="+", default=None, help="party counts (default 10 100 1000)")
    parser.add_argument("--values", type=int, default=2, help="values per party (default 2)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args(argv)
    ns = args.n or ([10, 30, 100] if args.quick else [10, 100, 1000])
    repeats = max(5, args.repeats)
    print(f"# bench/securesum.py in-process ring, seed={args.seed} values={args.values} repeats={repeats} "
          f"host={host_info()}")
    print("# the gRPC ring over loopback (mTLS, coordinator relay) is bench/securesum_grpc.py, owned by the lead")
    print(f"{'name':<18} {'baseline':>12} {'candidate':>12} {'ratio':>9}")
    rows = [bench_ring(n, args.values, repeats, args.seed) for n in ns]
    for r in rows:
        print(f"{'ring N=' + str(r['n']):<18} {r['plain'] * 1e3:>10.3f}ms {r['ring'] * 1e3:>10.3f}ms "
              f"{r['ring'] / r['plain']:>8.0f}x", flush=True)
    for r in rows:
        print(f"{'ring+keys N=' + str(r['n']):<18} {r['ring'] * 1e3:>10.3f}ms {r['ring_keys'] * 1e3:>10.3f}ms "
              f"{r['ring_keys'] / r['ring']:>8.2f}x")
    base, ring, keys = (_slope(ns, [r[k] for r in rows]) for k in ("plain", "ring", "ring_keys"))
    print(f"{'slope (/owner)':<18} {base * 1e6:>10.3f}us {ring * 1e6:>10.3f}us {ring / base:>8.0f}x")
    print(f"{'slope+keys (/owner)':<18} {ring * 1e6:>10.3f}us {keys * 1e6:>10.3f}us {keys / ring:>8.2f}x")


if __name__ == "__main__":
    main()
