"""Multiclass objective perturbation with one budget for all classes (issue 21, item 3).

The seed's classifier (:func:`privfed.common.feddpdr.svm.fit_dp_svm_ovr`) fits K one-vs-rest Huber SVMs
at ``epsilon/K`` each: at 800 rows per party it is at chance (issue 21). This module fits one linear
model ``F`` (K x p) for all classes under one ``(epsilon, delta)``, with Gaussian objective
perturbation (Kifer, Smith, Thakurta 2012) and the approximate-minimum output noise of AMP
(Iyengar et al. 2019; :mod:`privfed.common.feddpdr.solver`), which makes the release total.

Losses (scores ``s = F x``, label ``y``):

* ``"mc-huber"``, the **multiclass Huber SVM**: ``l = H_h(m)``, the Huber hinge (SPEC §8, width ``h``)
  of the smoothed Crammer-Singer margin ``m = s_y - T log sum_{k != y} exp(s_k / T)`` (``T`` is the
  smoothing temperature; ``T -> 0`` gives the margin ``s_y - max_{k != y} s_k`` of Crammer & Singer 2001).
  ``grad_s l = H'(m) (e_y - q)`` with ``q`` the softmax of the other scores at temperature ``T``;
  ``hess_s l = H''(m) (e_y - q)(e_y - q)^T + (-H'(m)) (diag(q) - q q^T) / T``, positive semidefinite
  (a convex non-increasing function of a concave margin), of trace ``<= 2 H'' + 1/T <= 1/h + 1/T``.
* ``"softmax"``, multinomial logistic regression: ``grad_s l = p - e_y``, trace of the Hessian ``<= 1``.

Mechanism (:func:`fit_dp_multiclass`). Rows ``x`` with ``||x|| <= 1`` (the caller's ``[z, 1]/sqrt 2``),
public ``epsilon = epsilon_J + epsilon_B + epsilon_out`` and ``delta``:

    F_tilde = argmin_F  sum_i l(F x_i, y_i) + (Lambda/2) ||F||_F^2 + <B, F>,   B_kj ~ N(0, sigma^2) i.i.d.,
    release F_tilde + V,   V with density proportional to exp(-epsilon_out ||V||_F / (2 r)),

with ``Lambda = beta / epsilon_J`` (``beta`` the loss's trace bound, :data:`TRACE_BOUND`),
``sigma`` from :func:`noise_sigma` and F_tilde within ``r`` (:data:`~privfed.common.feddpdr.solver.AMP_RADIUS`)
of the exact minimiser. The budget shares are public constants (:data:`JACOBIAN_FRACTION`,
:data:`~privfed.common.feddpdr.solver.AMP_FRACTION`): ``Lambda`` depends on epsilon and the loss only,
never on the rows or their number.

**Theorem** (add/remove-one neighbours, ``||x|| <= 1``, K >= 2): the release is ``(epsilon, delta)``-DP.

*Proof.* The objective is ``Lambda``-strongly convex and, with ``g_i(F) = grad l(F x_i, y_i)``, the exact
minimiser satisfies ``B = -sum_i g_i(F) - Lambda F =: B_D(F)``, a bijection between B and F. The density
of F under D is ``nu(B_D(F)) |det(Lambda I + sum_i H_i(F))|`` (``H_i`` the row's Hessian; Huber's second
derivative jumps at ``m = 1 +- h``, so F -> B is Lipschitz and the area formula applies, as for the Huber
SVM of Chaudhuri et al. 2011). Let D' = D plus the row ``(x, y)``, ``g = g_x(F)``, ``H = H_x(F)``.

* Jacobian: ``H = hess_s l (x) x x^T`` is PSD with trace ``<= beta ||x||^2 <= beta``; for
  ``M = Lambda I + sum_D H_i >= Lambda I``, ``1 <= det(M + H)/det(M) <= exp(tr(H)/Lambda) <= e^{epsilon_J}``.
* Noise: ``B_D'(F) = B_D(F) - g``, so ``log nu(B_D(F))/nu(B_D'(F)) = (||g||^2 - 2 <B, g>)/(2 sigma^2)``
  with ``B = B_D(F)`` (and symmetrically with ``B' = B_D'(F)`` for the other direction). ``||g||_F^2 =
  ||grad_s l||^2 ||x||^2 <= 2`` (``||e_y - q||^2 = 1 + sum q_k^2 <= 2``; likewise ``p - e_y``). The
  inner product ``<B, g> = c^T u`` with ``u = B x ~ N(0, sigma^2 ||x||^2 I_K)`` and ``c = grad_s l`` is,
  for both losses, a multiple in [-1, 1] of ``u_y - sum_{k != y} w_k u_k`` with weights ``w`` on the
  simplex, so ``|<B, g>| <= max_{k != y} |u_y - u_k|`` **whatever F is** (F depends on B). Each
  ``u_y - u_k ~ N(0, 2 sigma^2 ||x||^2)``; by the union bound, with probability ``>= 1 - delta`` over B
  all K - 1 are at most ``t = sqrt 2 sigma z``, ``z = Phi^{-1}(1 - delta / (2 (K - 1)))``. On that event
  the log ratio is at most ``(2 t + 2)/(2 sigma^2) = sqrt 2 z / sigma + 1 / sigma^2 = epsilon_B``.
* Together F_tilde's exact counterpart ``F*`` is ``(epsilon_J + epsilon_B, delta)``-DP; ``F_tilde``
  is within ``r`` of it, and ``V`` makes the release of any point within ``r`` of ``F*`` an
  ``epsilon_out``-DP function of D given ``F*`` (L2 sensitivity ``2 r``; Chaudhuri et al. 2011's
  output-perturbation density). Adaptive composition gives ``(epsilon, delta)``. QED.

Unlike one-vs-rest at ``epsilon/K`` per class, ``epsilon`` is not divided by K: one row moves one
K x p gradient of norm ``<= sqrt 2``, and the class count enters only through ``z`` (about
``sqrt(2 ln(2 (K - 1)/delta))``). The regulariser is a sum-form constant, so the calibration needs no
row count: under add/remove the count is private.

Floating point: the noises are numpy doubles (SPEC §12 applies); the release is a solver output.

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

import numpy as np
from scipy.stats import norm

from privfed.common.errors import ConfigError
from privfed.common.feddpdr.pca import check_unit_rows
from privfed.common.feddpdr.solver import AMP_FRACTION, AMP_RADIUS, minimise_within
from privfed.common.feddpdr.svm import huber_hinge, huber_hinge_derivative, sample_b
from privfed.common.validation import check_choice, check_positive

LOSSES = ("mc-huber", "softmax")
MC_HUBER_H = 2.0
"""Huber width of ``mc-huber`` (chosen on validation splits of MNIST-5k: the smoother the hinge, the
smaller the Jacobian term; README, FedDPDR)."""
MC_HUBER_T = 0.5
"""Smoothing temperature of the Crammer-Singer margin of ``mc-huber`` (validation, as :data:`MC_HUBER_H`)."""
TRACE_BOUND = {"mc-huber": 1.0 / MC_HUBER_H + 1.0 / MC_HUBER_T, "softmax": 1.0}
"""``beta``: a bound on the trace of one row's Hessian in the scores (module docstring)."""
GRADIENT_NORM_SQ = 2.0
"""Bound on ``||grad_s l||^2`` for both losses."""
JACOBIAN_FRACTION = 0.1
"""Share of epsilon paid for the Jacobian, ``epsilon_J = beta / Lambda`` (validation splits)."""


def privacy_split(epsilon: float, loss: str) -> dict[str, float]:
    """``epsilon_J``, ``epsilon_B``, ``epsilon_out`` and the regulariser ``Lambda = beta / epsilon_J``;
    all public (module docstring). ``epsilon = inf``: no noise, ``Lambda`` at its ``epsilon = 1`` value."""
    check_choice(loss, name="loss", allowed=LOSSES)
    epsilon = check_positive(epsilon, name="epsilon", allow_inf=True)
    beta = TRACE_BOUND[loss]
    if math.isinf(epsilon):
        return {
            "epsilon_J": math.inf,
            "epsilon_B": math.inf,
            "epsilon_out": math.inf,
            "Lambda": beta / JACOBIAN_FRACTION,
        }
    eps_j, eps_out = JACOBIAN_FRACTION * epsilon, AMP_FRACTION * epsilon
    return {"epsilon_J": eps_j, "epsilon_B": epsilon - eps_j - eps_out, "epsilon_out": eps_out, "Lambda": beta / eps_j}


def noise_sigma(epsilon_b: float, delta: float, n_classes: int) -> float:
    """Smallest sigma with ``sqrt 2 z / sigma + GRADIENT_NORM_SQ / (2 sigma^2) <= epsilon_b``,
    ``z = Phi^{-1}(1 - delta / (2 (K - 1)))`` (module docstring); 0 for ``epsilon_b = inf``."""
    epsilon_b = check_positive(epsilon_b, name="epsilon_b", allow_inf=True)
    if math.isinf(epsilon_b):
        return 0.0
    if not 0 < delta < 1:
        raise ConfigError(f"delta must be in (0, 1) for a finite epsilon, got {delta!r}")
    if int(n_classes) < 2:
        raise ConfigError(f"n_classes must be >= 2, got {n_classes!r}")
    a = math.sqrt(2.0) * float(norm.isf(delta / (2.0 * (int(n_classes) - 1))))
    c = GRADIENT_NORM_SQ / 2.0
    return (a + math.sqrt(a * a + 4.0 * c * epsilon_b)) / (2.0 * epsilon_b)  # eps s^2 - a s - c = 0


def score_gradients(S: np.ndarray, y: np.ndarray, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-row loss values (n,) and gradients in the scores (n, K), rows ``S = X F^T``."""
    n = S.shape[0]
    rows = np.arange(n)
    if loss == "softmax":
        shifted = S - S.max(axis=1, keepdims=True)
        log_z = np.log(np.exp(shifted).sum(axis=1))
        P = np.exp(shifted - log_z[:, None])
        values = log_z - shifted[rows, y]
        P[rows, y] -= 1.0
        return values, P
    O = S / MC_HUBER_T
    O[rows, y] = -np.inf
    top = O.max(axis=1, keepdims=True)
    E = np.exp(O - top)
    Z = E.sum(axis=1, keepdims=True)
    margin = S[rows, y] - MC_HUBER_T * (np.log(Z[:, 0]) + top[:, 0])
    G = -E / Z
    G[rows, y] += 1.0
    G *= huber_hinge_derivative(margin, MC_HUBER_H)[:, None]
    return huber_hinge(margin, MC_HUBER_H), G


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


def perturbed_objective(
    F_flat: np.ndarray, X: np.ndarray, y: np.ndarray, loss: str, Lambda: float, B: np.ndarray
) -> tuple[float, np.ndarray]:
    """``J(F) = sum_i l(F x_i, y_i) + (Lambda/2)||F||^2 + <B, F>`` and its gradient (flat)."""
    F = F_flat.reshape(B.shape)
    values, G = score_gradients(X @ F.T, y, loss)
    value = float(values.sum()) + 0.5 * Lambda * float(np.sum(F * F)) + float(np.sum(B * F))
    return value, (G.T @ X + Lambda * F + B).ravel()


def _gaussian_matrix(shape: tuple[int, int], sigma: float, rng: np.random.Generator) -> np.ndarray:
    """``B`` with i.i.d. ``N(0, sigma^2)`` entries (zeros for sigma = 0): the objective's noise."""
    return rng.standard_normal(shape) * sigma if sigma > 0 else np.zeros(shape)


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
    """
    X = check_unit_rows(X_unit_ball, "X_unit_ball")
    y = np.asarray(y)
    K = int(n_classes)
    if y.shape != (X.shape[0],) or not np.issubdtype(y.dtype, np.integer) or np.any((y < 0) | (y >= K)):
        raise ConfigError(f"need one integer label in [0, {K}) per row, got labels of shape {y.shape}")
    split = privacy_split(epsilon, loss)
    sigma = noise_sigma(split["epsilon_B"], delta, K)
    B = _gaussian_matrix((K, X.shape[1]), sigma, rng)
    Lambda = split["Lambda"]
    smooth = Lambda + TRACE_BOUND[loss] * X.shape[0]  # ||hess J|| <= Lambda + sum_i tr(H_i)
    F = minimise_within(
        lambda f: perturbed_objective(f, X, y.astype(np.intp), loss, Lambda, B), B.size, mu=Lambda, smooth=smooth
    ).reshape(B.shape)
    if math.isfinite(split["epsilon_out"]):
        F = F + AMP_RADIUS * sample_b(B.size, split["epsilon_out"], rng).reshape(B.shape)
    return F, {**split, "sigma": sigma, "delta": float(delta)}


__all__ = [
    "JACOBIAN_FRACTION",
    "LOSSES",
    "MC_HUBER_H",
    "MC_HUBER_T",
    "TRACE_BOUND",
    "fit_dp_multiclass",
    "noise_sigma",
    "perturbed_objective",
    "privacy_split",
    "score_gradients",
    "score_hessian",
]
