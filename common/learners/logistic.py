"""Logistic regression from perturbed local models (seed paper 002, §3.5.2 "Local Classifier", eqs. 3-4).

Owner side: :func:`fit_local_logistic` fits an L2-regularised logistic regression on the owner's
rows (eq. 3), :func:`lr_share` clips the parameter vector to ``[-param_bound, param_bound]``,
scales it to ``[-1, 1]`` and perturbs it once with a mechanism of dimension ``len(theta)``
(Alg. 4 / PM by default; SPEC §3.2). Coordinator side: :func:`lr_aggregate` averages the
perturbed vectors (eq. 4) and rescales them into a :class:`LinearModel`.

Imports. The scikit-learn estimator ``LdpLogisticRegression`` (in-process simulation) lives in
:mod:`privfed.common.learners.estimators` (it imports this module, not the other way round), so an
owner node that imports this module loads neither scikit-learn nor pandas, and the fit needs numpy
only (issue 10, "a lean owner node").

Privacy. The owner releases one vector, a function of all its rows, through an ε-LDP
mechanism whose input may be *any* point of ``[-1, 1]^p``; so the owner's whole data set is
protected at ε (which implies the row-level guarantee). Clipping makes the bound hold for
every input; ``param_bound`` is public configuration.

Timing. A coordinator sees when an owner's share arrives, so the fit's work must not depend on the rows:
the solver (:func:`privfed.common.learners.newton.newton_logistic`) runs a number of Newton steps fixed by
the row count and ``C`` whatever the rows, each the same work (``bench/timing_channels.py`` measures it).

Model space. The model works on rows mapped to ``[-1, 1]^d`` by the public bounds
(``t = bounds.to_unit(x)``, which clips). :class:`LinearModel` does that mapping in
``predict``; :attr:`LinearModel.linear_stage` gives the coefficients in that unit space.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.bounds import Bounds, flush_tiny
from privfed.common.errors import ConfigError
from privfed.common.learners.newton import newton_logistic
from privfed.common.mechanisms import Mechanism, estimate_mean
from privfed.common.validation import check_int, check_positive

#: The default public clip bound of the parameters, for the federation (``--param-bound``,
#: JobConfig) and the in-process estimator alike.
DEFAULT_PARAM_BOUND = 4.0


def n_parameters(n_classes: int, d: int) -> int:
    """Length of the parameter vector: ``d + 1`` for two classes, ``K (d + 1)`` one-vs-rest."""
    return (1 if check_int(n_classes, name="n_classes", minimum=2) == 2 else n_classes) * (d + 1)


def fit_local_logistic(
    X: ArrayLike,
    y: ArrayLike,
    *,
    bounds: Bounds,
    n_classes: int,
    C: float = 1.0,
    sample_weight: ArrayLike | None = None,
    weight_bound: float | None = None,
) -> np.ndarray:
    """Owner side: L2-regularised logistic regression on rows mapped to ``[-1, 1]`` (seed 002 eq. 3).

    Minimises, for each of the K' binary problems (K' = 1 for two classes: class 1 vs 0;
    K' = K one-vs-rest otherwise),

        C * sum_i s_i log(1 + exp(-y_i (w . t_i + b))) + ||w||^2 / 2 + b^2 / 2,

    by damped Newton steps in numpy (no scipy on an owner node; issue 10). The
    intercept is regularised like the weights (as liblinear with ``intercept_scaling=1``), so the
    optimum exists and is bounded even when the owner holds a single class -- scikit-learn's ``LogisticRegression`` refuses such data. The K' problems
    are separable and are solved jointly in one call.

    Why Newton: the objective is smooth and strongly convex (Hessian >= I), so Newton steps
    converge in a few iterations. scipy's L-BFGS-B calls OpenBLAS level-1 routines every
    iteration; on a loaded two-core host their thread hand-offs made a 60-row fit take ~150 ms
    and a (1000 x 100, K = 10) fit 30 s, against 2 ms and 1.7 s for trust-ncg (scipy, with
    Hessian-vector products), which this replaced so that an owner's first fit does not import
    scipy.optimize (~1 s on a busy core). Same objective, same optimum: the tests compare with
    scikit-learn's liblinear to 1e-5.

    Parameters
    ----------
    X : array (n, d)
        The owner's rows in data space (clipped and mapped by ``bounds``).
    y : int array (n,)
        Class indices 0..K-1.
    bounds : Bounds
    n_classes : int >= 2
    C : float > 0
        Inverse regularisation strength (scikit-learn's convention: multiplies the loss sum).
    sample_weight : array (n,) of non-negative weights, optional
        Boosting weights ``s_i`` (default 1), clipped to ``weight_bound``.
    weight_bound : float > 0, required with ``sample_weight``
        The public bound on the weights (a boosting run's share weight bound, as its stump and NCC shares
        clip to it): the Newton steps are those of the largest loss it allows, ``C * weight_bound``
        (:func:`~privfed.common.learners.newton.newton_logistic`), so how heavy the rows are does not show
        in the fit's work. SAMME weights reach ``2^512`` under a history the coordinator chooses; from ``C``
        alone a fit of rows a kept learner misclassifies took 22 steps where others took 12, in time.

    Returns
    -------
    theta : ndarray (K' (d + 1),)
        Rows ``(w_k, b_k)`` stacked row-major, see :func:`n_parameters`.
    """
    k = check_int(n_classes, name="n_classes", minimum=2)
    C = check_positive(C, name="C")
    t = bounds.to_unit(np.atleast_2d(np.asarray(X, dtype=np.float64)))
    n, d = t.shape
    y = np.asarray(y)
    # the same calls for no rows as for one (``initial``): an owner of none answers this fit's fallback of no
    # rows while a one-row owner draws it too (privfed.owner.compute, "Timing")
    integers = y.shape == (n,) and np.issubdtype(y.dtype, np.integer)
    lo, hi = (y.min(initial=0), y.max(initial=0)) if integers else (0, 0)
    if y.shape != (n,) or (n and (not integers or lo < 0 or hi >= k)):
        raise ConfigError(f"y must be {n} integer class indices in 0..{k - 1}")
    s = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if s.shape != (n,) or not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ConfigError(f"sample_weight must be {n} finite non-negative numbers")
    if sample_weight is None:
        weight_bound = 1.0
    weight_bound = check_positive(
        weight_bound, name="weight_bound", fix="a public bound is required with sample_weight"
    )
    s = np.minimum(s, weight_bound)
    k_out = 1 if k == 2 else k
    signs = np.where(y[:, None] == (np.arange(k_out) + (1 if k == 2 else 0))[None, :], 1.0, -1.0)  # (n, K')
    t1 = np.hstack([t, np.ones((n, 1))])
    # The K' problems are separable: one batch of K' problems sharing the rows.
    problems = np.broadcast_to(t1, (k_out, n, d + 1))
    return newton_logistic(problems, signs.T, np.broadcast_to(s, (k_out, n)), C, weight_bound=weight_bound).ravel()


def fit_local_logistic_many(
    X: np.ndarray, y: np.ndarray, *, bounds: Bounds, n_classes: int, C: float = 1.0, n_rows: ArrayLike | None = None
) -> np.ndarray:
    """:func:`fit_local_logistic` for ``G`` owners holding ``n`` rows each, in one batch of Newton
    steps (issue 27: a node hosting many owners fits them together; same objective, same optimum).

    Parameters
    ----------
    X : array (G, n, d), y : int array (G, n)
        Owner ``g``'s rows and class indices are ``X[g]``, ``y[g]``.
    n_rows : int array (G,), optional
        Owner ``g``'s rows are the first ``n_rows[g]`` of ``X[g]``; the rest are padding of zero weight, which
        adds exact zeros to the objective (owners of different counts in one public cell fit in one batch,
        :func:`~privfed.common.work_rows.work_rows`). Default: every row is the owner's.

    Returns
    -------
    theta : ndarray (G, K' (d + 1))
        Row ``g`` is owner ``g``'s :func:`fit_local_logistic` to the stopping tolerance.
    """
    k = check_int(n_classes, name="n_classes", minimum=2)
    C = check_positive(C, name="C")
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 3 or y.shape != X.shape[:2] or not np.issubdtype(y.dtype, np.integer):
        raise ConfigError(f"X must be (G, n, d) and y (G, n) integer class indices, got {X.shape} and {y.shape}")
    if y.size and (y.min() < 0 or y.max() >= k):
        raise ConfigError(f"y must be integer class indices in 0..{k - 1}")
    g, n, d = X.shape
    k_out = 1 if k == 2 else k
    t1 = np.concatenate([bounds.to_unit(X.reshape(g * n, d)).reshape(g, n, d), np.ones((g, n, 1))], axis=2)
    positive = np.arange(k_out) + (1 if k == 2 else 0)
    signs = np.where(y[:, None, :] == positive[None, :, None], 1.0, -1.0)  # (G, K', n)
    rows = np.broadcast_to(t1[:, None], (g, k_out, n, d + 1)).reshape(g * k_out, n, d + 1)
    s = np.ones((g, n)) if n_rows is None else (np.arange(n)[None, :] < np.asarray(n_rows)[:, None]).astype(np.float64)
    s = np.broadcast_to(s[:, None], (g, k_out, n)).reshape(g * k_out, n)
    theta = newton_logistic(rows, signs.reshape(g * k_out, n), s, C)
    return theta.reshape(g, k_out * (d + 1))


def clip_parameters(theta: ArrayLike, param_bound: float) -> np.ndarray:
    """Clip every coordinate of ``theta`` to ``[-param_bound, param_bound]`` (public bound)."""
    param_bound = check_positive(param_bound, name="param_bound")
    theta = np.asarray(theta, dtype=np.float64)
    if not np.all(np.isfinite(theta)):
        raise ConfigError("theta must be finite numbers")
    return np.clip(theta, -param_bound, param_bound)


def lr_share(theta: ArrayLike, *, param_bound: float, mechanism: Mechanism, rng: np.random.Generator) -> np.ndarray:
    """Owner side: perturb the local parameter vector once (seed 002 §3.5.2; Alg. 4).

    ``t = clip(theta, ±param_bound) / param_bound`` lies in ``[-1, 1]^p``; the report is
    ``mechanism.privatize(t)``, a vector of length ``p = mechanism.d = len(theta)`` in t-space.
    ``theta`` of shape (G, p): G owners' vectors (a node's batch), one independent draw each;
    the reports have the same shape.
    """
    theta = np.asarray(theta, dtype=np.float64)
    t = clip_parameters(
        theta.reshape(-1, theta.shape[-1]) if theta.ndim == 2 else np.ravel(theta)[None, :], param_bound
    )
    t = t / float(param_bound)
    if mechanism.d != t.shape[1]:
        raise ConfigError(
            f"mechanism has d={mechanism.d} but theta has {t.shape[1]} parameters; build it with d={t.shape[1]}"
        )
    reports = np.asarray(mechanism.privatize(t, rng), dtype=np.float64)
    return reports if theta.ndim == 2 else reports[0]


class LinearModel:
    """Linear classifier on rows mapped to ``[-1, 1]^d`` by public bounds.

    ``decision_function(X) = bounds.to_unit(X) @ coef_.T + intercept_``. Two classes
    (``coef_`` of shape (1, d)): class 1 when the decision is > 0, else class 0. More classes:
    argmax (one-vs-rest), ties to the lowest class.

    Parameters
    ----------
    coef_ : array (K', d), unit space
    intercept_ : array (K',)
    bounds : Bounds
        The public bounds that map data rows to the unit space the model lives in.
    classes : array, optional
        ``arange(2)`` when K' = 1, else ``arange(K')``.
    """

    kind = "linear"

    def __init__(
        self, coef_: ArrayLike, intercept_: ArrayLike, bounds: Bounds, classes: ArrayLike | None = None
    ) -> None:
        # Entries below 2^-300 are read as 0: a boosting history's model is the coordinator's, and coef 2^-1021
        # made the products of exactly the rows with |t_j| < 1/2 subnormal, a count the answer's time showed.
        self.coef_ = np.atleast_2d(flush_tiny(coef_))
        self.intercept_ = np.atleast_1d(flush_tiny(intercept_))
        k_out, d = self.coef_.shape
        if self.intercept_.shape != (k_out,):
            raise ConfigError(f"intercept_ must have shape ({k_out},), got {self.intercept_.shape}")
        if not isinstance(bounds, Bounds) or bounds.d != d:
            raise ConfigError(f"bounds must be a Bounds for the model's {d} features")
        self.bounds = bounds
        k = 2 if k_out == 1 else k_out
        self.classes = np.arange(k) if classes is None else np.asarray(classes)
        if self.classes.shape != (k,):
            raise ConfigError(f"classes must have shape ({k},), got {self.classes.shape}")

    @property
    def linear_stage(self) -> tuple[np.ndarray, np.ndarray]:
        """``(coef_ (K', d), intercept_ (K',))`` acting on unit-space rows ``t = bounds.to_unit(x)``.

        ``coef_.T`` is the matrix A_d of null-space cleaning (SPEC §10); queries must be mapped
        by the same bounds first (or use :attr:`data_linear_stage`).
        """
        return self.coef_.copy(), self.intercept_.copy()

    @property
    def data_linear_stage(self) -> tuple[np.ndarray, np.ndarray]:
        """The same affine map acting on data-space rows inside the bounds (before clipping).

        ``t = (x - mid) / half`` gives ``coef_data = coef_ / half`` and
        ``intercept_data = intercept_ - coef_data @ mid``.
        """
        half = (self.bounds.hi - self.bounds.lo) / 2.0
        mid = (self.bounds.hi + self.bounds.lo) / 2.0
        coef = self.coef_ / half
        return coef, self.intercept_ - coef @ mid

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Scores: shape (n,) for two classes, (n, K) otherwise."""
        t = self.bounds.to_unit(np.atleast_2d(np.asarray(X, dtype=np.float64)))
        scores = t @ self.coef_.T + self.intercept_
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict_index(self, X: ArrayLike) -> np.ndarray:
        scores = self.decision_function(X)
        return (scores > 0).astype(np.int64) if scores.ndim == 1 else np.argmax(scores, axis=1)

    def predict(self, X: ArrayLike) -> np.ndarray:
        return self.classes[self.predict_index(X)]

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Accuracy on ``(X, y)``."""
        return float(np.mean(self.predict(X) == np.asarray(y)))

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "coef": self.coef_.tolist(),
            "intercept": self.intercept_.tolist(),
            "bounds": self.bounds.to_list(),
            "classes": self.classes.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> LinearModel:
        if data.get("kind") != cls.kind:
            raise ConfigError(f"not a {cls.kind} model: kind={data.get('kind')!r}")
        bounds = Bounds(np.asarray(data["bounds"]["lo"]), np.asarray(data["bounds"]["hi"]))
        return cls(data["coef"], data["intercept"], bounds, data["classes"])


def lr_aggregate(reports: ArrayLike, *, param_bound: float, n_classes: int, bounds: Bounds) -> LinearModel:
    """Coordinator side: average the perturbed parameter vectors (seed 002 eq. 4).

    Parameters
    ----------
    reports : array (n_owners, p)
        One :func:`lr_share` output per owner, in t-space.
    param_bound : float
        The public bound the owners used; the mean is rescaled by it.
    n_classes : int >= 2
    bounds : Bounds
        Public feature bounds (``d = bounds.d``); the model predicts on rows mapped by them.

    Returns
    -------
    LinearModel
        ``coef_`` (K', d), ``intercept_`` (K',) with K' = 1 for two classes.
    """
    param_bound = check_positive(param_bound, name="param_bound")
    k = check_int(n_classes, name="n_classes", minimum=2)
    d = bounds.d
    p = n_parameters(k, d)
    reports = np.asarray(reports, dtype=np.float64)
    if reports.ndim != 2 or reports.shape[1] != p or reports.shape[0] == 0:
        raise ConfigError(f"reports must have shape (n_owners >= 1, {p}), got {reports.shape}")
    theta = (estimate_mean(reports) * param_bound).reshape(-1, d + 1)
    return LinearModel(theta[:, :d], theta[:, d], bounds)
