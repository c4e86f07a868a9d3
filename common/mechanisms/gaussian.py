"""Gaussian noise, released float-safely (SPEC §7, §8, §12): the central Gaussian mechanism of DP-PCA
and the DP class sums with its calibration (classic, or the analytic Gaussian mechanism of Balle &
Wang 2018), and the float-safe normal and Gamma draws of objective perturbation (:mod:`.objective`).

Each user states what its statistic's L2 sensitivity is and why (DP-PCA's ``X^T X``:
:mod:`privfed.common.feddpdr.pca`; the class sums: :mod:`privfed.common.feddpdr.centroid`) and gets its
release from :func:`calibrated_gaussian`; this module calibrates, draws and releases.

scipy (``scipy.special``, for the normal CDF of the analytic calibration) is imported here, so
:mod:`privfed.common.mechanisms` re-exports this module's names lazily: an owner node that never
releases a Gaussian does not load scipy (issue 10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr, ndtr

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.snapping import EPSILON_FLOOR, OutputGrid, check_epsilon_range, full_uniform
from privfed.common.validation import (
    check_choice,
    check_fraction,
    check_positive,
    check_real,
    check_real_array,
    check_rng,
)

#: The exact statistic is clamped to ``[-INPUT_LIMIT, INPUT_LIMIT]`` before noise (a sum over at most
#: ``2^31`` unit rows; clamping keeps the sensitivity). Keeps every output an exact index on its grid.
INPUT_LIMIT = 2.0**31
#: The output clamp sits this many sigmas beyond :data:`INPUT_LIMIT`.
TAIL_SIGMAS = 40.0
#: sigma must be at least this fraction of the sensitivity: then two neighbouring inputs' reachable
#: outputs differ only beyond ``37.6 - 8`` sigmas (:func:`standard_normal` reaches 37.6), an event of
#: probability below ``e^-400``.
SIGMA_FLOOR_RATIO = 1.0 / 8.0


def standard_normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """i.i.d. N(0, 1) by Box-Muller from a full-precision uniform: ``sqrt(-2 ln U) (cos, sin)(2 pi V)``.

    ``U`` from :func:`~privfed.common.mechanisms.snapping.full_uniform` (every double, so the radius
    is gap-free out to ``sqrt(2 * 708) = 37.6``), ``V`` a 53-bit uniform (the angle's steps move a
    value by at most ``37.6 * 2 pi 2^-53``). In real arithmetic this is exactly Gaussian; numpy's
    ziggurat sampler draws its tail from 53-bit uniforms, whose gaps grow like ``e^(z^2/2)``.
    """
    size = math.prod(shape)
    pairs = (size + 1) // 2
    u, _ = full_uniform(rng, (pairs,))
    radius = np.sqrt(-2.0 * np.log(u))
    angle = rng.random(pairs) * (2.0 * math.pi)
    out = np.empty(2 * pairs)
    np.multiply(radius, np.cos(angle), out=out[:pairs])
    np.multiply(radius, np.sin(angle), out=out[pairs:])
    return out[:size].reshape(shape)


def gamma_integer_shape(rng: np.random.Generator, shape: int, scale: float, size: tuple[int, ...]) -> np.ndarray:
    """Gamma(``shape``, ``scale``) for an integer shape: ``scale`` times a sum of ``shape`` exponentials
    ``-ln U``, each from a full-precision uniform (exact in real arithmetic, gap-free in floats)."""
    u, _ = full_uniform(rng, (*size, shape))
    return -scale * np.log(u).sum(axis=-1)


def symmetric_gaussian_noise(d: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """``E`` of shape (d, d): upper triangle incl. diagonal i.i.d. N(0, sigma^2), mirrored (SPEC §7).

    Drawn by the float-safe sampler :func:`standard_normal`, in the order
    :meth:`GaussianMechanism.privatize_symmetric` takes them; a release goes through that method, which
    also rounds and clamps. This is the noise alone (for the tests of its distribution)."""
    upper = np.triu_indices(d)
    E = np.zeros((d, d))
    E[upper] = standard_normal(rng, upper[0].shape) * sigma
    return E + np.triu(E, 1).T


SIGMA_METHODS = ("analytic", "classic")


def _check_epsilon_delta(epsilon: object, delta: object) -> tuple[float, float]:
    eps = check_positive(epsilon, name="epsilon", allow_inf=True, fix="inf asks for no privacy")
    dlt = check_real(delta, name="delta")
    if eps != math.inf:
        dlt = check_fraction(dlt, name="delta", fix="the seed uses 1e-4, privfed defaults to 1e-5")
    return eps, dlt


def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Exact delta of the Gaussian mechanism (Balle & Wang, ICML 2018, Theorem 8).

    ``delta(sigma) = Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D)``; the
    second term is evaluated as ``exp(eps + log Phi(.))`` so large ``eps`` does not overflow.
    """
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(ndtr(a - b) - np.exp(epsilon + log_ndtr(-a - b)))


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0, *, method: str = "analytic") -> float:
    """Noise scale of the (epsilon, delta) Gaussian mechanism for L2 sensitivity ``sensitivity``.

    ``method="analytic"`` (default): the smallest sigma meeting the exact condition of the analytic
    Gaussian mechanism (Balle & Wang 2018, Thm 8, see :func:`analytic_gaussian_delta`), found by
    bisection on ``log sigma`` to relative width 1e-13 and returned from the safe side. It is valid for
    every epsilon > 0 and never larger than the classic scale, so privfed uses it for all epsilon
    (SPEC §7 asks for it at least for epsilon >= 1).

    ``method="classic"``: ``sqrt(2 ln(1.25/delta)) * sensitivity / epsilon`` (Dwork & Roth 2014,
    Thm A.1; seed 004's Algorithm 2 and Theorem 4.1). Its proof needs epsilon < 1, so it refuses
    epsilon >= 1.

    Parameters
    ----------
    epsilon : float > 0, ``inf`` gives 0 (no noise).
    delta : float in (0, 1).
    sensitivity : float > 0, L2 sensitivity of the released statistic.
    method : {"analytic", "classic"}

    Raises
    ------
    ConfigError
        For an out-of-range value, or ``method="classic"`` with epsilon >= 1.

    References
    ----------
    B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy: analytical
    calibration and optimal denoising", ICML 2018.
    """
    epsilon, delta = _check_epsilon_delta(epsilon, delta)
    sensitivity = check_positive(sensitivity, name="sensitivity")
    check_choice(method, name="method", allowed=SIGMA_METHODS)
    if epsilon == math.inf:
        return 0.0
    classic = math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon
    if method == "classic":
        if epsilon >= 1.0:
            raise ConfigError(
                f"the classic Gaussian calibration needs epsilon < 1, got {epsilon}; use method='analytic'"
            )
        return classic
    lo = hi = classic if epsilon < 1.0 else sensitivity / epsilon
    while analytic_gaussian_delta(hi, epsilon, sensitivity) > delta:
        hi *= 2.0
    while analytic_gaussian_delta(lo, epsilon, sensitivity) <= delta:
        lo /= 2.0
    while hi / lo > 1.0 + 1e-13:
        mid = math.sqrt(lo * hi)
        if analytic_gaussian_delta(mid, epsilon, sensitivity) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def sigma_ceiling(delta: float, sensitivity: float) -> float:
    """The largest sigma a release may use: the classic scale ``sqrt(2 ln(1.25/delta)) Delta / eps`` at
    the ε floor (the analytic scale never exceeds the classic one below ε = 1)."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / EPSILON_FLOOR


@dataclass(frozen=True, kw_only=True)
class GaussianMechanism:
    """The Gaussian mechanism for a real-valued statistic of L2 sensitivity ``sensitivity``, float-safe.

    ``clamp_B(round_L(clamp(x) + N(0, sigma^2)))`` per entry (Dwork & Roth 2014, App. A; SPEC §7), with
    sigma calibrated to ``(epsilon, delta)`` by :func:`gaussian_sigma` (build it with
    :func:`calibrated_gaussian`).

    Parameters
    ----------
    epsilon : float
        The release's ε, in ``[EPSILON_FLOOR, EPSILON_CEILING] = [1e-5, 30]``.
    delta : float in (0, 1)
    sigma : float
        Noise scale; between ``sensitivity / 8`` and :func:`sigma_ceiling` (the classic scale at the ε
        floor), so sigma is capped by the ε floor.
    sensitivity : float, default 1.0

    Notes
    -----
    Float-safe release (SPEC §12; :mod:`.snapping`). The statistic is clamped to
    ``+-INPUT_LIMIT = +-2^31``, the noise drawn by :func:`standard_normal`, the sum rounded to the grid
    ``L = 2^(ceil(log2 sigma) - 12)`` (at least ``2^-20``) with the input split on the grid exactly,
    and clamped to ``+-(2^31 + 40 sigma)`` rounded down to the grid.

    * Reachable outputs: from input ``x``, every grid point within 37.6 sigma (the reach of
      :func:`standard_normal`; the images of ``V = 0`` and ``V = 1/2`` alone cover it).
    * Privacy: the ideal mechanism followed by rounding and clamping is post-processing of the
      Gaussian mechanism, ``(epsilon, delta)``-DP. The float implementation's cell probabilities are
      within ``1 +- 2^-28`` of it (:mod:`.snapping`), and two neighbouring inputs (at most
      ``sensitivity <= 8 sigma`` apart) reach the same cells except beyond 29.6 sigma: the release is
      ``(epsilon + 2^-25, delta + e^-400)``-DP.
    * Bias: at most ``L^2 / (4 sigma sqrt(2 pi))`` from rounding (none from the clamps unless the
      statistic exceeds ``2^31``); the variance differs from ``sigma^2`` by at most ``L^2 / 4``.

    References
    ----------
    .. [DR14] C. Dwork, A. Roth, "The algorithmic foundations of differential privacy", 2014, App. A.
    .. [M12] I. Mironov, "On significance of the least significant bits for differential privacy", CCS 2012.
    """

    epsilon: float
    delta: float
    sigma: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        check_epsilon_range(check_positive(self.epsilon, name="epsilon"), what="the Gaussian mechanism")
        if not 0.0 < self.delta < 1.0:
            raise ConfigError(f"delta must be in (0, 1), got {self.delta!r}")
        sigma = check_positive(self.sigma, name="sigma")
        sensitivity = check_positive(self.sensitivity, name="sensitivity")
        if not SIGMA_FLOOR_RATIO * sensitivity <= sigma <= sigma_ceiling(self.delta, sensitivity):
            raise ConfigError(
                f"sigma={sigma:.4g} is outside [{SIGMA_FLOOR_RATIO * sensitivity:.4g}, "
                f"{sigma_ceiling(self.delta, sensitivity):.4g}] for sensitivity {sensitivity:g} and delta {self.delta:g}: "
                "a delta this large for this epsilon gives noise too small to release float-safely; lower delta"
            )

    @cached_property
    def output_grid(self) -> OutputGrid:
        """The public grid and clamp of the outputs."""
        return OutputGrid.for_noise(self.sigma, INPUT_LIMIT + TAIL_SIGMAS * self.sigma)

    def privatize(self, values: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Each entry of ``values`` released with its own noise (same shape, float64)."""
        check_rng(rng)
        x = np.asarray(check_real_array(values, name="values"), dtype=np.float64)
        noise = standard_normal(rng, x.shape)
        noise *= self.sigma
        return self.output_grid.add(x, noise)

    def privatize_symmetric(self, matrix: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """A symmetric matrix released with noise on the upper triangle (diagonal included), mirrored (SPEC §7)."""
        a = np.asarray(check_real_array(matrix, name="matrix"), dtype=np.float64)
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise ConfigError(f"matrix must be square, got shape {a.shape}")
        upper = np.triu_indices(a.shape[0])
        out = np.zeros_like(a)
        out[upper] = self.privatize(a[upper], rng)
        return out + np.triu(out, 1).T

    def variance(self, values: ArrayLike | None = None) -> float:
        """``sigma^2`` per entry, whatever the values (the rounding changes it by at most ``L^2 / 4``)."""
        return self.sigma**2

    def bias(self, values: ArrayLike | None = None) -> float:
        """0: the noise is symmetric (the rounding's bias is at most ``L^2 / (4 sigma sqrt(2 pi))``, and the
        clamps bind only for a statistic beyond ``2^31``)."""
        return 0.0

    @property
    def output_bounds(self) -> tuple[float, float]:
        """The public clamp ``(-B, B)``, ``B = 2^31 + 40 sigma`` rounded down to the grid."""
        return (-self.output_grid.bound, self.output_grid.bound)


def calibrated_gaussian(
    epsilon: float, delta: float, sensitivity: float = 1.0, *, method: str = "analytic"
) -> GaussianMechanism | None:
    """The ``(epsilon, delta)`` Gaussian mechanism for a statistic of L2 sensitivity ``sensitivity``
    (sigma from :func:`gaussian_sigma`), or None at ``epsilon = inf`` (no noise: the non-private
    reference). Public parameters only, so an owner builds it before reading a row: its ε floor and
    ceiling and its sigma bounds refuse there."""
    sigma = gaussian_sigma(epsilon, delta, sensitivity, method=method)
    if sigma == 0.0:
        return None
    return GaussianMechanism(epsilon=epsilon, delta=delta, sigma=sigma, sensitivity=sensitivity)
