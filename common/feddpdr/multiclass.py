"""Multiclass objective perturbation with one budget for all classes (issue 21, item 3).

The seed's classifier (:func:`privfed.common.feddpdr.svm.fit_dp_svm_ovr`) fits K one-vs-rest Huber SVMs
at ``epsilon/K`` each: at 800 rows per party it is at chance (issue 21). This module fits one linear
model ``F`` (K x p) for all classes under one ``(epsilon, delta)``, with Gaussian objective
perturbation (Kifer, Smith, Thakurta 2012) and the approximate-minimum output noise of AMP
(Iyengar et al. 2019; :mod:`privfed.common.mechanisms.amp`), which makes the release total.

Losses (scores ``s = F x``, label ``y``):

* ``"mc-huber"``, the **multiclass Huber SVM**: ``l = H_h(m)``, the Huber hinge (SPEC §8, width ``h``)
  of the smoothed Crammer-Singer margin ``m = s_y - T log sum_{k != y} exp(s_k / T)`` (``T`` is the
  smoothing temperature; ``T -> 0`` gives the margin ``s_y - max_{k != y} s_k`` of Crammer & Singer 2001).
  ``grad_s l = H'(m) (e_y - q)`` with ``q`` the softmax of the other scores at temperature ``T``;
  ``hess_s l = H''(m) (e_y - q)(e_y - q)^T + (-H'(m)) (diag(q) - q q^T) / T``, positive semidefinite
  (a convex non-increasing function of a concave margin), of trace ``<= 2 H'' + 1/T <= 1/h + 1/T``.
* ``"softmax"``, multinomial logistic regression: ``grad_s l = p - e_y``, trace of the Hessian ``<= 1``.

Mechanism (:func:`fit_dp_multiclass`): Gaussian objective perturbation made total by AMP,
:class:`~privfed.common.mechanisms.objective_gaussian.GaussianObjectivePerturbation`, which holds the calibration
(``Lambda = beta / epsilon_J``, sigma) and the proof of ``(epsilon, delta)``-DP under add/remove-one. It asks
three things of the loss, shown here for both losses (rows ``||x|| <= 1``, the caller's ``[z, 1]/sqrt 2``):

* the trace of a row's Hessian in the scores is at most ``beta`` (:data:`TRACE_BOUND`, above);
* ``||grad_s l||^2 <= 2`` (:data:`~privfed.common.mechanisms.objective_gaussian.GRADIENT_NORM_SQ`):
  ``||e_y - q||^2 = 1 + sum q_k^2 <= 2``, likewise ``p - e_y``;
* the gradient is ``a (e_y - w)`` with ``|a| <= 1`` and ``w`` on the simplex of the other classes: ``mc-huber``
  has ``a = H'(m)`` in ``[-1, 0]`` and ``w = q``; ``softmax`` has ``a = -(1 - p_y)`` and
  ``w = p_{k != y} / (1 - p_y)``.

Unlike one-vs-rest at ``epsilon/K`` per class, ``epsilon`` is not divided by K. The regulariser is a
sum-form constant, so the calibration needs no row count: under add/remove the count is private.

Floating point (SPEC §12): the noises come from the float-safe samplers of
:mod:`privfed.common.mechanisms.gaussian`; the release is a solver output, not rounded to a grid (README,
"Floating point").

References
----------
K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially private empirical risk minimization",
JMLR 12, 2011 (Theorem 9, Huber SVM).
D. Kifer, A. Smith, A. Thakurta, "Private convex empirical risk minimization and high-dimensional
regression", COLT 2012 (objective perturbation with Gaussian noise).
R. Iyengar et al., "Towards practical differentially private convex optimization", IEEE S&P 2019 (AMP).
K. Crammer, Y. Singer, "On the algorithmic implementation of multiclass kernel-based vector machines",
JMLR 2, 2001.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from privfed.common.bounds import exp_nonpositive, flush_tiny
from privfed.common.errors import ConfigError
from privfed.common.feddpdr.pca import check_unit_rows
from privfed.common.feddpdr.svm import huber_hinge, huber_hinge_derivative
from privfed.common.mechanisms.objective import perturbed
from privfed.common.mechanisms.objective_gaussian import GaussianObjectivePerturbation
from privfed.common.validation import check_choice
from privfed.common.work_rows import pad_rows, work_rows

LOSSES = ("mc-huber", "softmax")
MC_HUBER_H = 2.0
"""Huber width of ``mc-huber`` (chosen on validation splits of MNIST-5k: the smoother the hinge, the
smaller the Jacobian term; README, FedDPDR)."""
MC_HUBER_T = 0.5
"""Smoothing temperature of the Crammer-Singer margin of ``mc-huber`` (validation, as :data:`MC_HUBER_H`)."""
TRACE_BOUND = {"mc-huber": 1.0 / MC_HUBER_H + 1.0 / MC_HUBER_T, "softmax": 1.0}
"""``beta``: a bound on the trace of one row's Hessian in the scores (module docstring)."""
CURVATURE_BOUND = {"mc-huber": 1.0 / MC_HUBER_H + 0.5 / MC_HUBER_T, "softmax": 0.5}
"""A bound on the largest eigenvalue of one row's Hessian in the scores, for the solver's step count (the
smoothness ``Lambda + n CURVATURE_BOUND``; the privacy proof uses the trace, :data:`TRACE_BOUND`).
``diag(q) - q q^T`` is ``q``'s covariance form, ``v^T (diag(q) - q q^T) v = Var_q(v) <= (max v - min v)^2 / 4
<= 1/2`` for ``||v|| = 1`` (Popoviciu's inequality); ``H''(m) ||e_y - q||^2 <= (1/(2h)) 2``. So ``softmax``:
``1/2``; ``mc-huber``: ``1/h + 1/(2T)``."""


def mechanism(epsilon: float, delta: float, n_classes: int, loss: str) -> GaussianObjectivePerturbation:
    """The release's mechanism for ``loss`` (:data:`LOSSES`): Gaussian objective perturbation at
    ``(epsilon, delta)`` with the loss's trace bound; public parameters only."""
    check_choice(loss, name="loss", allowed=LOSSES)
    return GaussianObjectivePerturbation(
        epsilon=epsilon,
        delta=delta,
        n_classes=n_classes,
        trace_bound=TRACE_BOUND[loss],
        curvature_bound=CURVATURE_BOUND[loss],
    )


def one_hot(y: np.ndarray, n_classes: int) -> np.ndarray:
    """The (K, n) float indicator of the labels, class-major like the solver's scores: the gradients pick each
    row's own class with it (a product, the same work for every label, and faster than fancy indexing)."""
    return (np.arange(n_classes)[:, None] == np.asarray(y)[None, :]).astype(np.float64)


def _scores(S: np.ndarray, Y: np.ndarray, loss: str, values: bool) -> tuple[np.ndarray | None, np.ndarray]:
    """Gradients in the scores (K, n) of the scores ``S = F X^T`` (K, n, class-major: the reductions over the
    classes are elementwise over rows, fast for few classes) with labels ``Y`` (:func:`one_hot`), and the
    loss values (n,) if ``values``."""
    if loss == "softmax":
        shifted = S - S.max(axis=0)
        E = exp_nonpositive(shifted)
        Z = E.sum(axis=0)
        G = E / Z - Y
        return (np.log(Z) - (shifted * Y).sum(axis=0) if values else None), G
    O = np.where(Y > 0, -np.inf, S * (1.0 / MC_HUBER_T))  # the other classes' scores over T
    top = O.max(axis=0)
    E = exp_nonpositive(O - top)
    Z = E.sum(axis=0)
    margin = (S * Y).sum(axis=0) - MC_HUBER_T * (np.log(Z) + top)
    G = (Y - E / Z) * huber_hinge_derivative(margin, MC_HUBER_H)
    return (huber_hinge(margin, MC_HUBER_H) if values else None), G


def score_gradients(S: np.ndarray, y: np.ndarray, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-row loss values (n,) and gradients in the scores (n, K), rows ``S = X F^T``."""
    values, G = _scores(S.T, one_hot(y, S.shape[1]), loss, values=True)
    return cast(np.ndarray, values), G.T


def score_hessian(s: np.ndarray, y: int, loss: str) -> np.ndarray:
    """One row's Hessian in its scores (K, K), the matrix the Jacobian bound is about (module docstring)."""
    s = np.asarray(s, dtype=np.float64)
    if loss == "softmax":
        p = np.exp(s - s.max())
        p /= p.sum()
        return np.diag(p) - np.outer(p, p)
    o = s / MC_HUBER_T
    o[y] = -np.inf
    q = np.exp(o - o.max())
    q /= q.sum()
    margin = s[y] - MC_HUBER_T * math.log(float(np.sum(np.exp(np.delete(s, y) / MC_HUBER_T))))
    c = q.copy()
    c[y] -= 1.0  # -(e_y - q)
    curvature = 1.0 / (2.0 * MC_HUBER_H) if abs(1.0 - margin) <= MC_HUBER_H else 0.0
    slope = -float(huber_hinge_derivative(np.array(margin), MC_HUBER_H))
    return curvature * np.outer(c, c) + slope * (np.diag(q) - np.outer(q, q)) / MC_HUBER_T


def _loss(F: np.ndarray, X: np.ndarray, y: np.ndarray, loss: str) -> tuple[float, np.ndarray]:
    """``sum_i l(F x_i, y_i)`` and its gradient in F."""
    values, G = score_gradients(X @ F.T, y, loss)
    return float(values.sum()), G.T @ X


def _loss_gradient(F: np.ndarray, X: np.ndarray, Y: np.ndarray, loss: str) -> np.ndarray:
    """The gradient in F of ``sum_i l(F x_i, y_i)`` (``Y`` the (K, n) :func:`one_hot` labels): what the solver
    calls, each step."""
    return _scores(F @ X.T, Y, loss, values=False)[1] @ X


def perturbed_objective(
    F_flat: np.ndarray, X: np.ndarray, y: np.ndarray, loss: str, Lambda: float, B: np.ndarray
) -> tuple[float, np.ndarray]:
    """``J(F) = sum_i l(F x_i, y_i) + (Lambda/2)||F||^2 + <B, F>`` and its gradient (flat)."""
    J = perturbed(lambda F: _loss(F, X, y, loss), B.shape, reg=Lambda, noise=B, divisor=1.0)
    return J(F_flat)


def fit_dp_multiclass(
    X_unit_ball: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    *,
    loss: str,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, dict[str, float]]:
    """The ``(epsilon, delta)``-DP multiclass linear model of the module docstring; total.

    Parameters
    ----------
    X_unit_ball : (n, p) rows of norm <= 1 (the caller adds any bias feature); n may be 0.
    y : (n,) integer labels in ``[0, n_classes)``.
    loss : :data:`LOSSES`.
    epsilon, delta : the release's budget; ``epsilon = inf`` fits without noise.

    Returns
    -------
    F : (n_classes, p) the release; info : the public calibration (``sigma``, ``Lambda``, the shares).

    Raises
    ------
    ConfigError
        Only for arguments that are wrong whatever the rows (shapes, label range, budget).

    Timing: the rows are padded with zero rows to ``n``'s public grid cell (:mod:`privfed.common.work_rows`);
    the solver's bounds, which grow with the row count (``curvature_bound n``, ``n sqrt G``), are the cell's.
    """
    X = check_unit_rows(X_unit_ball, "X_unit_ball")
    y = np.asarray(y)
    K = int(n_classes)
    if y.shape != (X.shape[0],) or not np.issubdtype(y.dtype, np.integer) or np.any((y < 0) | (y >= K)):
        raise ConfigError(f"need one integer label in [0, {K}) per row, got labels of shape {y.shape}")
    mech = mechanism(epsilon, delta, K, loss)
    rows = work_rows(X.shape[0])  # zero rows, each an exact zero gradient: the work of n's public grid cell
    Y = one_hot(pad_rows(y, rows, axis=-1), K)
    X = pad_rows(flush_tiny(X), rows)  # no subnormal products (bounds.EXP_FLOOR)
    F = mech.privatize(lambda F: _loss_gradient(F, X, Y, loss), (K, X.shape[1]), X.shape[0], rng)
    return F, mech.calibration()


__all__ = [
    "CURVATURE_BOUND",
    "LOSSES",
    "MC_HUBER_H",
    "MC_HUBER_T",
    "TRACE_BOUND",
    "fit_dp_multiclass",
    "mechanism",
    "one_hot",
    "perturbed_objective",
    "score_gradients",
    "score_hessian",
]
