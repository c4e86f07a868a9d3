"""Gaussian objective perturbation of a K-class linear model, made total by AMP: the one-budget multiclass
FedDPDR models' noise (SPEC §8; issue 21).

Kifer, Smith, Thakurta (COLT 2012) with Gaussian ``B``: ``(epsilon, delta)``, add/remove-one neighbours,
sum-form ``L`` (``divisor = 1``) over K classes whose per-row Hessian has trace ``<= beta`` and gradient
norm ``<= sqrt 2`` (:mod:`privfed.common.feddpdr.multiclass` proves the bounds for its two losses). The
perturbed objective, the solver's public start and step count and the floating-point discipline are
:mod:`.objective`'s, shared with the pure-ε Laplace form (Chaudhuri et al.).

References
----------
D. Kifer, A. Smith, A. Thakurta, "Private convex empirical risk minimization and high-dimensional
regression", COLT 2012 (objective perturbation with Gaussian noise).
R. Iyengar et al., "Towards practical differentially private convex optimization", IEEE S&P 2019 (AMP).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.amp import AMP_FRACTION, AMP_RADIUS, AmpOutputNoise
from privfed.common.mechanisms.gaussian import standard_normal
from privfed.common.mechanisms.objective import RANGE_WHAT, LossGradient, minimise_perturbed
from privfed.common.mechanisms.snapping import check_epsilon_range
from privfed.common.validation import check_positive, check_rng

JACOBIAN_FRACTION = 0.1
"""Share of epsilon paid for the Jacobian in :class:`GaussianObjectivePerturbation`, ``epsilon_J =
beta / Lambda`` (chosen on validation splits of MNIST-5k; README, FedDPDR)."""
GRADIENT_NORM_SQ = 2.0
"""Default bound on ``||grad_s l||^2`` of one row's loss in its scores (both multiclass losses)."""


def noise_sigma(epsilon_b: float, delta: float, n_classes: int, gradient_norm_sq: float = GRADIENT_NORM_SQ) -> float:
    """Smallest sigma with ``sqrt 2 z / sigma + G / (2 sigma^2) <= epsilon_b``, ``G`` the gradient bound
    and ``z = Phi^{-1}(1 - delta / (2 (K - 1)))`` (:class:`GaussianObjectivePerturbation`); 0 for
    ``epsilon_b = inf``."""
    epsilon_b = check_positive(epsilon_b, name="epsilon_b", allow_inf=True)
    if math.isinf(epsilon_b):
        return 0.0
    if not 0 < delta < 1:
        raise ConfigError(f"delta must be in (0, 1) for a finite epsilon, got {delta!r}")
    if int(n_classes) < 2:
        raise ConfigError(f"n_classes must be >= 2, got {n_classes!r}")
    a = math.sqrt(2.0) * float(norm.isf(delta / (2.0 * (int(n_classes) - 1))))
    c = gradient_norm_sq / 2.0
    return (a + math.sqrt(a * a + 4.0 * c * epsilon_b)) / (2.0 * epsilon_b)  # eps s^2 - a s - c = 0


@dataclass(frozen=True, kw_only=True)
class GaussianObjectivePerturbation:
    """Gaussian objective perturbation of a K-class linear model (Kifer, Smith, Thakurta 2012), made total
    by AMP: ``(epsilon, delta)``-DP under add/remove-one (SPEC §8; issue 21).

    ``F_tilde = argmin_F sum_i l(F x_i, y_i) + (Lambda/2) ||F||_F^2 + <B, F>``, ``B_kj ~ N(0, sigma^2)``
    i.i.d., within ``r`` of the exact minimiser, released as ``F_tilde + r V`` (:class:`~.amp.AmpOutputNoise`).
    The budget ``epsilon = epsilon_J + epsilon_B + epsilon_out`` is split by public constants
    (:data:`JACOBIAN_FRACTION`, :data:`~.amp.AMP_FRACTION`), ``Lambda = beta / epsilon_J`` and ``sigma``
    from :func:`noise_sigma`: nothing depends on the rows or their number.

    **Theorem.** Rows ``||x|| <= 1``, K >= 2, and a convex loss of the scores ``s = F x`` whose row Hessian
    ``hess_s l`` is PSD with trace ``<= beta``, whose gradient has ``||grad_s l||^2 <= G`` (``G = 2``
    default), and whose gradient is ``a (e_y - w)`` with ``|a| <= 1`` and ``w`` on the simplex of the other
    classes (both multiclass losses, :mod:`privfed.common.feddpdr.multiclass`). Then the release is
    ``(epsilon, delta)``-DP.

    *Proof.* The objective is ``Lambda``-strongly convex and, with ``g_i(F) = grad l(F x_i, y_i)``, the exact
    minimiser satisfies ``B = -sum_i g_i(F) - Lambda F =: B_D(F)``, a bijection between B and F. The density
    of F under D is ``nu(B_D(F)) |det(Lambda I + sum_i H_i(F))|`` (``H_i`` the row's Hessian; where the
    second derivative jumps, F -> B is Lipschitz and the area formula applies, as for the Huber SVM of
    Chaudhuri et al. 2011). Let D' = D plus the row ``(x, y)``, ``g = g_x(F)``, ``H = H_x(F)``.

    * Jacobian: ``H = hess_s l (x) x x^T`` is PSD with trace ``<= beta ||x||^2 <= beta``; for
      ``M = Lambda I + sum_D H_i >= Lambda I``, ``1 <= det(M + H)/det(M) <= exp(tr(H)/Lambda) <= e^{epsilon_J}``.
    * Noise: ``B_D'(F) = B_D(F) - g``, so ``log nu(B_D(F))/nu(B_D'(F)) = (||g||^2 - 2 <B, g>)/(2 sigma^2)``
      with ``B = B_D(F)`` (and symmetrically for the other direction); ``||g||_F^2 = ||grad_s l||^2
      ||x||^2 <= G``. The inner product ``<B, g> = c^T u`` with ``u = B x ~ N(0, sigma^2 ||x||^2 I_K)`` and
      ``c = grad_s l = a (e_y - w)`` is a multiple in [-1, 1] of ``u_y - sum_{k != y} w_k u_k``, so
      ``|<B, g>| <= max_{k != y} |u_y - u_k|`` **whatever F is** (F depends on B). Each ``u_y - u_k ~ N(0,
      2 sigma^2 ||x||^2)``; by the union bound, with probability ``>= 1 - delta`` over B all K - 1 are at most
      ``t = sqrt 2 sigma z``, ``z = Phi^{-1}(1 - delta / (2 (K - 1)))``. On that event the log ratio is at
      most ``(2 t + G)/(2 sigma^2) = sqrt 2 z / sigma + G / (2 sigma^2) = epsilon_B``.
    * Together F_tilde's exact counterpart ``F*`` is ``(epsilon_J + epsilon_B, delta)``-DP; ``F_tilde``
      is within ``r`` of it, and the AMP noise makes the release of any point within ``r`` of ``F*`` an
      ``epsilon_out``-DP function of D given ``F*``. Adaptive composition gives ``(epsilon, delta)``. QED.

    ``epsilon`` is not divided by K: one row moves one K x p gradient of norm ``<= sqrt G``, and the class
    count enters only through ``z``.

    Parameters
    ----------
    epsilon : float
        ``inf``: no noise (``Lambda`` at its ``epsilon = 1`` value). Finite: ``epsilon_B`` and ``epsilon_out``
        must lie in ``[EPSILON_FLOOR, EPSILON_CEILING]``.
    delta : float in (0, 1) (0 allowed at ``epsilon = inf``)
    n_classes : int >= 2
    trace_bound : float > 0
        ``beta``.
    gradient_norm_sq : float > 0, default :data:`GRADIENT_NORM_SQ`
    curvature_bound : float > 0, default ``trace_bound``
        A bound on the largest eigenvalue of a row's Hessian in the scores (at most its trace): the solver's
        smoothness is ``Lambda + n curvature_bound`` (``||x|| <= 1``), its step count grows with its square root.
    """

    epsilon: float
    delta: float
    n_classes: int
    trace_bound: float
    gradient_norm_sq: float = GRADIENT_NORM_SQ
    curvature_bound: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, name="epsilon", allow_inf=True))
        object.__setattr__(self, "trace_bound", check_positive(self.trace_bound, name="trace_bound"))
        object.__setattr__(self, "gradient_norm_sq", check_positive(self.gradient_norm_sq, name="gradient_norm_sq"))
        if self.curvature_bound is not None:  # at most the trace
            curvature = min(check_positive(self.curvature_bound, name="curvature_bound"), self.trace_bound)
            object.__setattr__(self, "curvature_bound", curvature)
        if math.isfinite(self.epsilon):
            for eps in (self.epsilon_B, self.epsilon_out):
                check_epsilon_range(eps, what=RANGE_WHAT)
        self.sigma  # noqa: B018 - validates delta and n_classes (a finite epsilon needs delta in (0, 1))

    @property
    def row_curvature(self) -> float:
        """The bound on a row's Hessian the solver uses: ``curvature_bound`` (at most ``trace_bound``)."""
        return float(self.curvature_bound if self.curvature_bound is not None else self.trace_bound)

    @property
    def epsilon_J(self) -> float:
        return math.inf if math.isinf(self.epsilon) else JACOBIAN_FRACTION * self.epsilon

    @property
    def epsilon_out(self) -> float:
        return math.inf if math.isinf(self.epsilon) else AMP_FRACTION * self.epsilon

    @property
    def epsilon_B(self) -> float:
        if math.isinf(self.epsilon):
            return math.inf
        return self.epsilon - self.epsilon_J - self.epsilon_out

    @property
    def Lambda(self) -> float:
        """``beta / epsilon_J`` (at ``epsilon = inf``: ``beta / JACOBIAN_FRACTION``, its ``epsilon = 1`` value)."""
        return self.trace_bound / (JACOBIAN_FRACTION if math.isinf(self.epsilon) else self.epsilon_J)

    @property
    def sigma(self) -> float:
        return noise_sigma(self.epsilon_B, self.delta, self.n_classes, self.gradient_norm_sq)

    def calibration(self) -> dict[str, float]:
        """The public calibration: the ε shares, ``Lambda``, ``sigma`` and ``delta``."""
        return {
            "epsilon_J": self.epsilon_J,
            "epsilon_B": self.epsilon_B,
            "epsilon_out": self.epsilon_out,
            "Lambda": self.Lambda,
            "sigma": self.sigma,
            "delta": float(self.delta),
        }

    def variance(self, F: np.ndarray | None = None) -> float:
        """``sigma^2``, the variance of each entry of ``B``."""
        return self.sigma**2

    def bias(self, F: np.ndarray | None = None) -> float:
        """0: ``B`` is symmetric."""
        return 0.0

    @property
    def output_bounds(self) -> tuple[float, float]:
        """Unbounded: the release is a minimiser plus noise."""
        return (-math.inf, math.inf)

    def privatize(self, gradient: LossGradient, shape: tuple[int, int], n: int, rng: np.random.Generator) -> np.ndarray:
        """The released ``(K, p)`` parameters: ``B``, the total minimiser, AMP's noise (class docstring).

        ``gradient`` is the gradient of the sum-form loss over ``n`` rows, ``F -> sum_i grad l(F x_i, y_i)``;
        its Hessian is at most ``curvature_bound * n`` and its norm at most ``n sqrt(G)`` (rows of norm <= 1). The
        solver does the same work for every ``n`` rows (:func:`minimise_perturbed`, from ``-B / Lambda``,
        within ``n sqrt(G) / Lambda`` of the minimiser).
        """
        check_rng(rng)
        sigma = self.sigma
        B = standard_normal(rng, shape) * sigma if sigma > 0 else np.zeros(shape)
        F = minimise_perturbed(
            gradient,
            B,
            reg=self.Lambda,
            divisor=1.0,
            curvature=self.row_curvature * n,  # ||hess L|| <= sum_i ||hess_s l_i|| ||x_i||^2
            gradient_bound=n * math.sqrt(self.gradient_norm_sq),  # ||sum_i g_i|| <= n sqrt(G)
        )
        if math.isfinite(self.epsilon_out):
            noise = AmpOutputNoise(epsilon=self.epsilon_out, radius=AMP_RADIUS, d=B.size)
            F = noise.privatize(F.ravel(), rng).reshape(shape)
        return F


__all__ = ["GRADIENT_NORM_SQ", "JACOBIAN_FRACTION", "GaussianObjectivePerturbation", "noise_sigma"]
