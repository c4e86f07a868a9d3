"""What padding the fits to the row count's public grid cell costs, and what it buys (common/work_rows.py).

Two tables, every arm timed interleaved with the others in one run (``bench/timing_stats.py``):

* cost: each owner fit (the LR share's local fit, DP-PCA, every FedDPDR SVM model) on ``n`` rows, as it
  runs now (padded to the next power of two, the SVM solvers' steps from the cell) and as it ran before
  (``work_rows`` made the identity in the same process): median milliseconds and their ratio, padded over
  unpadded. The worst case is just above a power of two (257 rows work as 512);
* distinguishability: owners of 300 and 270 rows (10% fewer, one cell), padded and unpadded, printed as
  ``bench/timing_channels.py`` prints (medians, difference over the MAD, KS, and the accuracy of a one-timing
  threshold rule; 0.5 is chance); then owners of 300 and 600 rows (two cells), padded to their cells and to a
  declared count of 1024 (``privfed owner --work-rows 1024``: ``work_rows.declared_rows``), with what the
  declared count costs over the cells.

    python bench/row_padding.py [--repeats 40] [--clock cpu|wall] [--fits lr,pca,svm/ovr-huber,...]

About two minutes at the defaults; load-sensitive, so ``uptime`` is printed with the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench.*
from bench.timing_stats import CLOCKS, HEADER, interleaved, pair_line, uptime  # noqa: E402
from privfed.common.bounds import Bounds  # noqa: E402
from privfed.common.feddpdr import centroid, multiclass, pca, release, svm  # noqa: E402
from privfed.common.feddpdr.choices import SVM_MODELS  # noqa: E402
from privfed.common.feddpdr.pca import owner_pca_release  # noqa: E402
from privfed.common.feddpdr.release import owner_svm_release  # noqa: E402
from privfed.common.learners import newton  # noqa: E402
from privfed.common.learners.logistic import fit_local_logistic  # noqa: E402
from privfed.common.work_rows import declared_rows  # noqa: E402

D, K, BOUND, LAM = 10, 2, 4.0, 1e-3  # bench/timing_channels.py's owner
BOUNDS = Bounds.of(-BOUND, BOUND, D)
SUBSPACE = np.eye(D)[:, :3]
COUNTS = (20, 257, 300, 511)
DECLARED = 1024  # --work-rows for the two-cell table
PADDED_MODULES = (newton, svm, multiclass, centroid, pca, release)


@contextlib.contextmanager
def unpadded() -> Iterator[None]:
    """The fits as they were: on the owner's own rows, steps from its own count."""
    saved = {m: m.work_rows for m in PADDED_MODULES}
    for module in PADDED_MODULES:
        module.work_rows = lambda n, bound=None: max(int(n), 1)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, real in saved.items():
            module.work_rows = real  # type: ignore[attr-defined]


def rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, K, n)
    X = rng.normal(size=(n, D)) + np.where(np.arange(D) % K == y[:, None], 0.8, -0.8)
    return np.clip(X, -BOUND, BOUND), y


def fit(name: str) -> Callable[[np.ndarray, np.ndarray, np.random.Generator], object]:
    """The owner's computation ``name`` on rows ``X, y``."""
    if name == "lr":
        return lambda X, y, rng: fit_local_logistic(X, y, bounds=BOUNDS, n_classes=K, C=1.0)
    if name == "pca":
        return lambda X, y, rng: owner_pca_release(X, BOUNDS, 3, 1.0, 1e-5, rng)
    model = name.split("/", 1)[1]
    delta = 0.0 if model == "ovr-huber" else 1e-5
    return lambda X, y, rng: owner_svm_release(
        X, y, BOUNDS, SUBSPACE, K, 1.0, LAM, rng, delta=delta, model=model, scaling="ball"
    )


def arm(name: str, n: int, padded: bool, seed: int = 0, declared: int | None = None) -> Callable[[int], None]:
    """One fit of ``name`` on ``n`` rows: on the cell (``padded``), the rows alone, or a ``declared`` count."""
    X, y = rows(n, seed)
    run = fit(name)

    def once(r: int) -> None:
        rng = np.random.default_rng(r)
        with unpadded() if not padded else declared_rows(declared):
            run(X, y, rng)

    return once


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--fits", default=",".join(["lr", "pca", *(f"svm/{m}" for m in SVM_MODELS)]))
    args = parser.parse_args(argv)
    clock, rng = CLOCKS[args.clock], np.random.default_rng(7)
    fits = args.fits.split(",")
    print(uptime())
    print(f"# cost: median ms of {args.repeats} fits ({args.clock} clock), padded / unpadded, interleaved")
    print(f"{'fit':16} {'n':>5} {'unpadded':>9} {'padded':>9} {'ratio':>6}")
    for name in fits:
        arms = {f"{p}{n}": arm(name, n, p == "p") for n in COUNTS for p in ("u", "p")}
        times = interleaved(arms, args.repeats, rng, clock)
        for n in COUNTS:
            old, new = statistics.median(times[f"u{n}"]), statistics.median(times[f"p{n}"])
            print(f"{name:16} {n:5d} {old * 1e3:9.3f} {new * 1e3:9.3f} {new / old:6.2f}")
    print(uptime())
    print("# one timing: 300 rows against 270 (one cell)")
    print(HEADER)
    for name in fits:
        for padded in (False, True):
            arms = {"300": arm(name, 300, padded, seed=1), "270": arm(name, 270, padded, seed=1)}
            times = interleaved(arms, args.repeats, rng, clock)
            label = "padded" if padded else "unpadded"
            print(pair_line(name, f"300/270 {label}", times["300"], times["270"]))
    print(uptime())
    print(f"# one timing: 300 rows against 600 (two cells), on their cells and on a declared {DECLARED}")
    print(HEADER)
    cost = []
    for name in fits:
        for declared in (None, DECLARED):
            arms = {n: arm(name, int(n), True, seed=1, declared=declared) for n in ("300", "600")}
            times = interleaved(arms, args.repeats, rng, clock)
            label = "cells" if declared is None else f"declared {DECLARED}"
            print(pair_line(name, f"300/600 {label}", times["300"], times["600"]))
            cost.append((name, label, statistics.median(times["300"]), statistics.median(times["600"])))
    print(f"# median ms: 300 and 600 rows on their cells and on the declared {DECLARED}")
    for name, label, a, b in cost:
        print(f"{name:16} {label:14} {a * 1e3:9.3f} {b * 1e3:9.3f}")
    print(uptime())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
