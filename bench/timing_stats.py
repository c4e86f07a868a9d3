"""The statistics of the timing benches (``bench/timing_channels.py``, ``bench/timing_processes.py``,
``bench/timing_paths.py``): arms timed interleaved, and how well one timing tells two arms apart.

* :func:`interleaved`: each repeat runs every arm once, in a random order, so that a drift of the
  machine's load hits them alike;
* :func:`compare`: the medians, their difference over the pooled median absolute deviation, the
  two-sample Kolmogorov-Smirnov statistic, and the accuracy of a one-timing threshold rule
  (:func:`threshold_accuracy`: 0.5 is chance; an attacker with more timings does better).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Mapping

import numpy as np

#: ``--clock``: what a coordinator sees (wall), or this thread's CPU time (less disturbed by other processes
#: on a shared machine; the work, not what the scheduler adds to it).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}

#: The column heads of :func:`pair_line`.
HEADER = f"{'kind':25} {'pair':24} {'med_a ms':>9} {'med_b ms':>9} {'diff/mad':>9} {'KS':>5} {'acc':>5}"


def uptime() -> str:
    """``# uptime: ...``: the machine's load beside a timing."""
    return f"# uptime: {os.popen('uptime').read().strip()}"


def interleaved(
    arms: Mapping[str, Callable[[int], float | None]],
    repeats: int,
    rng: np.random.Generator,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """``repeats`` timings of each arm, the arms in a random order each repeat. ``arms[name](r)`` does
    repeat ``r``'s work; it returns None to be timed whole by ``clock``, or the seconds it measured
    itself (e.g. between two events it records)."""
    times: dict[str, list[float]] = {name: [] for name in arms}
    order = list(arms)
    for r in range(repeats):
        rng.shuffle(order)
        for name in order:
            t0 = clock()
            own = arms[name](r)
            times[name].append(clock() - t0 if own is None else own)
    return times


def ks_statistic(a: list[float], b: list[float]) -> float:
    """The two-sample Kolmogorov-Smirnov statistic ``sup |F_a - F_b|``."""
    grid = np.sort(np.concatenate([a, b]))
    fa = np.searchsorted(np.sort(a), grid, side="right") / len(a)
    fb = np.searchsorted(np.sort(b), grid, side="right") / len(b)
    return float(np.max(np.abs(fa - fb)))


def threshold_accuracy(a: list[float], b: list[float]) -> float:
    """Accuracy of the best one-timing threshold rule fitted on the even repeats, scored on the odd ones."""
    train_a, train_b, test_a, test_b = np.array(a[::2]), np.array(b[::2]), np.array(a[1::2]), np.array(b[1::2])
    best, rule = -1.0, (0.0, True)
    for t in np.concatenate([train_a, train_b]):
        for a_below in (True, False):
            hits = np.sum((train_a <= t) == a_below) + np.sum((train_b <= t) != a_below)
            acc = hits / (len(train_a) + len(train_b))
            if acc > best:
                best, rule = acc, (float(t), a_below)
    t, a_below = rule
    hits = np.sum((test_a <= t) == a_below) + np.sum((test_b <= t) != a_below)
    return float(hits / (len(test_a) + len(test_b)))


def compare(a: list[float], b: list[float]) -> tuple[float, float, float, float, float]:
    """Medians (ms), difference over the pooled MAD, KS statistic, threshold accuracy."""
    ma, mb = statistics.median(a), statistics.median(b)
    mad = statistics.median([abs(x - ma) for x in a] + [abs(x - mb) for x in b]) or math.ulp(1.0)
    return ma * 1e3, mb * 1e3, (mb - ma) / mad, ks_statistic(a, b), threshold_accuracy(a, b)


def pair_line(kind: str, pair: str, a: list[float], b: list[float]) -> str:
    """One line under :data:`HEADER`: :func:`compare` of arms ``a`` and ``b``."""
    ma, mb, effect, ks, acc = compare(a, b)
    return f"{kind:25} {pair:24} {ma:9.3f} {mb:9.3f} {effect:9.2f} {ks:5.2f} {acc:5.2f}"
