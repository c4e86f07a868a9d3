"""Timing side channels of the owner core, measured as an attacker would (issue: owner answer time).

A coordinator sees when each answer arrives. For every release kind of ``common.tasks.KINDS`` this sends
the same task to owners that differ only in what the coordinator must not learn, and times
``OwnerCore.answer`` for one task (in process: the owner's own work, without the network's noise):

* ``data``: two owners with the same public configuration and row count, holding different rows (``A``:
  a two-class Gaussian mixture; ``B``: the attacker's contrast, chosen per kind to stress the
  computation: separable classes far apart, one class only, every value at a bound); an owner of
  10% fewer rows (the row count is not public; the work grows with it); and half the values set to 0
  (``tiny-zero``) or to a subnormal 1e-310 (``subnormal``), compared with each other too: arithmetic on a
  subnormal takes the CPU's slow path, so an owner reads such values as 0 when it loads its rows (audit 8);
  ``lr_gradient/tiny-theta`` sends an iterate of ``2^-1021`` per feature, whose products with the rows of
  ``|t_j| < 1/2`` underflowed (audit 9: ``A`` against ``at-bounds``, whose ``|t_j|`` are all 1);
* ``rows``: the same owner whose rows can afford the release, against one whose rows were spent under
  an earlier id (the ledger's ``RowsUnused``: it answers the kind's data-independent fallback). Whether
  the rows were spent is the membership fact of stop 35 finding 6.

The arms are interleaved (a random order each repeat) so that a drift of the machine's load hits them
alike. Per pair, one line::

    kind  pair  median_a  median_b  diff/spread  KS  accuracy

* ``diff/spread``: the difference of the medians over the pooled median absolute deviation;
* ``KS``: the two-sample Kolmogorov-Smirnov statistic (0: the same distribution);
* ``accuracy``: a threshold classifier telling the two arms apart from ONE timing, its threshold and
  side chosen on the even repeats and scored on the odd ones (0.5: chance). An attacker with ``m``
  timings does better; ``accuracy`` is a lower bound on what one probe gives.

Run: ``python bench/timing_channels.py`` (200 repeats per arm) or ``--quick`` (a smoke run); ``--kinds``
picks cases by name; ``--clock cpu`` times the thread's CPU time instead of the wall clock (on a loaded
machine: the work, without what the scheduler adds). Timing is noisy: compare within one run; ``uptime``
is printed beside it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the repository root: bench's own modules (bench.*)
from bench.timing_stats import CLOCKS, HEADER, pair_line, uptime  # noqa: E402
from privfed.common.bounds import Bounds  # noqa: E402
from privfed.common.ledger import Debit, Ledger
from privfed.common.secagg.boxes import public_bytes
from privfed.common.tasks import (
    BoostEvaluateTask,
    BoostShareTask,
    LrGradientTask,
    LrShareTask,
    NbReportTask,
    NccShareTask,
    PcaShareTask,
    PeerKey,
    RingSpec,
    SvmShareTask,
    Task,
    TaskSpec,
)
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner

D, K, N = 10, 2, 300  # features, classes, rows per owner (an anes96-sized owner's shard of a node)
BOUND = 4.0
BOUNDS = Bounds.of(-BOUND, BOUND, D)
BUDGET = 1e9  # the ledger never refuses in a timing run
OWNER, PEER = "bench-0.o00000", "bench-0.o00001"


# ----------------------------------------------------------------------------- data sets
def mixture(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``A``: a two-class Gaussian mixture (class c shifts every other feature up, the rest down)."""
    y = rng.integers(0, K, N)
    X = rng.normal(size=(N, D)) + np.where(np.arange(D) % K == y[:, None], 0.8, -0.8)
    return np.clip(X, -BOUND, BOUND), y


def separable(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Classes far apart along every feature: a solver's optimum is far from 0."""
    y = rng.integers(0, K, N)
    X = np.where(y[:, None] == 1, 3.5, -3.5) + 0.1 * rng.normal(size=(N, D))
    return np.clip(X, -BOUND, BOUND), y


def one_class(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every row of class 0."""
    X, _ = mixture(rng)
    return X, np.zeros(N, dtype=np.int64)


def at_bounds(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every value at a bound (beyond it before clipping)."""
    y = rng.integers(0, K, N)
    return rng.choice([-BOUND * 3, BOUND * 3], size=(N, D)), y


def fewer_rows(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A mixture of 10% fewer rows: the row count, which is not public (an NCC share's shape shows it)."""
    X, y = mixture(rng)
    keep = N - N // 10
    return X[:keep], y[:keep]


#: Values below the doubles' normal range (2^-1022 ~ 2.2e-308): arithmetic on them may take the CPU's slow path.
SUBNORMAL = 1e-310


def _half_tiny(rng: np.random.Generator, value: float) -> tuple[np.ndarray, np.ndarray]:
    """The mixture with half its values (every other feature) set to ``+-value``."""
    X, y = mixture(rng)
    X[:, ::2] = value * np.sign(X[:, ::2])
    return X, y


def tiny_zero(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The control of ``subnormal``: the same values set to 0."""
    return _half_tiny(rng, 0.0)


def subnormal(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Half the values subnormal (+-1e-310): to every release the same as 0, to the CPU maybe not."""
    return _half_tiny(rng, SUBNORMAL)


CONTRASTS: dict[str, Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]]] = {
    "separable": separable,
    "one-class": one_class,
    "at-bounds": at_bounds,
    "10%-fewer-rows": fewer_rows,
    "tiny-zero": tiny_zero,
    "subnormal": subnormal,
}


# ----------------------------------------------------------------------------- tasks
TINY_THETA = np.append(np.full(D, 2.0**-1021), 0.0)[None, :]


def _boost_config(run: str, base: str = "stump") -> object:
    from privfed.common.boosting.params import BoostingParams
    from privfed.common.boosting.wire import BoostConfig

    params = BoostingParams(base=base, epsilon=2.0, n_classes=K, bounds=BOUNDS, n_rounds=4, eval_groups="all")
    return BoostConfig(run, params)


def _boost_evaluate(run: str, core: OwnerCore) -> TaskSpec:
    from privfed.common.boosting.wire import BoostHistory
    from privfed.common.learners.stump import Stump, thresholds

    config = _boost_config(run)
    grid = thresholds(BOUNDS, config.params.n_bins)  # type: ignore[attr-defined]
    learner = Stump(0, 1, float(grid[0, 0]), (0, 1), 0.3)
    peers = tuple(PeerKey(o, "bench-0", public_bytes(core.keys.own_key(o)), b"") for o in (OWNER, PEER))
    ring = RingSpec(f"ring-{run}", (OWNER, PEER), 24, 2, 8.0, peers, {})
    return BoostEvaluateTask(config, BoostHistory((), 0), learner, ring)  # type: ignore[arg-type]


def _boost_share(run: str, core: OwnerCore) -> TaskSpec:
    from privfed.common.boosting.wire import BoostHistory

    return BoostShareTask(_boost_config(run), BoostHistory((), 0))  # type: ignore[arg-type]


def _svm(model: str) -> TaskSpec:
    """Phase 2 of FedDPDR on a public 3-dimensional subspace (as phase 1 broadcasts it)."""
    delta = 0.0 if model == "ovr-huber" else 1e-5
    return SvmShareTask(1.0, 1e-3, K, BOUNDS, np.eye(D)[:, :3], delta=delta, model=model, scaling="ball")


#: Each case: a task spec for round ``r`` (fresh release ids) and the contrasts its ``data`` pairs use.
CASES: dict[str, Callable[[str, OwnerCore], TaskSpec]] = {
    "ncc_share": lambda r, c: NccShareTask("pm", 1.0, "rr", 0.5, K, BOUNDS),
    "lr_share": lambda r, c: LrShareTask("pm", 1.0, 4.0, 1.0, K, BOUNDS),
    "pca_share": lambda r, c: PcaShareTask(1.0, 1e-5, 3, BOUNDS, 0.1, "ball"),
    "svm_share/ovr-huber": lambda r, c: _svm("ovr-huber"),
    "svm_share/mc-huber": lambda r, c: _svm("mc-huber"),
    "svm_share/softmax": lambda r, c: _svm("softmax"),
    "svm_share/centroid": lambda r, c: _svm("centroid"),
    "boost_share": lambda r, c: _boost_share(r, c),
    "boost_evaluate": lambda r, c: _boost_evaluate(r, c),
    "lr_gradient": lambda r, c: LrGradientTask("pm", 1.0, np.full((1, D + 1), 0.5), 1.0, K, BOUNDS),
    # audit 9: a hostile iterate of 2^-1021 per feature, whose products with rows of |t_j| < 1/2 underflowed
    "lr_gradient/tiny-theta": lambda r, c: LrGradientTask("pm", 1.0, TINY_THETA, 1.0, K, BOUNDS),
    "nb": lambda r, c: NbReportTask(1.0, 4, K, BOUNDS),
}


# ----------------------------------------------------------------------------- owners
def make_core(X: np.ndarray, y: np.ndarray, seed: int, *, rows_spent: bool = False) -> OwnerCore:
    """A core hosting ``OWNER`` (rows ``X, y``) and ``PEER`` (a boosting ring's other member). An earlier
    id held the same rows; with ``rows_spent`` it spent nearly the whole budget (every release of ``OWNER``
    is then recorded on its id alone and answered with the fallback), else a little."""
    ledger = Ledger(":memory:", epsilon_budget=BUDGET, delta_budget=1.0)
    keys = row_digests(X, y)
    ledger.bind_rows("bench-old.o00000", keys)
    ledger.debit_many([Debit("bench-old.o00000", BUDGET - 1e-3 if rows_spent else 1e-3, 0.0, "spent", "spent#0")])
    px, py = mixture(np.random.default_rng(seed + 1))
    owners = [
        LocalOwner(OWNER, X, y, np.random.default_rng(seed), K, BOUNDS, row_keys=tuple(keys)),
        LocalOwner(PEER, px, py, np.random.default_rng(seed + 2), K, BOUNDS),
    ]
    return OwnerCore(owners, ledger)


@dataclass
class Arm:
    """One owner set-up of a case, and its timings."""

    name: str
    core: OwnerCore
    times: list[float]


def time_case(name: str, arms: list[Arm], repeats: int, rng: np.random.Generator, clock: Callable[[], float]) -> None:
    """Answer the case's task ``repeats`` times per arm, the arms in a random order each repeat."""
    make = CASES[name]
    for r in range(repeats):
        order = arms[:]
        rng.shuffle(order)
        for arm in order:
            round_id = f"{name}-{r}"
            task = Task(f"t-{r}", OWNER, round_id, make(round_id, arm.core))
            t0 = clock()
            results = arm.core.answer([task]).results
            arm.times.append(clock() - t0)
            if results and hasattr(results[0].payload, "code"):
                raise SystemExit(f"{name}/{arm.name}: refused: {results[0].payload}")


def run(kinds: list[str], repeats: int, seed: int, clock: str = "wall") -> None:
    print(uptime())
    print(f"# {repeats} repeats per arm, n={N} rows, d={D}, K={K}; {clock} times of OwnerCore.answer for one task")
    print(HEADER)
    rng = np.random.default_rng(seed)
    for name in kinds:
        X, y = mixture(np.random.default_rng(seed))
        arms = [Arm("A", make_core(X, y, seed), []), Arm("A-rows-spent", make_core(X, y, seed, rows_spent=True), [])]
        for contrast, build in CONTRASTS.items():
            Xb, yb = build(np.random.default_rng(seed + 7))
            arms.append(Arm(contrast, make_core(Xb, yb, seed), []))
        time_case(name, arms, repeats, rng, CLOCKS[clock])
        base = arms[0]
        for arm in arms[1:]:
            print(pair_line(name, "A vs " + arm.name, base.times, arm.times))
        by_name = {arm.name: arm for arm in arms}
        print(pair_line(name, "tiny-zero vs subnormal", by_name["tiny-zero"].times, by_name["subnormal"].times))
    print(uptime())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200, help="timings per arm (default 200)")
    parser.add_argument("--quick", action="store_true", help="20 repeats: a smoke run")
    parser.add_argument("--kinds", default=",".join(CASES), help=f"comma-separated cases of: {', '.join(CASES)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="wall (default) or thread CPU time")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {list(CASES)}")
    if args.repeats < 4:
        parser.error("--repeats must be at least 4")
    run(kinds, 20 if args.quick else args.repeats, args.seed, args.clock)


if __name__ == "__main__":
    main()
