"""LDP naive Bayes over public bins: an additive model from one report per owner (issue 22 item 3).

Boosted stumps are an additive model, a sum of per-feature step functions. Naive Bayes over the same public
bins is one too, ``log P(k) + sum_j log P(bin_j(x) | k)``, and it needs only the per-feature (bin, class)
histograms, which every owner can help estimate with **one** report instead of one per boosting round.
That is the design of the low-order marginals of CALM (Zhang, Wang, Li, He, Jha, Ding, "CALM: Consistent
Adaptive Local Marginal for Marginal Release under Local Differential Privacy", CCS 2018: each user is
assigned one marginal and reports it through a frequency oracle) applied to the 2-way (feature, label)
marginals, and of LDP naive Bayes (Yilmaz, Al-Rubaie, Chang, "Locally differentially private naive Bayes
classification", 2019, §4: one perturbed (feature value, class) report per user).

Owner side (:meth:`NaiveBayesEncoding.share`), ε-LDP for the owner's whole data set: the owner draws a
feature ``j`` uniformly from ``0..d-1`` (independently of its data; ``j`` travels in the clear with the
report) and one of its rows uniformly (a randomised function of its data; one-row owners have one), maps
the row's value of ``j`` to one of ``B`` equal-width bins of the public bounds (:func:`~privfed.common.
learners.split_points.grid_cells`), and reports the cell ``bin * K + y`` of the ``B K`` (bin, class) cells
through the frequency oracle with the smallest count variance for that domain and ε
(:func:`~privfed.common.learners.split_points.least_variance_oracle`: k-RR for the small domains here;
Wang, Blocki, Li, Jha, USENIX Security 2017). The oracle is ε-LDP over its whole domain and what comes
before it is data-independent or a randomised function of the data, so one report costs exactly ε.

Coordinator side (:meth:`NaiveBayesEncoding.counts`): per feature the unbiased cell counts of the owners
that sampled it ([WBLJ17] eq. 1), scaled by ``d`` (each owner samples one of ``d`` features): an unbiased
estimate of the (bin, class) histogram of all owners, feature by feature (tested). Scaling by ``N / n_j``
instead (the realised number of owners per feature) lost on validation splits (:meth:`NaiveBayesEncoding.counts`). :func:`fit_naive_bayes`
clips negative counts to 0 and adds ``smoothing * N / (d B K)`` pseudo-counts to every cell (the count a
cell would hold if the owners spread evenly; public: ``N`` is the number of reports) before taking logs;
the class prior is the counts' class totals averaged over features. All of it is post-processing.

Measured (``privfed experiment tabular --validate --learners nb``, validation splits of six real tables,
ε = 3): about three times the gap closed by the federated SAMME over stumps (:mod:`privfed.deploy.
experiments.tabular_decompose` shows why: a round's stump from N / T owners is mostly share noise).
Over the network: ``--task nb`` (:mod:`privfed.common.tasks.naive_bayes`, ``privfed.server.strategies.naive_bayes``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.naive_bayes_model import NaiveBayesModel
from privfed.common.learners.split_points import grid_cells, least_variance_oracle
from privfed.common.mechanisms.base import check_epsilon
from privfed.common.mechanisms.frequency import FrequencyOracle, make_oracle
from privfed.common.validation import check_int, check_positive

#: Default bins per feature: the thirds of each public range (the stumps' default thresholds too).
NB_BINS = 3
#: Default pseudo-counts per cell, in units of ``N / (d B K)`` (the count of an even spread).
SMOOTHING = 1.0
#: How :meth:`NaiveBayesEncoding.counts` takes each feature's sum to all owners, and the default (validated there).
COUNT_SCALINGS = ("d", "realised")
COUNT_SCALING = "d"


def check_feature_probs(probs: ArrayLike, d: int) -> np.ndarray:
    """``probs`` as a (d,) float64 distribution: finite, >= 0, summing to 1 within 1e-9 (it travels as float64);
    ConfigError otherwise. Zeros are allowed (an owner then never draws that feature)."""
    p = np.asarray(probs, dtype=np.float64)
    if p.shape != (d,) or not np.all(np.isfinite(p)) or np.any(p < 0.0):
        raise ConfigError(f"the feature distribution must be {d} finite probabilities >= 0, got shape {p.shape}")
    if abs(float(p.sum()) - 1.0) > 1e-9:
        raise ConfigError(f"the feature distribution must sum to 1, got {float(p.sum())!r}")
    return p


def draw_features(probs: np.ndarray | None, d: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` independent features, uniform over ``0..d-1`` or from the checked distribution ``probs`` (inverse
    CDF; a zero never drawn); whatever the data."""
    if probs is None:
        return np.asarray(rng.integers(0, d, size=m), dtype=np.int64)
    cdf = np.cumsum(probs)
    return np.minimum(np.searchsorted(cdf, rng.random(m) * cdf[-1], side="right"), d - 1).astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class NaiveBayesEncoding:
    """One (feature, bin, class) report per owner through a frequency oracle (module docstring).

    Parameters
    ----------
    epsilon : float > 0 or math.inf
        Each owner's budget for its one report; ``inf``: the exact cell (the sampling alone, no oracle noise).
    bounds : Bounds
        Public feature bounds (``d`` features).
    n_classes : int >= 2
    n_bins : int >= 2
        ``B`` equal-width bins of each public range.
    oracle : {"krr", "oue", "olh"} or None
        None: the least count variance for the domain ``B K`` and ε.
    """

    epsilon: float
    bounds: Bounds
    n_classes: int
    n_bins: int = NB_BINS
    oracle: str | None = None

    def __post_init__(self) -> None:
        if np.isfinite(self.epsilon):
            check_epsilon(self.epsilon)
        elif self.epsilon != np.inf:
            raise ConfigError(f"epsilon must be a positive number (or inf), got {self.epsilon!r}")
        check_int(self.n_classes, name="n_classes", minimum=2)
        check_int(self.n_bins, name="n_bins", minimum=2)
        if self.oracle is None and np.isfinite(self.epsilon):
            object.__setattr__(self, "oracle", least_variance_oracle(self.epsilon, self.domain))
        if np.isfinite(self.epsilon):
            self.frequency_oracle  # noqa: B018 - validates the oracle name

    @property
    def d(self) -> int:
        return self.bounds.d

    @property
    def domain(self) -> int:
        """``B K`` (bin, class) cells; cell ``bin * K + class``."""
        return self.n_bins * self.n_classes

    @cached_property
    def frequency_oracle(self) -> FrequencyOracle:
        if not np.isfinite(self.epsilon):
            raise ConfigError("epsilon = inf reports the exact cell: no frequency oracle")
        return make_oracle(str(self.oracle), epsilon=self.epsilon, domain=self.domain)

    def cells(self, X: ArrayLike, y: ArrayLike) -> np.ndarray:
        """Every row's (bin, class) cell of every feature, ``(n, d)``."""
        y = np.asarray(y)
        if y.ndim != 1 or (y.size and (y.min() < 0 or y.max() >= self.n_classes)):
            raise ConfigError(f"y must be class indices in 0..{self.n_classes - 1}")
        return grid_cells(X, self.bounds, self.n_bins) * self.n_classes + y[:, None]

    def share(
        self,
        X: ArrayLike,
        y: ArrayLike,
        rng: np.random.Generator,
        owner_of_row: ArrayLike | None = None,
        *,
        feature_probs: ArrayLike | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Owner side: ``(features (m,), reports)``, one report per owner (one row each by default).

        ``owner_of_row`` (n,) in ``0..m-1``: each owner reports the cell of one of its rows, drawn uniformly.
        ``feature_probs`` (d,): the public distribution each owner draws its feature from instead of the uniform
        (:mod:`~privfed.common.learners.feature_allocation`; checked by :func:`check_feature_probs`); drawn
        whatever the data either way. Reports are the oracle's (``(m, width)`` integers), or the exact cells
        ``(m,)`` at ε = ∞.
        """
        X, y = np.atleast_2d(np.asarray(X, dtype=np.float64)), np.asarray(y)
        n = X.shape[0]
        owner = np.arange(n) if owner_of_row is None else np.asarray(owner_of_row, dtype=np.int64)
        if owner.shape != (n,) or (n and owner.min() < 0):
            raise ConfigError(f"owner_of_row must give each of the {n} rows an owner index >= 0")
        m = int(owner.max()) + 1 if n else 0
        order = np.argsort(owner, kind="stable")
        count = np.bincount(owner, minlength=m)
        first = np.cumsum(count) - count

        def drawn(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            row = order[first + index]
            return X[row], y[row]

        return self.owner_reports(count, drawn, rng, feature_probs=feature_probs)

    def owner_reports(
        self,
        count: np.ndarray,
        drawn: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
        rng: np.random.Generator,
        *,
        feature_probs: ArrayLike | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The draws of :meth:`share` for ``m`` owners of ``count`` (m,) rows each: every owner's feature, then the
        index of its one row among its own; ``drawn(index)`` gives those rows ``(X (m, d), y (m,))``, and only their
        cells are computed, so no pass goes over an owner's other rows (its row count is private, and a coordinator
        times the answer: audit 12, ``tests/adversary/test_differential_row_work.py``)."""
        probs = None if feature_probs is None else check_feature_probs(feature_probs, self.d)
        if np.any(count == 0):
            raise ConfigError("every owner index in 0..max(owner_of_row) must hold a row")
        m = count.shape[0]
        j = draw_features(probs, self.d, m, rng)
        X, y = drawn(np.floor(rng.random(m) * count).astype(np.int64))
        return j, self.reports(self.cells(X, y)[np.arange(m), j], rng)

    def reports(self, value: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The reports of drawn cells ``value``: the oracle's, or the cells themselves at ε = ∞."""
        return value if not np.isfinite(self.epsilon) else self.frequency_oracle.privatize(value, rng)

    def counts(
        self,
        features: ArrayLike,
        reports: ArrayLike,
        *,
        scaling: str = COUNT_SCALING,
        feature_probs: ArrayLike | None = None,
    ) -> np.ndarray:
        """Coordinator side: unbiased (bin, class) counts of all ``N`` owners, ``(d, B, K)`` (module docstring).

        Per feature, the sum of the unbiased cell supports of the owners that sampled it ([WBLJ17] eq. 1), scaled
        to all owners. ``scaling="d"`` (the default): times ``d``, the inverse of the sampling probability;
        unbiased, and additive over batches of reports (the coordinator folds it reply by reply).
        ``"realised"``: feature ``j``'s sum times ``N / n_j``, ``n_j`` the reports that sampled it (public: the
        features travel in the clear; 0 when ``n_j = 0``). Given ``n_j`` its reporters are a uniform sample of the
        owners, so it is unbiased given the realised ``n_j >= 1`` (:meth:`count_variance`); needs all ``N``
        reports in one call. Post-processing either way.

        The realised scaling lost on validation splits (``privfed experiment tabular --validate --learners
        mbdt-scale --splits 60 --seed 1000``, seeds 2000-2059, ε 1/3/5/8, six tables, both scalings on the same
        reports): realised minus d in the fraction of the gap closed, mbdt -0.005 ± 0.004 (star98 -0.019 ± 0.020,
        breast_cancer -0.006 ± 0.005, no table better beyond noise), nb -0.002 ± 0.003; at ε = ∞ -0.002 ± 0.005.
        The fits normalise each feature's class columns, so a feature's scale cancels there: the d-scaling's
        tables are exactly the realised scaling's with ``N / (d n_j)`` times the pseudo-counts (more shrinkage for
        a feature fewer owners drew), and its class prior weighs each feature's class totals by ``n_j``. Those two
        choices are all that differs, and they are the better ones here.

        ``feature_probs`` (d,): the reports' owners drew their features from this public distribution (:meth:`share`),
        and each feature's sum is divided by its probability instead (Horvitz-Thompson: unbiased for the histogram
        of these owners, additive over batches; ``scaling`` must be "d" then, whose special case it is).
        """
        probs = None if feature_probs is None else check_feature_probs(feature_probs, self.d)
        j = np.asarray(features, dtype=np.int64)
        if j.ndim != 1 or (j.size and (j.min() < 0 or j.max() >= self.d)):
            raise ConfigError(f"sampled features must be indices in 0..{self.d - 1}")
        if not np.isfinite(self.epsilon):
            support = np.zeros((j.size, self.domain))
            value = np.asarray(reports, dtype=np.int64)
            if value.shape != j.shape or (value.size and (value.min() < 0 or value.max() >= self.domain)):
                raise ConfigError(f"exact reports must be one cell in 0..{self.domain - 1} per owner")
            support[np.arange(j.size), value] = 1.0
            unbiased = support
        else:
            oracle = self.frequency_oracle
            support = oracle.supports(reports).astype(np.float64)
            if support.shape[0] != j.size:
                raise ConfigError(f"{support.shape[0]} reports for {j.size} sampled features")
            unbiased = (support - oracle.q) / (oracle.p - oracle.q)
        out = np.zeros((self.d, self.domain))
        np.add.at(out, j, unbiased)
        if probs is not None:
            if scaling != "d" or np.any(np.bincount(j, minlength=self.d)[probs == 0.0]):
                raise ConfigError("a public feature distribution: scaling 'd', no report of probability 0")
            scale = 1.0 / np.where(probs > 0.0, probs, 1.0)
        elif scaling == "d":
            scale = np.full(self.d, float(self.d))
        elif scaling == "realised":
            scale = j.size / np.maximum(np.bincount(j, minlength=self.d), 1)
        else:
            raise ConfigError(f"scaling must be one of {COUNT_SCALINGS}, got {scaling!r}")
        return (out * scale[:, None]).reshape(self.d, self.n_bins, self.n_classes)

    def count_variance(
        self, true_cells: ArrayLike, *, scaling: str = COUNT_SCALING, drawn: ArrayLike | None = None
    ) -> np.ndarray:
        """Closed-form variance of :meth:`counts` ``(d, B, K)`` for owners whose cells are ``true_cells`` (N, d).

        Owner ``i``'s unbiased support ``z_c`` of cell ``c`` has mean ``a_i = 1[c = v_i]`` (``v_i`` its cell) and
        variance ``s_i = (q (1 - q) + a_i (p - q)(1 - p - q)) / (p - q)^2`` for a pure oracle with independent
        supports per value (k-RR's are exclusive, which does not change a single cell's moment); ``s_i = 0`` at
        ε = ∞. ``h = sum_i a_i`` is the cell's true count.

        ``scaling="d"`` (unconditional): each owner contributes ``d z_c 1[j = f]``, ``P[j = f] = 1 / d``, so the
        variance is ``sum_i d (s_i + a_i) - a_i``.

        ``scaling="realised"``, given ``drawn`` (d,), the ``n = n_f`` owners that sampled feature ``f`` (a uniform
        sample without replacement of the ``N``): ``(N / n) sum_i s_i + (N / n) (N - n) / (N - 1) (h - h^2 / N)``,
        the oracle's noise plus the finite-population sampling variance of the ratio estimate; 0 where ``n = 0``
        (the count is then 0, not ``h``: unbiased given ``n >= 1``).
        """
        v = np.asarray(true_cells, dtype=np.int64)
        hits = np.stack([np.bincount(v[:, f], minlength=self.domain) for f in range(self.d)]).astype(np.float64)
        n_owners = v.shape[0]
        if np.isfinite(self.epsilon):
            p, q = self.frequency_oracle.p, self.frequency_oracle.q
            noise = n_owners * q * (1 - q) / (p - q) ** 2 + hits * (1 - p - q) / (p - q)  # sum_i s_i
        else:
            noise = np.zeros_like(hits)
        if scaling == "d":
            out = self.d * (noise + hits) - hits
        elif scaling == "realised":
            if drawn is None:
                raise ConfigError("the realised scaling's variance is given the owners per feature: pass drawn")
            n = np.asarray(drawn, dtype=np.float64)
            if n.shape != (self.d,) or n.sum() != n_owners:
                raise ConfigError(f"drawn must be (d={self.d},) counts summing to the {n_owners} owners")
            ratio = (n_owners / np.maximum(n, 1.0))[:, None]
            fpc = ((n_owners - n) / max(n_owners - 1, 1))[:, None]
            out = np.where(n[:, None] > 0, ratio * (noise + fpc * (hits - hits**2 / n_owners)), 0.0)
        else:
            raise ConfigError(f"scaling must be one of {COUNT_SCALINGS}, got {scaling!r}")
        return out.reshape(self.d, self.n_bins, self.n_classes)


#: Where :func:`smoothed_marginals` puts the pseudo-counts of a feature's class column.
SHRINK_TARGETS = ("uniform", "marginal")


def smoothed_marginals(
    counts: ArrayLike, n_reports: int, bounds: Bounds, *, smoothing: float = SMOOTHING, shrink_to: str = "uniform"
) -> tuple[np.ndarray, np.ndarray]:
    """``(P(bin | k) (d, B, K), P(k) (K,))`` from (noisy) counts ``(d, B, K)`` of ``n_reports`` owners (module
    docstring: clip negative counts, add the pseudo-counts, normalise); the class prior is the counts' class
    totals averaged over features. Post-processing; naive Bayes and the marginal boosting
    (:mod:`~privfed.common.learners.marginal_boost`) both start from it.

    ``shrink_to``: the pseudo-counts spread evenly over the bins (``"uniform"``), or over the bins as the feature's
    counts pooled over the classes (clipped and smoothed evenly) spread (``"marginal"``: a class column shrinks towards "this feature says
    nothing about the class", the m-estimate). Measured on validation splits (``privfed experiment tabular
    --validate --learners mbdt``, grid ``mbdt-post``): the marginal target narrows bdt --release marginals' ε = 3
    gap on breast_cancer and star98 and widens it on wine and iris, the same on average; uniform stays."""
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 3 or c.shape[0] != bounds.d or c.shape[1] < 2 or c.shape[2] < 2:
        raise ConfigError(f"counts must be (d={bounds.d}, bins >= 2, classes >= 2), got {c.shape}")
    check_int(n_reports, name="n_reports", minimum=1)
    if shrink_to not in SHRINK_TARGETS:
        raise ConfigError(f"shrink_to must be one of {SHRINK_TARGETS}, got {shrink_to!r}")
    d, n_bins, k = c.shape
    pseudo = check_positive(smoothing, name="smoothing") * n_reports / (d * n_bins * k)
    cells = np.maximum(c, 0.0)
    if shrink_to == "marginal":  # the pooled counts, themselves smoothed evenly: every bin keeps some mass
        pooled = cells.sum(axis=2) + k * pseudo
        cells = cells + pseudo * n_bins * (pooled / pooled.sum(axis=1, keepdims=True))[:, :, None]
    else:
        cells = cells + pseudo
    prior = np.maximum(c.sum(axis=1).mean(axis=0), 0.0) + pseudo
    return cells / cells.sum(axis=1, keepdims=True), prior / prior.sum()


def fit_naive_bayes(
    counts: ArrayLike, n_reports: int, bounds: Bounds, *, smoothing: float = SMOOTHING
) -> NaiveBayesModel:
    """Naive Bayes from (noisy) counts ``(d, B, K)`` of ``n_reports`` owners: the logs of :func:`smoothed_marginals`."""
    tables, prior = smoothed_marginals(counts, n_reports, bounds, smoothing=smoothing)
    return NaiveBayesModel(np.log(tables), np.log(prior), bounds)


def ldp_counts(
    X: ArrayLike,
    y: ArrayLike,
    *,
    bounds: Bounds,
    n_classes: int,
    epsilon: float,
    rng: np.random.Generator,
    n_bins: int = NB_BINS,
    oracle: str | None = None,
    scaling: str = COUNT_SCALING,
) -> tuple[np.ndarray, int]:
    """Every row its own owner: one report each (:meth:`NaiveBayesEncoding.share`), debiased
    (:meth:`NaiveBayesEncoding.counts`); ``(counts (d, B, K), number of reports)``, the input of the fits."""
    enc = NaiveBayesEncoding(epsilon=epsilon, bounds=bounds, n_classes=n_classes, n_bins=n_bins, oracle=oracle)
    features, reports = enc.share(X, y, rng)
    return enc.counts(features, reports, scaling=scaling), int(features.size)


def ldp_naive_bayes(
    X: ArrayLike, y: ArrayLike, *, bounds: Bounds, smoothing: float = SMOOTHING, **release: Any
) -> NaiveBayesModel:
    """:func:`fit_naive_bayes` on :func:`ldp_counts` (``release``: its keywords)."""
    counts, n_reports = ldp_counts(X, y, bounds=bounds, **release)
    return fit_naive_bayes(counts, n_reports, bounds, smoothing=smoothing)
