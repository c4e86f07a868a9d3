"""scikit-learn estimators that simulate a federation in one process (seed paper 002, §3.5).

They wrap the owner-side shares and coordinator-side aggregates of :mod:`privfed.common.learners`
in ``fit``/``predict`` for experiments and the scikit-learn estimator checks. This is the only
learner module that imports scikit-learn (and with it pandas): an owner node never imports it
(issue 10, "a lean owner node"; ``tests/unit/test_owner_imports.py``).
"""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners import resolve_bounds, resolve_rng
from privfed.common.learners.ldp_gd import LdpGradientDescent
from privfed.common.learners.logistic import (
    DEFAULT_PARAM_BOUND,
    LinearModel,
    fit_local_logistic,
    lr_aggregate,
    lr_share,
    n_parameters,
)
from privfed.common.learners.ncc import (
    LABEL_FRACTION,
    LABEL_SCHEMES,
    ncc_share,
    ncc_totals,
    resolve_labels,
    split_label_budget,
)
from privfed.common.learners.ncc_joint import joint_encoding
from privfed.common.learners.ncc_model import NearestCentroidModel
from privfed.common.learners.ncc_rr import label_response
from privfed.common.mechanisms import MECHANISMS, make_mechanism


class InvalidEstimatorParameter(ConfigError, InvalidParameterError):
    """A bad estimator parameter: privfed's one-line :class:`ConfigError`, and scikit-learn's
    ``InvalidParameterError`` (its estimator checks expect that type)."""


def _fit_inputs(
    estimator: BaseEstimator, X: ArrayLike, y: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Bounds]:
    """What every estimator's ``fit`` starts with: validated parameters and data, class indices
    ``y_idx`` into ``classes`` (at least two), and the public bounds."""
    try:
        estimator._validate_params()
    except InvalidParameterError as error:
        raise InvalidEstimatorParameter(str(error)) from None
    X, y = validate_data(estimator, X, y, dtype=np.float64)
    check_classification_targets(y)
    classes, y_idx = np.unique(y, return_inverse=True)
    if classes.shape[0] < 2:
        raise ConfigError(f"need at least 2 classes to fit, got one class: {classes.tolist()}")
    bounds = resolve_bounds(estimator.bounds, X.shape[1])
    _warn_of_clipping(X, bounds)
    return X, y_idx, classes, bounds


def _warn_of_clipping(X: np.ndarray, bounds: Bounds) -> None:
    """A ``UserWarning`` when values of ``X`` lie outside the public bounds: each release clips them there, so the
    model is another one than the rows suggest (walkthrough 15, W15-1: bounds of (0, 1) for a feature up to 60
    fitted in silence, and the loss looked like the privacy's). The rows are the caller's own: nothing leaves."""
    outside = (X < bounds.lo) | (X > bounds.hi)
    if not outside.any():
        return
    per_feature = outside.sum(axis=0)
    worst = [
        f"feature {j}: {int(per_feature[j])}" for j in np.argsort(-per_feature, kind="stable")[:3] if per_feature[j]
    ]
    warnings.warn(
        f"{int(outside.sum())} of {X.size} values ({outside.mean():.1%}) lie outside the public bounds and are clipped "
        f"to them before any release ({', '.join(worst)}{', ...' if np.count_nonzero(per_feature) > 3 else ''}); "
        "check the bounds are the features' documented ranges in the rows' own units",
        UserWarning,
        stacklevel=3,
    )


def _warn_if_no_better_than_majority(estimator: Any, X: np.ndarray, y_idx: np.ndarray) -> Any:
    """``estimator``, fitted; a ``UserWarning`` first if on its own training rows it is not above always answering
    their most common class by two standard errors (walkthrough 15, W15-8: ``LdpLogisticRegression(n_owners=10)``
    always answered the minority class, in silence, where ``privfed simulate`` warns). A local check of the caller's
    own rows, as ``score`` is: nothing is released."""
    majority = float(np.bincount(y_idx).max() / y_idx.shape[0])
    accuracy = float(np.mean(estimator.predict(X) == estimator.classes_[y_idx]))
    spread = 2.0 * math.sqrt(majority * (1.0 - majority) / y_idx.shape[0])
    if accuracy <= majority + spread:
        warnings.warn(
            f"the fitted model is no better than always answering the most common class on the rows it was fit on "
            f"(accuracy {accuracy:.3f} against {majority:.3f}): at epsilon={estimator.epsilon:g} the releases' noise "
            "drowned what the rows say; more owners (or rows), a larger epsilon or fewer features would help",
            UserWarning,
            stacklevel=3,
        )
    return estimator


def _softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax of scores (n, K); scores of shape (n,) are the two-class logit."""
    if scores.ndim == 1:
        scores = np.column_stack([np.zeros_like(scores), scores])
    z = np.exp(scores - scores.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


class LdpLogisticRegression(ClassifierMixin, BaseEstimator):
    """Logistic regression under LDP, simulated in-process.

    Rows are shuffled and split evenly among ``n_owners`` owners (as in the paper's §4.1). With
    ``solver="gd"`` (default, issue 22) the owners are split into groups, one per step of gradient
    descent, and each reports one perturbed gradient (:class:`~privfed.common.learners.ldp_gd.LdpGradientDescent`;
    Wang et al. ICDE 2019 §V): it learns with one row per owner. With ``solver="local"`` each owner runs
    :func:`fit_local_logistic` and :func:`lr_share`, and :func:`lr_aggregate` averages (seed 002 §3.5.2):
    it needs owners with many rows each.

    Parameters
    ----------
    epsilon : float > 0 or math.inf
        Each owner's budget for its one parameter vector.
    mechanism : {"pm", "hm", "duchi", "laplace"}
    param_bound : float > 0
        Public clip bound for every parameter. ``DEFAULT_PARAM_BOUND`` (4.0) by default, as
        ``privfed --param-bound``; larger bounds clip less but scale the noise up.
    C : float > 0
        Inverse regularisation strength of each local model (``solver="local"``).
    n_owners : int >= 1 or None
        Number of simulated owners (each needs at least one row); None: one row each.
    solver : {"gd", "local"}
    bounds : Bounds or (lo, hi)
        Public feature bounds. Required: ``None`` raises ``ConfigError`` in ``fit``.
    random_state : int, numpy Generator or None
        Seed (partition and noise); None uses a secure stream.

    Attributes
    ----------
    classes_, coef_ (K', d) unit space, intercept_ (K',), model_ (LinearModel), bounds_.
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="right")],
        "mechanism": [StrOptions(set(MECHANISMS))],
        "param_bound": [Interval(Real, 0, None, closed="neither")],
        "C": [Interval(Real, 0, None, closed="neither")],
        "n_owners": [Interval(Integral, 1, None, closed="left"), None],
        "solver": [StrOptions({"gd", "local"})],
        "bounds": [Bounds, tuple, None],
        "random_state": [Interval(Integral, 0, None, closed="left"), np.random.Generator, None],
    }

    def __init__(
        self,
        epsilon: float = 1.0,
        mechanism: str = "pm",
        param_bound: float = DEFAULT_PARAM_BOUND,
        C: float = 1.0,
        n_owners: int | None = None,
        solver: str = "gd",
        bounds: Bounds | tuple[float, float] | None = None,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.param_bound = param_bound
        self.C = C
        self.n_owners = n_owners
        self.solver = solver
        self.bounds = bounds
        self.random_state = random_state

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        X, y_idx, classes, bounds = _fit_inputs(self, X, y)
        k = classes.shape[0]
        n_owners = X.shape[0] if self.n_owners is None else self.n_owners
        if n_owners > X.shape[0]:
            raise ConfigError(f"n_owners={n_owners} exceeds the {X.shape[0]} rows; every owner needs a row")
        rng = resolve_rng(self.random_state)
        parts = np.array_split(rng.permutation(X.shape[0]), n_owners)
        if self.solver == "gd":
            gd = LdpGradientDescent(
                epsilon=float(self.epsilon), n_classes=k, bounds=bounds, mechanism=self.mechanism,
                param_bound=float(self.param_bound),
            )  # fmt: skip
            model = gd.fit(X, y_idx, owners=None if n_owners == X.shape[0] else parts, rng=rng)
            return self._fitted(model, classes, bounds, X, y_idx)
        mech = make_mechanism(self.mechanism, epsilon=float(self.epsilon), d=n_parameters(k, X.shape[1]))
        reports = np.stack(
            [
                lr_share(
                    fit_local_logistic(X[idx], y_idx[idx], bounds=bounds, n_classes=k, C=self.C),
                    param_bound=self.param_bound,
                    mechanism=mech,
                    rng=rng,
                )
                for idx in parts
            ]
        )
        return self._fitted(
            lr_aggregate(reports, param_bound=self.param_bound, n_classes=k, bounds=bounds), classes, bounds, X, y_idx
        )

    def _fitted(
        self, model: LinearModel, classes: np.ndarray, bounds: Bounds, X: np.ndarray, y_idx: np.ndarray
    ) -> Self:
        self.model_ = LinearModel(model.coef_, model.intercept_, bounds, classes)
        self.coef_, self.intercept_ = model.coef_, model.intercept_
        self.classes_, self.bounds_ = classes, bounds
        return _warn_if_no_better_than_majority(self, X, y_idx)

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self)
        return self.model_.decision_function(validate_data(self, X, reset=False, dtype=np.float64))

    def predict(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self)
        return self.model_.predict(validate_data(self, X, reset=False, dtype=np.float64))

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities (n, K) in the order of ``classes_``: the logistic model's softmax
        (sigmoid for two classes) of :meth:`decision_function` (seed 002 §3.5.2, eq. 3)."""
        return _softmax(self.decision_function(X))


class LdpNearestCentroid(ClassifierMixin, BaseEstimator):
    """Nearest centroid classifier under LDP, simulated in-process (seed 002 §3.5.1).

    Every row is its own data owner, and the rows go through the same functions as ``--task ncc``'s:
    :func:`ncc_share` then :func:`ncc_totals`, or under ``labels="joint"`` the
    :class:`~privfed.common.learners.ncc_joint.JointLabelEncoding` of :func:`joint_encoding` (its ``share``, the owner's;
    its ``totals``, the coordinator's), and the model of
    :meth:`~privfed.common.learners.ncc_model.NearestCentroidModel.from_sums` (centroids and class priors).

    Parameters
    ----------
    epsilon : float > 0 or math.inf
        Row-level budget (``inf``: no perturbation; the centroids are scikit-learn's ``NearestCentroid``'s, but
        not its decision rule: distances in the unit space of the bounds, weighed against the class priors).
    mechanism : {"pm", "hm", "duchi", "laplace"}
        Feature mechanism; "pm" is Alg. 4 with PM (SPEC §3.2), the paper's choice. Unused under "joint" (its
        report is its own mechanism).
    labels : {"auto", "joint", "rr", "clear"}
        How labels travel, as ``--task ncc --labels``: ``"auto"`` (default) is ``"joint"`` below ε = 5.5 and
        ``"rr"`` from it on (:func:`resolve_labels`); ``"joint"``, one (label, sign of a sampled feature) report
        per row at the whole ε; ``"rr"``, the rows at ``(1 - label_fraction) ε`` and the label by randomized
        response at the rest (:func:`split_label_budget`); ``"clear"`` is the paper's scheme, the label unprotected.
    label_fraction : float in (0, 1)
        Share of ε for the labels under ``"rr"``.
    bounds : Bounds or (lo, hi)
        Public feature bounds. Required: ``None`` raises ``ConfigError`` in ``fit``.
    random_state : int, numpy Generator or None
        Seed for a reproducible simulation; None uses a secure stream (not reproducible).

    Attributes
    ----------
    classes_, centroids_ (K, d) data space, model_ (NearestCentroidModel), bounds_,
    labels_ (the scheme ``labels`` resolved to), epsilon_features_, epsilon_labels_: what protects each row's
    features and its label (``"rr"``: the two parts of ε; ``"joint"``: ε both, one report covers the two;
    ``"clear"``: 0.0 for the label, unprotected).
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="right")],
        "mechanism": [StrOptions(set(MECHANISMS))],
        "labels": [StrOptions({"auto", *LABEL_SCHEMES})],
        "label_fraction": [Interval(Real, 0, 1, closed="neither")],
        "bounds": [Bounds, tuple, None],
        "random_state": [Interval(Integral, 0, None, closed="left"), np.random.Generator, None],
    }

    def __init__(
        self,
        epsilon: float = 1.0,
        mechanism: str = "pm",
        labels: str = "auto",
        label_fraction: float = LABEL_FRACTION,
        bounds: Bounds | tuple[float, float] | None = None,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.labels = labels
        self.label_fraction = label_fraction
        self.bounds = bounds
        self.random_state = random_state

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        X, y_idx, classes, bounds = _fit_inputs(self, X, y)
        labels = resolve_labels(self.labels, float(self.epsilon))
        eps_f, eps_l = split_label_budget(self.epsilon, labels, self.label_fraction)
        k = classes.shape[0]
        rng = resolve_rng(self.random_state)
        # One call over all rows = one call per single-row owner: the mechanisms are applied row by row.
        joint = joint_encoding(eps_f, k, X.shape[1]) if labels == "joint" else None  # None at ε = ∞: exact rows
        if joint is not None:
            totals = joint.totals(joint.share(X, y_idx, bounds=bounds, rng=rng))
        else:
            mech = make_mechanism(self.mechanism, epsilon=eps_f, d=X.shape[1])
            # one row per owner (max_owner_rows = 1): no owner pads, the K-ary k-RR (ncc_rr.pads)
            rr = label_response(eps_l, k, max_owner_rows=1) if labels == "rr" else None
            share = ncc_share(X, y_idx, bounds=bounds, mechanism=mech, label_rr=rr, rng=rng)
            totals = ncc_totals(share, n_classes=k, d=X.shape[1], label_rr=rr)
        self.classes_, self.labels_ = classes, labels
        # as --task ncc serves it: scale-aware, with the class priors (issue 22)
        self.model_ = NearestCentroidModel.from_sums(*totals, bounds, classes)
        self.centroids_ = self.model_.centroids
        self.bounds_ = bounds
        # joint: one report protects the label together with the features, at the whole ε
        self.epsilon_features_, self.epsilon_labels_ = eps_f, eps_f if labels == "joint" else eps_l
        return _warn_if_no_better_than_majority(self, X, y_idx)

    def predict(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.model_.predict(X)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities (n, K) in the order of ``classes_``: the softmax of the model's class log
        posteriors (:meth:`~privfed.common.learners.ncc_model.NearestCentroidModel.log_posterior`: classes as
        Gaussians of the model's variance around the centroids in the bounds' unit space, with the class priors;
        the argmax is :meth:`predict`)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return _softmax(self.model_.log_posterior(X))
