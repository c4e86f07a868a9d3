"""Adaptive, public allocation of the marginal reports to features (issue 22, bdt at ε = 3).

:class:`~privfed.common.learners.naive_bayes.NaiveBayesEncoding` has each owner draw the one feature it
reports uniformly, so every feature gets about ``N / d`` reports, though AdaBoost-10 uses at most ten
features. Here the owners are split into two phases, each owner in exactly one (one report, one ledger
entry, as before): phase 1, a public fraction of them, draw uniformly; the coordinator scores each feature
from those reports alone (:func:`feature_scores`: the error reduction of the feature's best stump on its
smoothed, debiased (bin, class) marginal, post-processing of ε-LDP reports) and hands the others a public
distribution over the features (:func:`allocation`: a floor spread evenly, the rest in proportion to a power
of the scores), from which each phase-2 owner draws its feature with its own generator. CALM (Zhang, Wang,
Li, He, Jha, Ding, CCS 2018) assigns each user one marginal independently of the data; here the assignment is
made two-stage, and the estimate is Horvitz and Thompson's (JASA 1952): each report's unbiased cell support
([WBLJ17] eq. 1) divided by the probability that its owner drew that feature (:meth:`NaiveBayesEncoding.counts`
with ``feature_probs``), so each phase's sum is an unbiased estimate of the (bin, class) histogram of its owners,
and their sum of all owners' (``tests/statistical/test_feature_allocation_stat.py``). ``evidence`` then scales
each feature to the reports it expects, so the fits' fixed pseudo-counts shrink a rarely drawn feature more.

Privacy would be unchanged: the feature an owner draws is independent of its data given the public
distribution, which is a function of other owners' ε-LDP reports only, and the one oracle report that follows
costs ε as before. A coordinator's distribution can only choose which feature's marginal an owner reports, as
the feature in the clear already shows; the encoding refuses one that is not a distribution over the ``d``
features (:func:`~privfed.common.learners.naive_bayes.check_feature_probs`: wrong length, NaN, negative, not
summing to 1). All mass on one feature is harmless (tested).

Measured, in process only (``privfed experiment tabular --validate --learners mbdt-alloc``, 2 x 60 validation
splits; README, "Tried and not kept"): it does not move bdt's ε = 3 gap on the sets that miss the goal
(star98 leans worse), so the federation does not run it: no task field carries the distribution.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.naive_bayes import NaiveBayesEncoding, smoothed_marginals
from privfed.common.validation import check_positive


def feature_scores(counts: ArrayLike, n_reports: int, bounds: Bounds, **smoothing: Any) -> np.ndarray:
    """Per feature ``(d,)``: the majority's error minus the error of the feature's best stump on the bins' inner
    edges, on the feature's (bin, class) joint ``P(y) P(bin | y)`` of :func:`smoothed_marginals` (its keywords:
    ``smoothing``, ``shrink_to``). Post-processing of the reports behind ``counts``; >= 0."""
    tables, prior = smoothed_marginals(counts, n_reports, bounds, **smoothing)
    joint = tables * prior[None, None, :]  # (d, B, K)
    above = np.cumsum(joint[:, ::-1], axis=1)[:, ::-1][:, 1:]  # (d, B - 1, K): bins >= b
    below = prior[None, None, :] - above
    error = 1.0 - below.max(axis=2) - above.max(axis=2)  # (d, B - 1)
    return np.maximum((1.0 - prior.max()) - error.min(axis=1), 0.0)


def allocation(scores: ArrayLike, *, floor: float, power: float = 1.0) -> np.ndarray:
    """The public distribution ``floor / d + (1 - floor) s_j^power / sum s^power`` over the ``d`` features
    (uniform when every score is 0); ``floor`` in (0, 1] keeps every feature drawable."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or not np.all(np.isfinite(s)) or np.any(s < 0.0):
        raise ConfigError("scores must be finite values >= 0, one per feature")
    if not 0.0 < floor <= 1.0:
        raise ConfigError(f"floor must be in (0, 1], got {floor!r}")
    weight = s ** check_positive(power, name="power")
    share = weight / weight.sum() if weight.sum() > 0 else np.full(s.size, 1.0 / s.size)
    p = floor / s.size + (1.0 - floor) * share
    return p / p.sum()


def two_phase_counts(
    enc: NaiveBayesEncoding,
    X: ArrayLike,
    y: ArrayLike,
    rng: np.random.Generator,
    *,
    phase1_fraction: float,
    floor: float,
    power: float = 1.0,
    evidence: bool = False,
    **smoothing: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Every row its own owner, in process: ``(counts (d, B, K) of all owners, the phase-2 distribution)``
    (module docstring). A uniformly random ``ceil(phase1_fraction N)`` owners report a uniform feature; the
    others draw from :func:`allocation` of :func:`feature_scores` of phase 1's counts (``smoothing``: its
    keywords). Each phase's counts are its Horvitz-Thompson estimate; their sum estimates all owners'.

    ``evidence``: each feature's sum is then multiplied by ``d e_j / N``, ``e_j = m / d + (N - m) p_j`` the reports
    it expects (public): the magnitude the uniform d-scaling gives a feature of ``e_j`` reports, so the fits' fixed
    pseudo-counts shrink a rarely drawn feature more, as they do there (no longer unbiased; the fits normalise
    each feature's class columns, so only the shrinkage and the class prior's weights change)."""
    X, y = np.asarray(X), np.asarray(y)
    n = X.shape[0]
    if not 0.0 < phase1_fraction < 1.0:
        raise ConfigError(f"phase1_fraction must be in (0, 1), got {phase1_fraction!r}")
    order = rng.permutation(n)
    m = min(max(int(np.ceil(phase1_fraction * n)), 1), n - 1)
    first, second = order[:m], order[m:]
    j1, r1 = enc.share(X[first], y[first], rng)
    counts = enc.counts(j1, r1)
    probs = allocation(feature_scores(counts, m, enc.bounds, **smoothing), floor=floor, power=power)
    j2, r2 = enc.share(X[second], y[second], rng, feature_probs=probs)
    counts = counts + enc.counts(j2, r2, feature_probs=probs)
    if evidence:
        counts = counts * (enc.d * (m / enc.d + (n - m) * probs) / n)[:, None, None]
    return counts, probs
