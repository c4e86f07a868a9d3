"""CPU of the owners' local logistic fit (the LR share's computation), against another checkout's, same run.

The fit runs a public, fixed number of Newton steps (``privfed.common.learners.newton``, "Timing"), so its
cost is the cost of a step times that count. This times :func:`fit_local_logistic_many` (the batched fit a
node runs for the owners it hosts) on a two-class mixture in ``d = 10`` features, for the shapes that matter:
one owner of 20 rows (``bench/federation.py``'s round), one of 300, a node's batch of 200 owners of 50 rows,
and 10^4 one-row owners (the cross-device scale path of ``bench/scale.py``).

Lines read ``fit G x n  baseline  candidate  ratio`` (median CPU seconds of ``--repeats`` fits, thread CPU
time): the candidate is this checkout; the baseline is ``--against DIR``, another checkout (laid out as
``bench/federation.py --owner-pythonpath`` lays it out), timed in a child process alternately with the
candidate's, or this checkout again when not given (ratios near 1: the run's noise).

    python bench/logistic_fit.py [--against DIR] [--repeats 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SHAPES = ((1, 20), (1, 300), (200, 50), (10_000, 1))

CHILD = """
import json, sys, time
import numpy as np
from privfed.common.bounds import Bounds
from privfed.common.learners.logistic import fit_local_logistic_many
repeats, d = int(sys.argv[1]), 10
out = {}
for g, n in json.loads(sys.argv[2]):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=(g, n))
    X = np.clip(rng.normal(size=(g, n, d)) + np.where(np.arange(d) % 2 == y[..., None], 0.8, -0.8), -4, 4)
    bounds = Bounds.of(-4.0, 4.0, d)
    fit_local_logistic_many(X, y, bounds=bounds, n_classes=2)  # warm
    times = []
    for _ in range(repeats):
        t = time.thread_time()
        fit_local_logistic_many(X, y, bounds=bounds, n_classes=2)
        times.append(time.thread_time() - t)
    out[f"{g} x {n}"] = sorted(times)[len(times) // 2]
print(json.dumps(out))
"""


def time_fits(root: Path | None, repeats: int) -> dict[str, float]:
    """Median fit CPU per shape, in a child process importing privfed from ``root`` (None: this checkout)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")  # as a node pins them (issue 27)
    if root is not None:
        env["PYTHONPATH"] = str(root)
    cmd = [sys.executable, "-c", CHILD, str(repeats), json.dumps(SHAPES)]
    done = subprocess.run(cmd, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, default=None, help="the baseline checkout (default: this one)")
    parser.add_argument("--repeats", type=int, default=5, help="fits per shape and process (default 5)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating baseline/candidate runs (default 2)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.checkout import package_root

    print(f"# uptime: {os.popen('uptime').read().strip()}")
    with tempfile.TemporaryDirectory() as tmp:
        baseline_root = package_root(args.against.resolve(), Path(tmp)) if args.against else None
        runs: dict[str, list[dict[str, float]]] = {"baseline": [], "candidate": []}
        for _ in range(args.rounds):
            runs["baseline"].append(time_fits(baseline_root, args.repeats))
            runs["candidate"].append(time_fits(None, args.repeats))
    print(f"{'fit G x n':24} {'baseline':>10} {'candidate':>10} {'ratio':>7}")
    for g, n in SHAPES:
        shape = f"{g} x {n}"
        base = min(r[shape] for r in runs["baseline"])
        cand = min(r[shape] for r in runs["candidate"])
        print(f"{'fit ' + shape + ' s':24} {base:10.4f} {cand:10.4f} {cand / base:7.2f}")
    print(f"# uptime: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
