"""Private split points: stump thresholds at LDP quantiles instead of the bounds' midpoint (issue 22 item 2).

Stumps split numeric attributes at thresholds fixed before the run (SPEC §6). The data-independent
choice, ``lo + b (hi - lo) / B``, is the natural split of a feature symmetric inside its bounds (the
synthetic set, ±10) and a poor one for real features, whose mass sits far from the middle of their
documented range: on the Redbook affairs survey (``fair``) no midpoint split beats the majority class even
without noise. Quantiles put the candidates where the rows are; here they are estimated under LDP.

Owner side (:meth:`SplitPointOracle.share`), one report per owner, ε-LDP for its whole data set: the owner
draws a feature ``j`` uniformly (independently of its data; ``j`` is sent with the report), maps its
value of ``j`` (the mean over its rows' grid cells, rounded stochastically, for an owner of several
rows) to one of ``G`` equal-width cells of the public bounds, and reports the cell through a frequency
oracle at ε (k-RR or OUE, whichever has the smaller count variance for ``G`` and ε; Wang, Blocki, Li,
Jha, USENIX Security 2017). This is the flat (one-level) histogram of Cormode, Kulkarni, Srivastava,
"Answering Range Queries Under Local Differential Privacy", VLDB 2019: for domains of 16-32 cells the
flat method is as accurate as their hierarchical and wavelet ones (their §5 and Fig. 3, small domains).

Coordinator side (:meth:`SplitPointOracle.split_points`): per feature the unbiased cell counts
([WBLJ17] eq. 1), made consistent (negative counts set to 0 and renormalised: "Norm-Sub", Wang et al.
NDSS 2020), the estimated CDF at the cell edges, and threshold ``b`` of ``B - 1`` at the first edge where
the CDF reaches ``b / B``. A feature with no report, or whose counts sum to nothing, keeps the
equal-width thresholds. All of it is post-processing.

Measured (issue 22): not the default. On validation splits of six real tables (120-5093 one-row owners;
``privfed experiment tabular --validate --learners bdt``) quantile thresholds from 10-20 % of the owners,
with or without the midpoints, closed 0.28-0.32 of the majority-to-AdaBoost gap, against 0.42 for the
data-independent thirds of the range (:data:`~privfed.common.boosting.params.N_BINS`): at these sizes the
owners they take from boosting and the noise of the quantiles cost more than better-placed cuts gain. They
help where the values crowd at one end of a wide documented range (breast cancer's areas) and need no
networked change to try: ``BoostingParams(split_points=...)``.

Budget: the split-point owners are a fraction of the run's owners (``split_fraction``) that release this
one report at the whole ε and take no other part in the run, so every owner still releases once per
run (:func:`private_split_points`; the boosting run then uses the rest). Spending a fraction of every
owner's ε instead would cost more: the count variance grows like ``1 / ε^2`` at these ε, so
``f N`` owners at ε beat ``N`` owners at ``f ε`` by about ``1 / f``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.stump import thresholds
from privfed.common.mechanisms.frequency import ORACLES, FrequencyOracle, make_oracle
from privfed.common.validation import check_fraction, check_int, check_positive

#: Default cells of the public range per feature.
N_GRID = 16
#: Default fraction of a run's owners that report split points (among the best on validation splits,
#: ``privfed experiment tabular --validate``; 0.1 scored the same).
SPLIT_FRACTION = 0.2


def grid_cells(X: ArrayLike, bounds: Bounds, n_cells: int) -> np.ndarray:
    """Cell (n, d) of every value among ``n_cells`` equal-width cells of its public range:
    ``floor(G (x - lo) / (hi - lo))``, values clipped to the bounds, the top edge in the last cell."""
    u = (bounds.to_unit(np.atleast_2d(np.asarray(X, dtype=np.float64))) + 1.0) / 2.0
    return np.minimum((u * n_cells).astype(np.int64), n_cells - 1)


def least_variance_oracle(epsilon: float, domain: int, names: tuple[str, ...] = ORACLES) -> str:
    """The frequency oracle of ``names`` with the least count variance per report, ``q (1 - q) / (p - q)^2``
    ([WBLJ17] eq. 2's leading term), for ``domain`` values at ``epsilon``: public configuration only."""

    def variance(name: str) -> float:
        oracle = make_oracle(name, epsilon=epsilon, domain=domain)
        return oracle.q * (1 - oracle.q) / (oracle.p - oracle.q) ** 2

    return min(names, key=variance)


@dataclass(frozen=True, kw_only=True)
class SplitPointOracle:
    """LDP quantiles of every feature from one report per owner (module docstring).

    Parameters
    ----------
    epsilon : float > 0
        Each split-point owner's budget for its one report (finite).
    d : int >= 1
        Features.
    n_grid : int >= 2
        ``G`` equal-width cells of the public bounds.
    oracle : {"krr", "oue"} or None
        None: the one with the smaller count variance for ``G`` and ε.
    """

    epsilon: float
    d: int
    n_grid: int = N_GRID
    oracle: str | None = None

    def __post_init__(self) -> None:
        check_positive(self.epsilon, name="epsilon")
        check_int(self.d, name="d", minimum=1)
        check_int(self.n_grid, name="n_grid", minimum=2)
        if self.oracle is None:
            object.__setattr__(self, "oracle", least_variance_oracle(self.epsilon, self.n_grid, ("krr", "oue")))
        self.frequency_oracle  # noqa: B018 - validates the oracle name

    @cached_property
    def frequency_oracle(self) -> FrequencyOracle:
        return make_oracle(str(self.oracle), epsilon=self.epsilon, domain=self.n_grid)

    def cells(self, X: ArrayLike, bounds: Bounds) -> np.ndarray:
        """Grid cell (n, d) of every value (:func:`grid_cells`)."""
        return grid_cells(X, bounds, self.n_grid)

    def share(
        self, X: ArrayLike, bounds: Bounds, rng: np.random.Generator, owner_of_row: ArrayLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Owner side: ``(features (m,), reports (m, width))``, one per owner (one row each by default).

        ``owner_of_row`` (n,) in ``0..m-1``: an owner of several rows reports the mean of its rows'
        cells, rounded up with probability its fractional part (stochastic rounding, a randomised
        function of its data: still one ε-LDP report).
        """
        if bounds.d != self.d:
            raise ConfigError(f"bounds describe {bounds.d} features, the oracle {self.d}")
        cells = self.cells(X, bounds)
        n = cells.shape[0]
        owner = np.arange(n) if owner_of_row is None else np.asarray(owner_of_row, dtype=np.int64)
        m = int(owner.max()) + 1 if n else 0
        j = np.asarray(rng.integers(0, self.d, size=m), dtype=np.int64)  # drawn whatever the data
        rows = np.bincount(owner, minlength=m)
        mean = np.bincount(owner, weights=cells[np.arange(n), j[owner]], minlength=m) / np.maximum(rows, 1)
        value = np.floor(mean).astype(np.int64)
        value += rng.random(m) < mean - value
        reports = self.frequency_oracle.privatize(np.minimum(value, self.n_grid - 1), rng)
        return j, reports

    def histograms(self, features: ArrayLike, reports: ArrayLike) -> np.ndarray:
        """Coordinator side: consistent estimated cell frequencies (d, G), each row summing to 1 or all 0."""
        j = np.asarray(features, dtype=np.int64)
        supports = self.frequency_oracle.supports(reports)
        if j.shape != (supports.shape[0],) or (j.size and (j.min() < 0 or j.max() >= self.d)):
            raise ConfigError(f"features must be one index in 0..{self.d - 1} per report")
        out = np.zeros((self.d, self.n_grid))
        for f in range(self.d):
            mine = j == f
            if mine.any():
                counts = self.frequency_oracle.estimate_counts(supports[mine].sum(axis=0), int(mine.sum()))
                counts = np.maximum(counts, 0.0)
                out[f] = counts / counts.sum() if counts.sum() > 0 else 0.0
        return out

    def split_points(self, features: ArrayLike, reports: ArrayLike, bounds: Bounds, n_bins: int) -> np.ndarray:
        """Thresholds (d, B - 1) at the estimated quantiles ``b / B`` (module docstring)."""
        return quantile_thresholds(self.histograms(features, reports), bounds, n_bins)


def quantile_thresholds(hist: np.ndarray, bounds: Bounds, n_bins: int) -> np.ndarray:
    """Thresholds (d, B - 1) from cell frequencies (d, G): threshold b at the first inner cell edge where
    the CDF reaches ``b / B``; a feature whose frequencies sum to 0 keeps the equal-width thresholds."""
    n_bins = check_int(n_bins, name="n_bins", minimum=2)
    n_grid = hist.shape[1]
    edges = bounds.lo[:, None] + np.arange(1, n_grid)[None, :] * (bounds.hi - bounds.lo)[:, None] / n_grid
    cdf = np.cumsum(hist, axis=1)[:, :-1]  # (d, G - 1): mass below each inner edge
    out = thresholds(bounds, n_bins).copy()
    for f in np.flatnonzero(hist.sum(axis=1) > 0):
        k = np.searchsorted(cdf[f], np.arange(1, n_bins) / n_bins - 1e-12)  # first edge with CDF >= b / B
        out[f] = edges[f, np.minimum(k, n_grid - 2)]
    return out


def private_split_points(
    X: ArrayLike,
    bounds: Bounds,
    n_bins: int,
    *,
    epsilon: float,
    rng: np.random.Generator,
    owner_of_row: ArrayLike | None = None,
    n_grid: int = N_GRID,
) -> np.ndarray:
    """Split points (d, B - 1) from the owners holding ``X`` (one report each; module docstring).

    ``epsilon = inf``: the exact quantiles on the same grid (the non-private reference).
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    oracle = SplitPointOracle(epsilon=epsilon if math.isfinite(epsilon) else 1.0, d=bounds.d, n_grid=n_grid)
    if math.isinf(epsilon):
        cells = oracle.cells(X, bounds)
        hist = np.stack([np.bincount(cells[:, f], minlength=n_grid) for f in range(bounds.d)]) / max(X.shape[0], 1)
        return quantile_thresholds(hist, bounds, n_bins)
    features, reports = oracle.share(X, bounds, rng, owner_of_row)
    return oracle.split_points(features, reports, bounds, n_bins)


def with_midpoints(split_points: ArrayLike, bounds: Bounds) -> np.ndarray:
    """The bounds' midpoints added to every feature's thresholds, sorted: (d, B) from (d, B - 1).

    A feature whose documented range is symmetric around its values (a 1..7 opinion scale) splits well
    at the midpoint, one whose values crowd at one end (an area, a count) at its quantiles; with both as
    candidates the stump's selection picks (measured in :mod:`privfed.deploy.experiments.tabular_validate`).
    Use the result with ``n_bins = B + 1``.
    """
    sp = np.asarray(split_points, dtype=np.float64)
    mid = (bounds.lo + bounds.hi) / 2.0
    return np.sort(np.hstack([sp.reshape(bounds.d, -1), mid[:, None]]), axis=1)


def split_owner_count(n_owners: int, fraction: float = SPLIT_FRACTION) -> int:
    """How many of ``n_owners`` report split points: ``round(fraction n)``, at least 1 and leaving one."""
    n_owners = check_int(n_owners, name="n_owners", minimum=2)
    return min(n_owners - 1, max(1, round(check_fraction(fraction, name="split_fraction") * n_owners)))
