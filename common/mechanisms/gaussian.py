"""Gaussian noise, released float-safely (SPEC §7, §8, §12): the central Gaussian mechanism of DP-PCA
and the DP class sums, and the float-safe normal and Gamma draws of the SVMs' objective perturbation.

The calibration of sigma (classic or analytic, Balle & Wang 2018) stays with its users
(:func:`privfed.common.feddpdr.pca.gaussian_sigma`); this module draws and releases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.snapping import EPSILON_FLOOR, OutputGrid, check_epsilon_range, full_uniform
from privfed.common.validation import check_positive, check_real_array, check_rng

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


def sigma_ceiling(delta: float, sensitivity: float) -> float:
    """The largest sigma a release may use: the classic scale ``sqrt(2 ln(1.25/delta)) Delta / eps`` at
    the ε floor (the analytic scale never exceeds the classic one below ε = 1)."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / EPSILON_FLOOR


@dataclass(frozen=True, kw_only=True)
class GaussianMechanism:
    """The Gaussian mechanism for a real-valued statistic of L2 sensitivity ``sensitivity``, float-safe.

    ``clamp_B(round_L(clamp(x) + N(0, sigma^2)))`` per entry (Dwork & Roth 2014, App. A; SPEC §7), with
    sigma calibrated by the caller to ``(epsilon, delta)`` (:func:`privfed.common.feddpdr.pca.gaussian_sigma`).

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

    def variance(self) -> float:
        """``sigma^2`` per entry."""
        return self.sigma**2
