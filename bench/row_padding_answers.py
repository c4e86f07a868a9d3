"""What padding an owner's whole answer to its row cell costs (audit 12), against another tree in the same run.

``bench/row_padding.py`` times the fits with and without their padding in one process. Audit 12 moved the passes
before and around the fits onto the cell too (the SVM share's scaling and projection, a boosted share's SAMME
weights, binarising and encoding, an evaluation's predictions; an NB report now reads one row), and those changes
are not a switch to turn off in-process: this bench times the same answers in two worker processes, one importing
this tree and one importing ``--against`` (a checkout of main: ``git worktree add --detach /tmp/main main``), each
answer as the owner core computes it (``privfed.owner.compute.compute_release``: the release and its fallback,
the boosting weights from scratch), the two trees' arms interleaved in one random order per repeat
(``bench/timing_stats.py``) so that the machine's load hits both alike. Printed: the median ms of each tree and
their ratio (this tree over ``--against``), for counts just above a power of two (the worst case: 257 rows work
as 512) and inside a cell.

    python bench/row_padding_answers.py --against /tmp/main [--repeats 30] [--clock cpu|wall] [--kinds nb,...]

Load-sensitive: ``uptime`` is printed with the numbers.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench.*
from bench.timing_stats import CLOCKS, interleaved, uptime  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KINDS = (
    "svm/centroid",
    "svm/mc-huber",
    "svm/softmax",
    "svm/ovr-huber",
    "nb",
    "boost/stump-signs",
    "boost/stump-table",
    "boost/lr",
    "boost/ncc-joint",
    "evaluate/stump",
    "evaluate/lr",
)
COUNTS = (257, 300, 2049, 3000)

#: The worker: imports privfed from the tree ``argv[1]`` (the editable install's finder, remapped), then answers
#: ``kind n clock`` lines on stdin with the seconds one answer took. Only APIs both trees have.
WORKER = r"""
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]  # privfed from the finder alone, not the working directory
finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___privfed"))
here = finder.MAPPING["privfed"][: -len("/privfed")]
for key, path in list(finder.MAPPING.items()):
    finder.MAPPING[key] = sys.argv[1] + path[len(here):]
import logging, time
import numpy as np
from privfed.common.boosting.params import BoostingParams
from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound, at_round
from privfed.common.bounds import Bounds
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.samme import max_alpha
from privfed.common.learners.stump import Stump, thresholds
from privfed.common.tasks import BoostEvaluateTask, BoostShareTask, NbReportTask, SvmShareTask, Task
from privfed.common.tasks.steps import RingSpec
from privfed.owner.compute import compute_release
from privfed.owner.kinds import kind_of
from privfed.owner.local import LocalOwner

logging.disable(logging.CRITICAL)
assert all(m.__file__.startswith(sys.argv[1]) for n, m in sys.modules.items() if n.startswith("privfed.")), sys.argv[1]
D, K = 10, 2
BOUNDS = Bounds.of(-4.0, 4.0, D)
CLOCK = {"wall": time.perf_counter, "cpu": time.thread_time}

def history(base):
    learner = (Stump(0, 2, float(thresholds(BOUNDS, 4)[0, 1]), (0, 1), 0.3) if base == "stump"
               else LinearModel(np.ones((1, D)) / D, np.array([0.1]), BOUNDS))
    return at_round(BoostHistory((KeptRound(learner, max_alpha(K), 3.0, 10.0),), 1), 1)

def spec(kind):
    family, _, name = kind.partition("/")
    if family == "svm":
        delta = 0.0 if name == "ovr-huber" else 1e-5
        return SvmShareTask(1.0, 1e-3, K, BOUNDS, np.eye(D)[:, :3], delta=delta, model=name, scaling="ball")
    if family == "nb":
        return NbReportTask(1.0, 3, K, BOUNDS)
    base, _, encoding = name.partition("-")
    kw = {} if not encoding else {"stump_encoding": encoding} if base == "stump" else {"labels": encoding}
    params = BoostingParams(base=base, epsilon=1.0, n_classes=K, bounds=BOUNDS, n_rounds=3, n_bins=4, **kw)
    config = BoostConfig("run-1", params)
    if family == "boost":
        return BoostShareTask(config, history(base))
    h = history(base)
    return BoostEvaluateTask(config, h, h.kept[0].learner, RingSpec("s", ("node-0.o00000",), 24, 2, 8.0, (), {}))

owners = {}
for line in sys.stdin:
    kind, n, clock = line.split()
    if (kind, n) not in owners:
        rng = np.random.default_rng(int(n))
        X, y = rng.uniform(-4.0, 4.0, (int(n), D)), rng.integers(0, K, int(n))
        owner = LocalOwner("node-0.o00000", X, y, np.random.Generator(np.random.PCG64(1)), K, BOUNDS)
        s = spec(kind)
        owners[kind, n] = (owner, kind_of(s), Task("t", owner.owner_id, "run-1", s))
    owner, k, task = owners[kind, n]
    owner.boost_applied.clear()  # the weights from the history, as a node's first task of the run
    t0 = CLOCK[clock]()
    compute_release(k, task, owner)
    print(CLOCK[clock]() - t0, flush=True)
"""


class Worker:
    """A process answering with one tree's code."""

    def __init__(self, tree: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tree.resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tree,
        )

    def seconds(self, kind: str, n: int, clock: str) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{kind} {n} {clock}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True, help="the other tree (a checkout of main)")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)))
    args = parser.parse_args(argv)
    workers = {"this": Worker(ROOT), "against": Worker(args.against)}
    counts = [int(c) for c in args.counts.split(",")]
    rng = np.random.default_rng(7)
    print(uptime())
    print(f"# median ms of {args.repeats} answers ({args.clock} clock), this tree / {args.against}, interleaved")
    print(f"{'answer':18} {'n':>5} {'against':>9} {'this':>9} {'ratio':>6}")
    try:
        for kind in args.kinds.split(","):
            arms = {
                f"{tree}:{n}": (lambda r, w=worker, n=n, k=kind: w.seconds(k, n, args.clock))
                for n in counts
                for tree, worker in workers.items()
            }
            for arm in arms.values():  # warm-up: imports, caches
                arm(-1)
            times = interleaved(arms, args.repeats, rng)
            for n in counts:
                old, new = statistics.median(times[f"against:{n}"]), statistics.median(times[f"this:{n}"])
                print(f"{kind:18} {n:5d} {old * 1e3:9.3f} {new * 1e3:9.3f} {new / old:6.2f}", flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    print(uptime())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
