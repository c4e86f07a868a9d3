"""Piecewise Mechanism and Hybrid Mechanism, one coordinate at a time (SPEC §3.1, §3.3).

Wang et al., ICDE 2019: PM is §III-B / Algorithm 2, HM is §III-C. The d-dimensional sampling
scheme (§IV / Algorithm 4) that reports rows through them is
:mod:`privfed.common.mechanisms.piecewise_multidim`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from privfed.common.mechanisms.base import Mechanism
from privfed.common.mechanisms.duchi import duchi_constant, duchi_from_uniform
from privfed.common.mechanisms.snapping import OutputGrid, full_uniform

#: HM threshold eps* = ln((-5 + 2 cbrt(6353 - 405 sqrt 241) + 2 cbrt(6353 + 405 sqrt 241)) / 27).
HM_EPSILON_STAR = 0.6093524930273093

#: Above this the tail mass of PM (about e^-eps/2) is far below the 2^-53 resolution of a
#: uniform draw; the sampler uses this value to keep its constants finite.
_SAMPLER_EPS_CAP = 700.0


def _exp(x: float) -> float:
    return math.exp(x) if x < 709.0 else math.inf


# --- PM (Algorithm 2, SPEC §3.1) --------------------------------------------------------


def pm_constant(epsilon: float) -> float:
    """``C = (e^(eps/2) + 1)/(e^(eps/2) - 1) = coth(eps/4)``: PM outputs lie in ``[-C, C]``."""
    return 1.0 / math.tanh(epsilon / 4.0)


def pm_variance(t: np.ndarray, epsilon: float) -> np.ndarray:
    """``V(t) = t^2/(e^(eps/2) - 1) + (e^(eps/2) + 3)/(3 (e^(eps/2) - 1)^2)`` (SPEC §3.1), stable form."""
    g = 1.0 / math.expm1(epsilon / 2.0) if epsilon < 1400.0 else 0.0
    e = math.exp(-epsilon / 2.0)
    return t * t * g + g * (1.0 + 3.0 * e) / (-3.0 * math.expm1(-epsilon / 2.0))


def pm_grid(epsilon: float, scale: float = 1.0) -> OutputGrid:
    """The public grid of ``scale * PM(t, epsilon)``: ``2^-12`` of the centre width ``scale (C - 1)``
    (a power of two, at least ``2^-20``), clamped at ``scale C`` rounded *down* to it, so the
    outermost cells keep at least half a cell of the density
    (:class:`~privfed.common.mechanisms.snapping.OutputGrid`). The centre width, not ``C``, sets
    the grid: at large ε the output concentrates on ``[l(t), r(t)]``, of width ``C - 1 ~ 2 e^-eps/2``."""
    eps = min(epsilon, _SAMPLER_EPS_CAP)
    return OutputGrid.for_noise(scale * 2.0 / math.expm1(eps / 2.0), scale * pm_constant(eps))


def pm_bias_bound(epsilon: float, scale: float = 1.0) -> float:
    """``|E[report] - scale t|`` of the float-safe ``scale * PM`` release: at most ``min(L, 2 L^2 p / scale)``.

    Rounding a density of total variation ``2 p / scale`` to the grid ``L`` moves the mean by at most
    ``L^2 p / (2 scale)``; the clamp moves a mass below ``3 L p / (2 scale)`` by at most ``3 L / 2``; and no
    report moves by more than ``L`` in all."""
    grid = pm_grid(epsilon, scale).grid
    eps = min(epsilon, _SAMPLER_EPS_CAP)
    p = 0.5 * math.exp(eps / 2.0) * math.tanh(eps / 4.0)
    return min(grid, 2.0 * grid**2 * p / scale)


def pm_inverse_cdf(
    t: np.ndarray, u: np.ndarray, epsilon: float, factor: float = 1.0, out: np.ndarray | None = None
) -> np.ndarray:
    """``factor`` times the PM output with CDF value ``u`` for inputs ``t``; in ``out`` (may be ``t``), ``u`` destroyed.

    Exact inverse CDF of the PM output density: with the left-tail line ``y1 = s U - C``,
    the centre line ``y2 = l(t) + a (U - L(t))`` and the right-tail line
    ``y3 = C - s (1 - U)`` (``s`` the tail slope, ``a`` the centre slope, ``L(t)`` the left
    tail mass), the inverse CDF is their median ``max(min(y1, y2), y3)``: the tails are
    steeper than the centre and ``y3 < y1``. Non-decreasing in ``u``. ``factor`` scales the lines'
    constants, and ``y2`` is formed as ``a (u + (c1 t + c0) / a)``, so no block-sized temporary is
    needed; those roundings are part of the float error the privacy argument bounds.
    """
    eps = min(epsilon, _SAMPLER_EPS_CAP)
    c = pm_constant(eps)
    h = math.exp(eps / 2.0)
    slope_tail = (c + 1.0) * (h + 1.0)  # (C + 1) / (1 - P_centre)
    slope_centre = (c - 1.0) / (h / (h + 1.0))  # = slope_tail * e^-eps
    shrink = -math.expm1(-eps)  # 1 - a/s
    c1 = shrink * (c + 1.0) / 2.0  # y2 = a U + c1 t + c0
    c0 = -shrink * (c - 1.0) / 2.0 - c * math.exp(-eps)
    c, slope_tail, slope_centre, c1, c0 = (factor * v for v in (c, slope_tail, slope_centre, c1, c0))
    centre = np.multiply(t, c1 / slope_centre, out=out)
    centre += c0 / slope_centre
    centre += u
    centre *= slope_centre  # y2
    u *= slope_tail
    u -= c  # y1
    np.minimum(u, centre, out=centre)
    u += 2.0 * c - slope_tail  # y3
    np.maximum(u, centre, out=centre)
    return centre


def pm_from_uniform(
    t: np.ndarray,
    u: np.ndarray,
    sign: np.ndarray,
    epsilon: float,
    grid: OutputGrid,
    scale: float = 1.0,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``clamp(round(scale * PM(t, epsilon)))`` on ``grid`` from full-precision uniforms ``u`` (destroyed)
    and signs ``+-1``; in ``out`` (a new array if None).

    The PM output is symmetric, ``PM(-t) = -PM(t)`` in distribution, so with ``W = u / 2`` uniform on
    ``(0, 1/2)`` the output ``s F_st^-1(W)`` is ``F_t^-1(W)`` for ``s = 1`` and ``-F_-t^-1(W) =
    F_t^-1(1 - W)`` for ``s = -1``: ``F_t^-1`` of a uniform on (0, 1) whose both tails are at full
    double precision (a 53-bit uniform leaves gaps of ``slope * 2^-53`` in the tails, which grow like
    ``e^(eps/2)``). Monotone in ``u`` for a fixed sign.
    """
    u *= 0.5
    flipped = np.multiply(t, sign, out=out)
    out = pm_inverse_cdf(flipped, u, epsilon, scale / grid.grid, out=flipped)  # in grid units
    out *= sign
    return grid.round(out)


@dataclass(frozen=True, kw_only=True)
class PiecewiseMechanism(Mechanism):
    """Piecewise Mechanism of Wang et al. (ICDE 2019, §III-B, Algorithm 2; SPEC §3.1), per coordinate.

    With ``C = (e^(eps/2) + 1)/(e^(eps/2) - 1)``, ``l(t) = (C + 1) t / 2 - (C - 1)/2`` and
    ``r(t) = l(t) + C - 1``, the output density is ``p`` on ``[l, r]`` and ``p / e^eps`` on the
    rest of ``[-C, C]``, ``p = (e^eps - e^(eps/2)) / (2 e^(eps/2) + 2)``. Unbiased;
    ``V(t) = t^2/(e^(eps/2) - 1) + (e^(eps/2) + 3)/(3 (e^(eps/2) - 1)^2)``.

    Each coordinate gets the full ``epsilon``: a building block (``d * epsilon``-LDP for a
    row). For rows use :class:`PiecewiseMultidim` (Algorithm 4).

    Parameters
    ----------
    epsilon : float
        Budget of each coordinate, finite and > 0.
    d : int, default 1
        Coordinates per row.

    Notes
    -----
    Sampler: one 64-bit word per value, a full-precision uniform and a fair sign, through the exact
    inverse CDF (:func:`pm_from_uniform`); the SPEC's two-uniform recipe gives the same distribution.

    Float-safe release (SPEC §12, Mironov CCS 2012; :mod:`.snapping`): reports are rounded to the
    grid ``L = 2^(ceil(log2 (C - 1)) - 12)`` (at least ``2^-20``) and clamped to ``[-B, B]``,
    ``B = C`` rounded down to the grid (:func:`pm_grid`).

    * Reachable reports: every multiple of ``L`` in ``[-B, B]``, for every input: the inverse CDF
      is continuous and both tails of the uniform are at full precision, so its image has no gap
      coarser than ``C 2^-50``.
    * Privacy: the PM density lies in ``[p e^-eps, p]`` for every input, so a cell's probability is
      in ``[(L - 2 eta) p e^-eps, (L + 2 eta) p]`` for the float error ``eta <= 2^-49 C <= 2^-28 L``:
      the ratio of two inputs' probabilities is at most ``e^eps (1 + 2^-26)`` (the outermost cells
      are between ``L/2`` and ``3L/2`` wide).
    * Bias: at most :func:`pm_bias_bound`, ``min(L, 2 L^2 p)`` (``3.9e-7`` at ε = 1); the variance
      stays within a relative ``10^-5`` of the closed form (the unit tests compute both exactly
      from the float implementation's cell probabilities). ``bias`` reports the exact 0.

    References
    ----------
    .. [W19] N. Wang, X. Xiao, Y. Yang, J. Zhao, S. C. Hui, H. Shin, J. Shin, G. Yu,
       "Collecting and analyzing multidimensional data with local differential privacy",
       ICDE 2019.
    .. [M12] I. Mironov, "On significance of the least significant bits for differential
       privacy", CCS 2012.
    """

    d: int = 1

    @property
    def constant(self) -> float:
        """``C(epsilon)``."""
        return pm_constant(self.epsilon)

    @property
    def p(self) -> float:
        """Density on the centre piece ``[l(t), r(t)]``."""
        h = _exp(self.epsilon / 2.0)
        return 0.5 * h * math.tanh(self.epsilon / 4.0)

    @property
    def p_centre(self) -> float:
        """Probability of the centre piece, ``e^(eps/2) / (e^(eps/2) + 1)``."""
        return 1.0 / (1.0 + math.exp(-self.epsilon / 2.0))

    def centre_interval(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(l(t), r(t))`` for values ``t``."""
        c = self.constant
        left = (c + 1.0) / 2.0 * np.asarray(t, dtype=np.float64) - (c - 1.0) / 2.0
        return left, left + c - 1.0

    @cached_property
    def output_grid(self) -> OutputGrid:
        """The public grid and clamp of the reports (:func:`pm_grid`)."""
        return pm_grid(self.epsilon)

    def _sample_block(self, t: np.ndarray, rng: np.random.Generator, out: np.ndarray) -> None:
        u, sign = full_uniform(rng, out.shape, work=out)
        pm_from_uniform(t, u, sign, self.epsilon, self.output_grid, out=out)

    def _variance(self, t: np.ndarray) -> np.ndarray:
        return pm_variance(t, self.epsilon)

    @property
    def bias_bound(self) -> float:
        """Bound on ``|E[t*] - t|`` of the float-safe release (:func:`pm_bias_bound`)."""
        return pm_bias_bound(self.epsilon)

    @property
    def output_bounds(self) -> tuple[float, float]:
        c = self.output_grid.bound
        return (-c, c)


# --- HM (§III-C, SPEC §3.3) ------------------------------------------------------------


def hm_alpha(epsilon: float) -> float:
    """Probability of the PM branch: ``1 - e^(-eps/2)`` if ``eps > eps*``, else 0."""
    return -math.expm1(-epsilon / 2.0) if epsilon > HM_EPSILON_STAR else 0.0


def hm_variance(t: np.ndarray, epsilon: float) -> np.ndarray:
    """``alpha V_PM(t) + (1 - alpha)(C_D^2 - t^2)``; constant in ``t`` for ``eps > eps*``."""
    alpha = hm_alpha(epsilon)
    return alpha * pm_variance(t, epsilon) + (1.0 - alpha) * (duchi_constant(epsilon) ** 2 - t * t)


def hm_bound(epsilon: float, scale: float = 1.0) -> float:
    """Largest ``|scale * HM(t)|``: the PM clamp if the PM branch is used, else ``scale C_D``."""
    duchi = scale * duchi_constant(epsilon)
    return max(pm_grid(epsilon, scale).bound, duchi) if hm_alpha(epsilon) > 0 else duchi


def sample_hm(
    t: np.ndarray, epsilon: float, rng: np.random.Generator, out: np.ndarray, scale: float = 1.0
) -> np.ndarray:
    """Write ``scale * HM(t, epsilon)`` into ``out``: PM values on their grid (:func:`pm_from_uniform`),
    Duchi values the two public constants. Three 64-bit words per value (Duchi, PM, branch)."""
    rng.random(out=out)
    duchi = duchi_from_uniform(t, out.copy(), epsilon, scale)
    alpha = hm_alpha(epsilon)
    if alpha == 0.0:
        out[...] = duchi
        return out
    u, sign = full_uniform(rng, out.shape)
    pm_from_uniform(t, u, sign, epsilon, pm_grid(epsilon, scale), scale, out=out)
    use_duchi = rng.random(out.shape) >= alpha
    np.copyto(out, duchi, where=use_duchi)
    return out


@dataclass(frozen=True, kw_only=True)
class HybridMechanism(Mechanism):
    """Hybrid Mechanism of Wang et al. (ICDE 2019, §III-C; SPEC §3.3), per coordinate.

    With probability ``alpha = 1 - e^(-eps/2)`` (if ``eps > eps* = 0.60935...``, else 0) output
    PM(t, eps), otherwise Duchi-1D(t, eps). Unbiased; for ``eps > eps*`` the variance is
    constant in ``t``: ``(e^(eps/2) + 3)/(3 e^(eps/2)(e^(eps/2) - 1)) + (e^eps + 1)^2/(e^(eps/2)(e^eps - 1)^2)``.
    Each coordinate gets the full ``epsilon`` (a building block, like :class:`PiecewiseMechanism`).

    Notes
    -----
    Two uniforms per value (branch and value) and the PM branch's full-precision uniform. PM
    outputs are float-safe as in :class:`PiecewiseMechanism` (grid, clamp, reachability; SPEC
    §12); the Duchi outputs ``±C_D`` are two public constants, the same for every input.

    References
    ----------
    .. [W19] N. Wang et al., "Collecting and analyzing multidimensional data with local
       differential privacy", ICDE 2019, §III-C.
    """

    d: int = 1

    @property
    def alpha(self) -> float:
        return hm_alpha(self.epsilon)

    @cached_property
    def output_grid(self) -> OutputGrid:
        """The grid and clamp of the PM branch's reports (:func:`pm_grid`)."""
        return pm_grid(self.epsilon)

    def _sample_block(self, t: np.ndarray, rng: np.random.Generator, out: np.ndarray) -> None:
        sample_hm(t, self.epsilon, rng, out)

    def _variance(self, t: np.ndarray) -> np.ndarray:
        return hm_variance(t, self.epsilon)

    @property
    def bias_bound(self) -> float:
        """Bound on ``|E[t*] - t|``: the PM branch's (:func:`pm_bias_bound`); the Duchi branch is exact."""
        return pm_bias_bound(self.epsilon) if self.alpha > 0 else 0.0

    @property
    def output_bounds(self) -> tuple[float, float]:
        c = hm_bound(self.epsilon)
        return (-c, c)
