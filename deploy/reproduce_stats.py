"""Confidence intervals and verdicts of ``privfed reproduce`` (issue 21, item 4).

Every number the report grades is a set of per-seed values: one per run of an experiment, each
run on a fresh train/test split (or fresh data) and fresh noise. A verdict comes from a 95 %
confidence interval, never from the point estimate:

* **met**: the interval clears the paper's claim (lies wholly on the claimed side);
* **not met**: the interval clears the other side;
* **inconclusive**: anything else (the interval straddles the claim).

Intervals (:data:`LEVEL` = 0.95, two-sided):

* a mean over seeds: Student's t interval, ``mean ± t_{n-1} sd / sqrt(n)`` (:func:`mean_interval`);
  one seed gives the whole real line (nothing can be concluded from one run);
* a rate of 0/1 outcomes (the stump hit rates, one outcome per run): the Wilson score interval
  (:func:`proportion_interval`), which stays inside [0, 1] and is not degenerate at 0 or 1 hits;
* a comparison of two pipelines or settings ("boosting lowers the error", "PM beats Duchi"): the t
  interval of the *paired* per-seed differences (same split, same seed; :func:`paired`), so the
  split-to-split spread both share cancels.

A claim about several values at once ("PM above Duchi at every ε") is met when every interval
clears its side (an intersection-union test: its level is the level of each interval, no
multiplicity correction is needed) and not met as soon as one interval clears the other side.

Pure: numpy, and scipy imported where an interval is computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MET, NOT_MET, INCONCLUSIVE = "met", "not met", "inconclusive"
VERDICTS = (MET, NOT_MET, INCONCLUSIVE)
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A point estimate with its two-sided :data:`LEVEL` confidence interval over ``n`` values."""

    mean: float
    lo: float
    hi: float
    n: int

    def text(self, fmt: str = "{:.3f}") -> str:
        """``0.213 [0.190, 0.236]``; an unbounded side as ``-inf``/``inf``."""

        def f(v: float) -> str:
            return fmt.format(v) if math.isfinite(v) else str(v)

        return f"{f(self.mean)} [{f(self.lo)}, {f(self.hi)}]"

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "n": self.n}


def mean_interval(values: Sequence[float], level: float = LEVEL) -> Interval:
    """Student's t interval of the mean of ``values`` (independent per-seed values)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"need one or more finite values, got {values!r}")
    mean = float(x.mean())
    if x.size == 1:
        return Interval(mean, -math.inf, math.inf, 1)
    from scipy import stats  # not at import: ``privfed owner`` builds the CLI and must stay lean

    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Interval(mean, mean - half, mean + half, int(x.size))


def proportion_interval(outcomes: Sequence[float], level: float = LEVEL) -> Interval:
    """Wilson score interval of the rate of ``outcomes`` (each 0 or 1, independent runs)."""
    x = np.asarray(outcomes, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all((x == 0) | (x == 1)):
        raise ValueError(f"need one or more 0/1 outcomes, got {outcomes!r}")
    from scipy import stats

    n, p = int(x.size), float(x.mean())
    z = float(stats.norm.ppf(0.5 + level / 2))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return Interval(p, min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half)), n)


def paired(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Per-seed differences ``a - b`` (the same seeds, in the same order)."""
    if len(a) != len(b):
        raise ValueError(f"paired values need the same seeds: {len(a)} values against {len(b)}")
    return [float(x) - float(y) for x, y in zip(a, b)]


def side(interval: Interval, claim: float, *, above: bool) -> str:
    """The verdict for "the value is above ``claim``" (``above=False``: below)."""
    lo, hi = (interval.lo, interval.hi) if above else (-interval.hi, -interval.lo)
    c = claim if above else -claim
    return MET if lo > c else NOT_MET if hi < c else INCONCLUSIVE


def within(interval: Interval, margin: float) -> str:
    """Verdict for "the difference is within ±``margin``" (an equivalence claim)."""
    if -margin <= interval.lo and interval.hi <= margin:
        return MET
    return NOT_MET if interval.lo > margin or interval.hi < -margin else INCONCLUSIVE


def combine(verdicts: Sequence[str]) -> str:
    """All met: met; any not met: not met; else inconclusive (see the module docstring)."""
    if any(v == NOT_MET for v in verdicts):
        return NOT_MET
    return MET if verdicts and all(v == MET for v in verdicts) else INCONCLUSIVE
