"""SAMME boosting: learner weights, sample-weight updates, stop rules, the boosted model (SPEC §5).

Zhu, Zou, Rosset, Hastie, "Multi-class AdaBoost", Statistics and Its Interface 2009, Alg. 2
(SAMME); seed paper 002, Alg. 1 and Alg. 2. Reference implementation: scikit-learn
``AdaBoostClassifier`` (``_weight_boosting.py``, ``_boost_discrete`` and the loop in ``fit``).

Pieces, usable one by one by the networked round (where the error and weight sums come from a
secure sum over all owners) or together by the in-process :class:`SammeBoost`:

* :func:`samme_alpha` -- ``alpha = log((1 - err)/err) + log(K - 1)``; ``None`` when the learner
  is no better than chance (``err >= 1 - 1/K``); ``err <= 0`` uses ``e0 = 1e-10``, so
  :func:`max_alpha` bounds every weight SAMME gives.
* :func:`samme_decide` -- the stop rules, from the aggregated sums.
* :func:`samme_reweight` / :func:`samme_update` -- ``w_i <- w_i exp(alpha 1[miss_i])``, and renormalised.
* :class:`BoostedModel` -- weighted vote ``argmax_k sum_m alpha_m 1[T_m(x) = k]``, ties to the
  lowest class; ``to_dict`` / ``from_dict`` for saving and serving.

Difference from scikit-learn: on zero training error scikit-learn gives the learner weight 1;
SPEC §5 uses ``alpha`` at ``e0 = 1e-10`` (the learner then dominates the vote, as it should).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from privfed.common.errors import ConfigError, PrivfedError
from privfed.common.learners.logistic import LinearModel
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.stump import Stump

E0 = 1e-10
"""Error used for the learner weight when the weighted error is <= 0 (SPEC §5)."""

LEARNER_KINDS = {cls.kind: cls for cls in (Stump, NearestCentroidModel, LinearModel)}


def _check_n_classes(n_classes: object) -> int:
    if isinstance(n_classes, bool) or not isinstance(n_classes, Integral) or n_classes < 2:
        raise ConfigError(f"n_classes must be an int >= 2, got {n_classes!r}")
    return int(n_classes)


def samme_alpha(err: float, n_classes: int) -> float | None:
    """SAMME learner weight ``log((1 - err)/err) + log(K - 1)`` (Zhu et al. 2009, Alg. 2; SPEC §5).

    Returns ``None`` (reject the learner) when ``err >= 1 - 1/K``; ``err <= 0`` uses ``e0 = 1e-10``.
    """
    k = _check_n_classes(n_classes)
    if isinstance(err, bool) or not isinstance(err, Real) or not math.isfinite(err) or err > 1:
        raise ConfigError(f"err must be a finite number <= 1, got {err!r}")
    if err >= min(1.0 - 1.0 / k, (k - 1.0) / k):  # both roundings of chance level, e.g. 2/3 for K = 3
        return None
    e = err if err > 0 else E0
    return math.log((1.0 - e) / e) + math.log(k - 1.0)


def max_alpha(n_classes: int) -> float:
    """The largest learner weight SAMME gives for ``n_classes`` classes: :func:`samme_alpha` at error 0
    (``e0``), ``log((1 - e0) / e0) + log(K - 1)``; a public bound an owner checks a history against."""
    alpha = samme_alpha(0.0, n_classes)
    if alpha is None:  # cannot happen: error 0 is always better than chance
        raise ConfigError(f"no SAMME weight for n_classes={n_classes!r}")
    return alpha


def _check_weights(w: Any, miss: Any) -> tuple[np.ndarray, np.ndarray]:
    w = np.asarray(w, dtype=np.float64)
    miss = np.asarray(miss)
    if w.ndim != 1 or miss.shape != w.shape:
        raise ConfigError(f"w and miss must be 1-D of one length, got shapes {w.shape} and {miss.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError("w must be finite non-negative weights")
    return w, miss.astype(bool)


def samme_reweight(w: Any, miss: Any, alpha: float) -> np.ndarray:
    """``w_i exp(alpha 1[miss_i])``, not normalised.

    The networked round uses this on every owner, secure-sums the results and divides by the
    total (:func:`samme_update` with ``total``).
    """
    w, miss = _check_weights(w, miss)
    return w * np.exp(float(alpha) * miss)


def samme_update(w: Any, miss: Any, alpha: float, total: float | None = None) -> np.ndarray:
    """SAMME weight update with renormalisation (SPEC §5).

    Parameters
    ----------
    w : array (n,)
    miss : bool array (n,)
        ``1[y_i != T_m(x_i)]``.
    alpha : float
    total : float, optional
        Normaliser; default the sum of the reweighted ``w``. Pass the secure sum over all
        owners when ``w`` is one owner's part.
    """
    new = samme_reweight(w, miss, alpha)
    total = float(new.sum()) if total is None else float(total)
    if not math.isfinite(total) or total <= 0:
        raise ConfigError(f"weight total must be finite and > 0, got {total!r}")
    return new / total


class SammeStep(enum.Enum):
    """What to do with the learner just fitted."""

    KEEP = "keep"  # add it, continue
    KEEP_AND_STOP = "keep_and_stop"  # zero error: add it with alpha(e0), stop
    DISCARD_AND_STOP = "discard_and_stop"  # no better than chance, or unusable weights: drop it, stop


@dataclass(frozen=True)
class SammeDecision:
    step: SammeStep
    alpha: float | None
    error: float

    @property
    def kept_alpha(self) -> float:
        """``alpha`` of a kept learner (steps KEEP and KEEP_AND_STOP)."""
        if self.alpha is None:
            raise ConfigError(f"a {self.step.value} decision keeps no learner and has no alpha")
        return self.alpha


def samme_decide(err_sum: float, weight_sum: float, n_classes: int, *, n_kept: int) -> SammeDecision:
    """Apply SPEC §5's stop rules to one round's aggregated sums.

    Parameters
    ----------
    err_sum : float
        ``sum_i w_i 1[miss_i]`` over all rows (all owners).
    weight_sum : float
        ``sum_i w_i`` over all rows.
    n_classes : int
    n_kept : int
        Learners kept so far.

    Raises
    ------
    PrivfedError
        When the round would be discarded and no learner has been kept (scikit-learn raises
        here too: the ensemble cannot be fitted).
    """
    k = _check_n_classes(n_classes)
    if not math.isfinite(weight_sum) or weight_sum <= 0:
        decision = SammeDecision(SammeStep.DISCARD_AND_STOP, None, math.nan)
    else:
        err = float(err_sum) / float(weight_sum)
        alpha = samme_alpha(min(err, 1.0), k)
        if alpha is None:
            decision = SammeDecision(SammeStep.DISCARD_AND_STOP, None, err)
        else:
            decision = SammeDecision(SammeStep.KEEP_AND_STOP if err <= 0 else SammeStep.KEEP, alpha, err)
    if decision.step is SammeStep.DISCARD_AND_STOP and n_kept == 0:
        raise PrivfedError(
            f"the first base learner is no better than chance (weighted error {decision.error:.6g}, needs < "
            f"{1 - 1 / k:.6g} for K={k}) or the weight sum {weight_sum!r} is unusable: nothing to boost; "
            "use more rows per round, a larger epsilon or another base learner"
        )
    return decision


class BoostedModel:
    """SAMME ensemble: ``argmax_k sum_m alpha_m 1[T_m(x) = k]``, ties to the lowest class (SPEC §5).

    Parameters
    ----------
    learners : list
        Fitted base learners whose ``predict`` returns class indices 0..K-1
        (:class:`Stump`, :class:`NearestCentroidModel`, :class:`LinearModel` with default classes).
    alphas : list of float
    classes : array (K,), optional
        Labels of the class indices; ``arange(n_classes)`` by default.
    n_classes : int, optional
        Needed when ``classes`` is not given.
    """

    kind = "samme"

    def __init__(self, learners: Iterable[Any], alphas: Any, classes: Any = None, n_classes: int | None = None) -> None:
        self.learners = list(learners)
        self.alphas = np.asarray(alphas, dtype=np.float64).reshape(-1)
        if len(self.learners) != self.alphas.shape[0]:
            raise ConfigError(f"{len(self.learners)} learners but {self.alphas.shape[0]} alphas")
        if not np.all(np.isfinite(self.alphas)):
            raise ConfigError("alphas must be finite")
        if classes is None:
            if n_classes is None:
                raise ConfigError("pass classes or n_classes")
            classes = np.arange(_check_n_classes(n_classes))
        self.classes = np.asarray(classes)
        if self.classes.ndim != 1 or self.classes.shape[0] < 2:
            raise ConfigError(f"classes must be 1-D with at least 2 entries, got shape {self.classes.shape}")

    def votes(self, X: Any) -> np.ndarray:
        """``(n, K)`` array of summed learner weights per class."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        n, k = X.shape[0], self.classes.shape[0]
        votes = np.zeros((n, k))
        rows = np.arange(n)
        for learner, alpha in zip(self.learners, self.alphas):
            idx = np.asarray(learner.predict(X), dtype=np.int64)
            votes[rows, idx] += alpha
        return votes

    def predict(self, X: Any) -> np.ndarray:
        return self.classes[np.argmax(self.votes(X), axis=1)]

    def score(self, X: Any, y: Any) -> float:
        """Accuracy on ``(X, y)``."""
        return float(np.mean(self.predict(X) == np.asarray(y)))

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "classes": self.classes.tolist(),
            "alphas": self.alphas.tolist(),
            "learners": [learner.to_dict() for learner in self.learners],
        }

    @classmethod
    def from_dict(cls, data: dict) -> BoostedModel:
        if data.get("kind") != cls.kind:
            raise ConfigError(f"not a {cls.kind} model: kind={data.get('kind')!r}")
        learners = []
        for item in data["learners"]:
            if item.get("kind") not in LEARNER_KINDS:
                raise ConfigError(f"unknown learner kind {item.get('kind')!r}; known: {sorted(LEARNER_KINDS)}")
            learners.append(LEARNER_KINDS[item["kind"]].from_dict(item))
        return cls(learners, data["alphas"], data["classes"])


class SammeBoost:
    """In-process SAMME driver (SPEC §5), used by the experiments.

    Parameters
    ----------
    base_fit : callable ``(X, y, w, m) -> learner``
        Fits round ``m``'s base learner (0-based) with sample weights ``w`` (sum 1). An LDP
        simulation closes over its owner groups and uses round ``m``'s fresh group, so every
        owner releases once (seed 002 §3.4.1); the weighted error is then computed over *all*
        rows, as Alg. 2's secure sum does. ``learner.predict`` must return class indices.
    n_estimators : int >= 1
    n_classes : int >= 2

    Attributes (after ``fit``)
    --------------------------
    model_ : BoostedModel
    errors_ : list of float
        Weighted training error of every fitted learner, discarded ones included.
    stop_reason_ : str
        ``"n_estimators"``, ``"zero_error"``, ``"no_better_than_chance"`` or ``"weights"``.
    """

    base_fit: Callable[..., Any]
    n_estimators: int
    n_classes: int

    def __init__(self, base_fit: Callable[..., Any], n_estimators: int, n_classes: int) -> None:
        if not callable(base_fit):
            raise ConfigError(f"base_fit must be callable, got {base_fit!r}")
        if isinstance(n_estimators, bool) or not isinstance(n_estimators, Integral) or n_estimators < 1:
            raise ConfigError(f"n_estimators must be an int >= 1, got {n_estimators!r}")
        self.base_fit = base_fit
        self.n_estimators = int(n_estimators)
        self.n_classes = _check_n_classes(n_classes)

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SammeBoost:
        y = np.asarray(y)
        n = y.shape[0]
        if y.ndim != 1 or n == 0 or not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= self.n_classes:
            raise ConfigError(f"y must be a non-empty 1-D array of class indices in 0..{self.n_classes - 1}")
        w = np.full(n, 1.0 / n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        w, _ = _check_weights(w, y)
        if w.sum() <= 0:
            raise ConfigError("sample_weight must have a positive sum")
        w = w / w.sum()
        learners: list[Any] = []
        alphas: list[float] = []
        self.errors_: list[float] = []
        self.stop_reason_ = "n_estimators"
        for m in range(self.n_estimators):
            learner = self.base_fit(X, y, w, m)
            miss = np.asarray(learner.predict(X)) != y
            decision = samme_decide(float(np.dot(w, miss)), float(w.sum()), self.n_classes, n_kept=len(learners))
            self.errors_.append(decision.error)
            if decision.step is SammeStep.DISCARD_AND_STOP:
                self.stop_reason_ = "no_better_than_chance"
                break
            learners.append(learner)
            alphas.append(decision.kept_alpha)
            if decision.step is SammeStep.KEEP_AND_STOP:
                self.stop_reason_ = "zero_error"
                break
            w = samme_reweight(w, miss, decision.kept_alpha)
            total = float(w.sum())
            if not math.isfinite(total) or total <= 0:
                self.stop_reason_ = "weights"
                break
            w = w / total
        self.model_ = BoostedModel(learners, alphas, n_classes=self.n_classes)
        return self

    def predict(self, X: Any) -> np.ndarray:
        return self.model_.predict(X)
