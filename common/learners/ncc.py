"""Nearest centroid classifier built from perturbed rows (seed paper 002, §3.5.1 "Local Samples").

Owner side, :func:`ncc_share`: every row is mapped to ``[-1, 1]^d`` by the public bounds
(SPEC §4) and perturbed once by a d-dimensional LDP mechanism (Alg. 4 / PM by default; SPEC §3.2).
The label goes with it, either in the clear (the paper's scheme) or through k-ary randomized
response. Coordinator side, :func:`ncc_centroids`: per-class means of the reports, debiased for
randomized response, mapped back to data space. Prediction assigns the class of the nearest
centroid (Euclidean distance in data space, as scikit-learn's ``NearestCentroid``).

Privacy. An owner's rows are disjoint and each is perturbed once with the feature budget, so
by parallel composition the owner's release is ``eps_features``-LDP *per row* (row-level
guarantee). With ``labels="rr"`` the label costs ``eps_labels`` more, so the row-level guarantee
is ``eps_features + eps_labels = epsilon``. With ``labels="joint"`` one report covers the
features, the label and the weight at ``epsilon``. With ``labels="clear"`` the label itself is
released unprotected: only the features are covered by ε. This reproduces the paper but is
outside DESIGN's allowlist ("labels only through a mechanism"); networked runs use ``"joint"`` or ``"rr"``.

Labels (issue 22). ``--task ncc``'s default, ``labels="auto"`` (:func:`resolve_labels`), is ``"joint"`` below
ε = :data:`JOINT_BELOW` and ``"rr"`` from it on, chosen on validation splits (``privfed experiment tabular
--validate --learners ncc --splits 20 --epsilon E``, six real tables, through the federation's code; fraction of
the majority-to-non-private gap closed, joint / rr at the label share 0.4): ε = 1 -0.06 / -0.37, 2 0.23 / -0.18,
3 0.45 / 0.12, 4 0.50 / 0.37, 5 0.535 / 0.529, 6 0.535 / 0.607, 7 0.533 / 0.664, 8 0.535 / 0.676. The joint
report's label costs nothing of the features' ε and its class totals come from all reports, which wins while
ε is small; it carries one feature's sign per row, a floor it keeps at any ε (flat from ε = 5), where rr's
perturbed rows keep improving.

Few owners (issue 22: wine, 142 owners, 13 features, 3 classes, at ε = 5). Measured on one split, 200 noise
draws (a throwaway script): each estimated centroid misses the true one by a squared distance of 2.5-4.7 in
the unit space, as large as the squared distances between the true centroids (2.0-4.7); features alone at
ε·0.6 miss by 1.3-2.4 (half of it Alg. 4's sampling term ``(d - 1) t_j^2``, half PM's noise), and the
debiasing of the labels' randomized response multiplies that by about 2 (``1 / (p - q)^2``). A split whose
smallest class's centroid is thrown outwards never predicts that class: the collapsed splits of the
benchmark (0.25-0.39). Post-processing that costs no ε did not help on validation splits: subtracting each
class's estimated noise ``tr Var(centroid)`` from its squared distances (unbiased distances) closed -0.13
of the gap against 0.25 (6 splits), James-Stein shrinkage of the centroids towards their mean 0.04; the label
share stays 0.4 (24 splits: best at ε = 1, 5 and 8, 0.02 below 0.5's at 3). ``labels="joint"`` closes more of
the gap at small ε ("Labels" above).

At ε = 5 (issue 22's ncc goal). LDP gradient descent gained by reporting one attribute at the whole ε
(:mod:`~privfed.common.learners.ldp_gd`); the rows here already do: the features' 0.6 ε = 3 gives Alg. 4's
``k = floor(3 / 2.5) = 1`` (so for every ε < 8.33), and ``k = 1`` is the least variance per coordinate, ``(d/k)
V_{ε/k}(t) + (d/k - 1) t^2``: at d = 13 and ε = 3, 2.7 / 4.1 / 18.4 for ``t`` = 0 / 0.3 / 1 against 8.9 / 9.9 /
20.2 for ``k = 2``. The label share at ε = 5 alone is flat (``privfed experiment tabular --validate --learners ncc
--epsilon 5 --splits 30``: 0.3 -> 0.508, 0.4 -> 0.504, 0.5 -> 0.498, 0.6 -> 0.461). What is left of the goal's
misses is the splits' spread: on 30 other splits (``privfed experiment tabular --learners ncc --epsilon 5 --seed
100 --splits 30 --datasets wine,star98,fair``) ncc at ε = 5 is above the target by 0.069 ± 0.049 on wine and
short of it by 0.001 ± 0.042 on star98, with a standard deviation over splits of 0.13 and 0.11 (a 10-split mean
moves by about ± 0.09 and ± 0.08); on fair the target lies above the non-private nearest centroid itself: the
served model's class priors (:mod:`~privfed.common.learners.ncc_model`) take it there. With 5 noise draws per
reported split (``privfed experiment tabular --learners ncc --datasets wine,fair --epsilon 5 --noise-draws 5``,
before the priors) wine is 0.759 ± 0.048, 0.076 above its target: its single-draw miss is the draw's luck."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from numbers import Real

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners.ncc_model import centroids_from_sums
from privfed.common.learners.ncc_rr import debiased_class_totals
from privfed.common.mechanisms import KaryRandomizedResponse, Mechanism
from privfed.common.validation import check_int, check_positive

LABEL_SCHEMES = ("clear", "rr", "joint")
#: Default share of a row's ε for its label under ``labels="rr"``: 0.4, chosen on validation splits of six
#: real tabular sets (``privfed experiment tabular --validate``; fraction of the majority-to-non-private gap
#: closed over ε 1-8: 0.2 -> 0.03, 0.3 -> 0.21, 0.4 -> 0.23, 0.5 -> 0.18, 0.6 -> 0.13; it was 0.2).
LABEL_FRACTION = 0.4


#: ``--task ncc --labels auto``: ``"joint"`` below this ε, ``"rr"`` from it on (:func:`resolve_labels`).
JOINT_BELOW = 5.5


def resolve_labels(labels: str, epsilon: float) -> str:
    """``--task ncc``'s (and ``LdpNearestCentroid``'s) label scheme at ``epsilon``: ``labels`` itself, or for ``"auto"`` (the default) ``"joint"``
    below :data:`JOINT_BELOW` and ``"rr"`` from it on (at ε = ∞ both send the exact labels). Chosen on
    validation splits (module docstring, "Labels")."""
    if labels != "auto":
        return labels
    return "joint" if check_row_epsilon(epsilon) < JOINT_BELOW else "rr"


def check_row_epsilon(epsilon: object) -> float:
    return check_positive(epsilon, name="epsilon", allow_inf=True, fix="math.inf for a non-private run")


def split_label_budget(
    epsilon: float, labels: str = "clear", label_fraction: float = LABEL_FRACTION
) -> tuple[float, float]:
    """Split one row's budget between its features and its label.

    Parameters
    ----------
    epsilon : float > 0, or ``math.inf``
        Row-level budget.
    labels : {"clear", "rr", "joint"}
        ``"clear"``: the paper's scheme (§3.5.1), the label travels unperturbed next to the
        perturbed row and all of ε goes to the features. ``"rr"``: the label goes through k-ary
        randomized response with ``label_fraction * epsilon``. ``"joint"``: one report of the
        (label, sign) pair at the whole ε (:class:`~privfed.common.learners.ncc_joint.JointLabelEncoding`); there is no separate label
        budget, so the split is ``(epsilon, 0.0)`` as for ``"clear"``, but the label is protected.
    label_fraction : float in (0, 1)
        Share of ε spent on the label under ``"rr"``; :data:`LABEL_FRACTION` by default (chosen on
        validation splits: the label is one of K values while the row has d coordinates, but a label
        flipped by randomized response moves a whole row to the wrong class).

    Returns
    -------
    (eps_features, eps_labels) : tuple of float
        ``eps_labels`` is ``0.0`` for ``"clear"``: no budget is spent on the label, and the
        label is *not* protected; ``0.0`` for ``"joint"`` too, whose one report spends
        ``eps_features = epsilon`` on the label and the features together. ``epsilon = inf`` gives ``(inf, inf)`` under ``"rr"``.
    """
    epsilon = check_row_epsilon(epsilon)
    if labels not in LABEL_SCHEMES:
        raise ConfigError(f"labels must be one of {LABEL_SCHEMES}, got {labels!r}")
    if isinstance(label_fraction, bool) or not isinstance(label_fraction, Real) or not 0 < label_fraction < 1:
        raise ConfigError(f"label_fraction must be a number in (0, 1), got {label_fraction!r}")
    if labels in ("clear", "joint"):
        return epsilon, 0.0
    return epsilon * (1.0 - label_fraction), epsilon * label_fraction


def check_labels(y: ArrayLike, n: int, n_classes: int | None = None) -> np.ndarray:
    y = np.asarray(y)
    if y.shape != (n,):
        raise ConfigError(f"labels must have shape ({n},), got {y.shape}")
    if n and not np.issubdtype(y.dtype, np.integer):
        raise ConfigError(f"labels must be integer class indices 0..K-1, got dtype {y.dtype}")
    y = y.astype(np.int64)
    if n and (y.min() < 0 or (n_classes is not None and y.max() >= n_classes)):
        top = "K-1" if n_classes is None else n_classes - 1
        raise ConfigError(f"labels must lie in 0..{top}, got range [{y.min()}, {y.max()}]")
    return y


def scaled_weights(sample_weight: ArrayLike, weight_bound: object, n: int) -> np.ndarray:
    """Each row's weight clipped to the public ``weight_bound`` and scaled to ``u = w / weight_bound`` in [0, 1]."""
    bound = check_positive(weight_bound, name="weight_bound", fix="a public bound is required with sample_weight")
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError(f"sample_weight must be ({n},) finite non-negative numbers")
    return np.minimum(w, bound) / bound


@dataclass(frozen=True)
class NccShare:
    """What one owner releases for NCC: perturbed rows and their (reported) labels.

    Attributes
    ----------
    reports : ndarray (m, d) or (m, d + 1), float64
        Mechanism outputs in t-space. The extra last column, present for weighted shares,
        carries ``2u - 1`` for the row's scaled weight ``u`` (see :func:`ncc_share`).
    labels : ndarray (m,), int64
        Labels as released (true labels for ``"clear"``, k-RR outputs for ``"rr"``, ``0..K`` with ⊥: ``ncc_rr``).
    """

    reports: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        reports = np.asarray(self.reports, dtype=np.float64)
        if reports.ndim != 2:
            raise ConfigError(f"NccShare reports must be 2-D (rows, columns), got shape {reports.shape}")
        if not np.all(np.isfinite(reports)):
            raise ConfigError("NccShare reports must be finite numbers")
        object.__setattr__(self, "reports", reports)
        object.__setattr__(self, "labels", check_labels(self.labels, reports.shape[0]))

    @classmethod
    def concat(cls, shares: NccShare | Iterable[NccShare]) -> NccShare:
        """One share holding the rows of all ``shares`` (all with the same number of columns)."""
        shares = [shares] if isinstance(shares, NccShare) else list(shares)
        if not shares:
            raise ConfigError("no NCC shares to aggregate")
        widths = {s.reports.shape[1] for s in shares}
        if len(widths) != 1:
            raise ConfigError(f"NCC shares have different widths {sorted(widths)}; mixed weighted/unweighted shares?")
        return cls(np.concatenate([s.reports for s in shares]), np.concatenate([s.labels for s in shares]))


def ncc_share(
    X: ArrayLike,
    y: ArrayLike,
    *,
    bounds: Bounds,
    mechanism: Mechanism,
    label_rr: KaryRandomizedResponse | None = None,
    rng: np.random.Generator,
    sample_weight: ArrayLike | None = None,
    weight_bound: float | None = None,
) -> NccShare:
    """Owner side of NCC: perturb each row once (seed 002 §3.5.1; Alg. 4 for the rows).

    Parameters
    ----------
    X : array (m, d)
        The owner's rows in data space; clipped to ``bounds`` and mapped to ``[-1, 1]``.
    y : int array (m,)
        Class indices 0..K-1.
    bounds : Bounds
        Public feature bounds.
    mechanism : Mechanism
        Built for ``epsilon = eps_features`` and ``d`` features (``d + 1`` when weighted).
    label_rr : KaryRandomizedResponse or None
        Randomized response for the labels (``labels="rr"``); None sends them in the clear.
    rng : numpy.random.Generator
    sample_weight : array (m,) of non-negative weights, optional
        Boosting weights (the paper's "weighted sample"). Each weight is clipped to
        ``weight_bound`` and scaled to ``u = w / weight_bound`` in ``[0, 1]``; the row sent to the
        mechanism is ``(u * t, 2u - 1)``, so the weight is protected by the same mechanism.
        The coordinator estimates ``sum u t`` and ``sum u`` per class, and the ratio is the
        weighted centroid (``weight_bound`` cancels). Costs one extra coordinate.
    weight_bound : float > 0
        Public upper bound on one row's weight; required with ``sample_weight``.

    Returns
    -------
    NccShare
        Everything that leaves the owner.

    Notes
    -----
    Rows are disjoint, each is perturbed once: parallel composition gives a row-level
    guarantee of ``mechanism.epsilon`` (+ ``label_rr.epsilon`` for the label).
    """
    t = bounds.to_unit(np.atleast_2d(np.asarray(X, dtype=np.float64)))
    y = check_labels(y, t.shape[0], None if label_rr is None else label_rr.n_classes)
    if sample_weight is not None:
        u = scaled_weights(sample_weight, weight_bound, y.shape[0])
        t = np.hstack([u[:, None] * t, 2.0 * u[:, None] - 1.0])
    if mechanism.d != t.shape[1]:
        raise ConfigError(
            f"mechanism has d={mechanism.d} but each row sent has {t.shape[1]} coordinates; "
            f"build it with d={t.shape[1]}"
        )
    if t.shape[0] == 0:
        return NccShare(t, y)
    reports = mechanism.privatize(t, rng)
    labels = y if label_rr is None else label_rr.privatize(y, rng)
    return NccShare(reports, labels)


def ncc_class_sums(
    shares: NccShare | Iterable[NccShare], *, n_classes: int, d: int, label_rr: KaryRandomizedResponse | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Coordinator side: unbiased per-class sums of the t-space rows and per-class counts.

    Parameters
    ----------
    shares : NccShare or iterable of NccShare
    n_classes : int >= 2
    d : int
        Number of features; shares with ``d + 1`` columns are weighted (see :func:`ncc_share`).
    label_rr : KaryRandomizedResponse or None
        The randomized response the owners used, over ``K`` values or ``K + 1`` with ⊥ (dummies) last; its
        outputs are debiased here and ⊥ dropped (:func:`~privfed.common.learners.ncc_rr.debiased_class_totals`).

    Returns
    -------
    sums : ndarray (K, d)
        Estimates of ``sum_{i in class k} u_i t_i`` (``u_i = 1`` when unweighted).
    counts : ndarray (K,)
        Estimates of ``sum_{i in class k} u_i`` (row counts when unweighted). May be <= 0
        under randomized response or weighted noise.
    """
    n_classes = check_int(n_classes, name="n_classes", minimum=2)
    values = n_classes if label_rr is None else label_rr.n_classes  # K, or K + 1 with ⊥
    if values not in (n_classes, n_classes + 1):
        raise ConfigError(f"label_rr has {values} values but n_classes={n_classes} (K, or K + 1 with ⊥)")
    share = NccShare.concat(shares)
    m, cols = share.reports.shape
    if cols not in (d, d + 1):
        raise ConfigError(f"NCC reports have {cols} columns; expected d={d} (unweighted) or d+1={d + 1} (weighted)")
    if m and share.labels.max() >= values:
        raise ConfigError(f"reported label {share.labels.max()} is outside 0..{values - 1}")
    totals = np.zeros((values, cols))
    np.add.at(totals, share.labels, share.reports)
    if cols == d:
        counts = np.bincount(share.labels, minlength=values).astype(np.float64)
    else:  # weight column carries 2u - 1: sum_i u_i = (sum_i report_i + n_k) / 2
        counts = (totals[:, d] + np.bincount(share.labels, minlength=values)) / 2.0
    if label_rr is None:
        return totals[:, :d], counts
    return debiased_class_totals(label_rr, totals[:, :d], counts, n_classes)


def ncc_centroids(
    shares: NccShare | Iterable[NccShare],
    *,
    n_classes: int,
    bounds: Bounds,
    label_rr: KaryRandomizedResponse | None = None,
) -> np.ndarray:
    """Coordinator side of NCC: class centroids in data space (seed 002 §3.5.1).

    ``centroid_k = sum_k / count_k`` from :func:`ncc_class_sums`, mapped back by
    ``bounds.from_unit`` and clipped to the bounds box. Clipping is post-processing and can
    only move an estimate closer to the true centroid, which lies in the box (SPEC §4).

    Weighted shares: each row's scaled weight ``u`` is at most 1, so a class's weight total is at
    most its number of rows: ``count_k`` is first clipped to the rows reported with label k
    (clear labels), or to all rows reported (randomized response, whose per-class counts are
    estimates). Like the box clip, this is post-processing that can only move the estimate
    towards the truth. It matters because ``count_k`` comes from one coordinate of ``d + 1``
    (Alg. 4 samples one coordinate per row at these ε), so it is much noisier than the label
    count; measured on boosted NCC (``privfed experiment boosted-ncc --datasets mnist-box
    --labels clear --runs 30``, the same seeds with and without it), the clip lowers the test
    misclassification after round 1 / round 10 from 0.854 / 0.787 to 0.846 / 0.772 at ε = 3 and
    from 0.747 / 0.657 to 0.734 / 0.643 at ε = 5 (standard errors about 0.01).

    A class whose estimated count is not positive (no rows, or randomized-response/weight
    noise) falls back to the global mean of all reports; if the global count is not positive
    either, to the centre of the bounds. (Under randomized response with many classes and a
    small ε the counts of several classes go negative; they then share the global mean, the
    point nearest to most rows, and one class is predicted for every row: a symptom of the
    label noise, not a fault of the fallback, see :mod:`privfed.deploy.experiments.boosting_curves`.)

    Returns
    -------
    ndarray (K, d)
    """
    return centroids_from_sums(*ncc_totals(shares, n_classes=n_classes, d=bounds.d, label_rr=label_rr), bounds)


def ncc_totals(
    shares: NccShare | Iterable[NccShare], *, n_classes: int, d: int, label_rr: KaryRandomizedResponse | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | float]:
    """:func:`ncc_class_sums` and the cap of each class total: the rows reported with that label (clear labels),
    or all rows reported (randomized response, whose per-class counts are estimates; with ⊥ dummies among them
    still a cap, only looser); :func:`ncc_centroids`."""
    shares = NccShare.concat(shares)
    sums, counts = ncc_class_sums(shares, n_classes=n_classes, d=d, label_rr=label_rr)
    reported = np.bincount(shares.labels, minlength=n_classes).astype(np.float64)
    return sums, counts, reported if label_rr is None else float(shares.labels.shape[0])
