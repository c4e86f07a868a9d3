"""Duchi et al.'s mechanisms: one-dimensional (coordinate-wise) and multidimensional (SPEC §2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privfed.common.mechanisms.base import Mechanism


def duchi_constant(epsilon: float) -> float:
    """``C_D(eps) = (e^eps + 1)/(e^eps - 1) = coth(eps/2)`` (SPEC §2.1), stable for large eps."""
    return 1.0 / math.tanh(epsilon / 2.0)


def duchi_multidim_constant(d: int, epsilon: float) -> float:
    """``B(d, eps) = C_D(eps) 2^(d-1) / binom(d-1, floor((d-1)/2))`` (SPEC §2.2).

    Computed in log space with :func:`math.lgamma` so that any ``d`` works (B grows like ``sqrt(d)``);
    the relative error is about ``1e-16 d ln d`` (the absolute error of ``lgamma(d)``); no scipy, so an owner node using PM (which imports this module) does not load scipy.
    """
    d += 1 - d % 2  # B(d) = B(d + 1) for even d, exactly
    m = (d - 1) // 2
    log_binom = math.lgamma(d) - math.lgamma(m + 1) - math.lgamma(d - m)
    return duchi_constant(epsilon) * math.exp((d - 1) * math.log(2.0) - float(log_binom))


@dataclass(frozen=True, kw_only=True)
class Duchi1D(Mechanism):
    """Duchi et al.'s one-dimensional mechanism, applied to each coordinate (SPEC §2.1).

    ``t* = +C_D`` with probability ``1/2 + t (e^eps - 1)/(2 e^eps + 2)``, else ``-C_D``,
    ``C_D = (e^eps + 1)/(e^eps - 1)``. Unbiased; ``V(t) = C_D^2 - t^2``; the ratio
    ``P[+ | 1] / P[+ | -1] = e^eps`` exactly.

    Each coordinate gets the full ``epsilon``: this is a building block (for the Hybrid
    mechanism and for ``d = 1``), ``d * epsilon``-LDP for a whole row. For rows use
    :class:`DuchiMultidim` or split the budget.

    Parameters
    ----------
    epsilon : float
        Budget of each coordinate, finite and > 0.
    d : int, default 1
        Coordinates per row.

    Notes
    -----
    Sampler: one uniform per value. Outputs are the two constants ``±C_D`` whatever the
    input, so there is no floating-point leak to snap away (SPEC §12).

    References
    ----------
    .. [DJW18] J. C. Duchi, M. I. Jordan, M. J. Wainwright, "Minimax optimal procedures for
       locally private estimation", JASA 2018.
    .. [W19] N. Wang et al., "Collecting and analyzing multidimensional data with local
       differential privacy", ICDE 2019, Algorithm 1.
    """

    d: int = 1

    @property
    def constant(self) -> float:
        """``C_D(epsilon)``."""
        return duchi_constant(self.epsilon)

    def _sample_block(self, t: np.ndarray, rng: np.random.Generator, out: np.ndarray) -> None:
        rng.random(out=out)
        duchi_from_uniform(t, out, self.epsilon)

    def _variance(self, t: np.ndarray) -> np.ndarray:
        return self.constant**2 - t * t

    @property
    def output_bounds(self) -> tuple[float, float]:
        c = self.constant
        return (-c, c)


def duchi_from_uniform(t: np.ndarray, u: np.ndarray, epsilon: float, scale: float = 1.0) -> np.ndarray:
    """Turn uniforms ``u`` (in place) into ``scale * Duchi1D(t, epsilon)``; one uniform per value.

    ``P[+] = 1/2 + (t/2) tanh(eps/2)``, tested as ``(U - 1/2) / (tanh(eps/2)/2) < t``.
    """
    c = duchi_constant(epsilon) * scale
    u -= 0.5
    u *= 2.0 / math.tanh(epsilon / 2.0)
    positive = u < t
    np.multiply(positive, 2.0 * c, out=u)
    u -= c
    return u


@dataclass(frozen=True, kw_only=True)
class DuchiMultidim(Mechanism):
    """Duchi et al.'s mechanism for ``t`` in ``[-1, 1]^d`` (Wang et al. Alg. 3; SPEC §2.2).

    1. ``v_j = ±1`` independently with ``P[v_j = 1] = 1/2 + t_j/2``;
    2. ``u ~ Bernoulli(e^eps / (e^eps + 1))``;
    3. output ``B z`` with ``z`` uniform on ``{z : z.v > 0}`` if ``u = 1``, on ``{z.v < 0}`` if
       ``u = 0``.

    ``B(d, eps) = C_D(eps) 2^(d-1) / binom(d-1, floor((d-1)/2))``. Unbiased,
    ``V_j = B^2 - t_j^2``, ``epsilon``-LDP for the whole row.

    Even ``d`` (SPEC §2.2: sources disagree): ties ``z.v = 0`` get half weight, i.e. given
    ``u = 1``, ``P(z) = 2^(1-d)`` if ``z.v > 0`` and ``2^-d`` if ``z.v = 0``. This equals padding
    a dummy coordinate 0 and running ``d + 1``; it is exactly ε-LDP and unbiased with
    ``B(d) = B(d + 1)``. ("Ties go to T-", common in public code, is biased and not ε-LDP.)

    Parameters
    ----------
    epsilon : float
        Budget for a whole row, finite and > 0.
    d : int
        Coordinates per row.

    Notes
    -----
    O(d) sampler, never enumerating the ``2^d`` vertices: draw ``w`` uniform in ``{±1}^d`` and
    set ``z = v * w``; then ``s = z.v = sum(w)``. If ``(u = 1 and s < 0)`` or
    ``(u = 0 and s > 0)`` flip ``z``. Flipping pairs ``z`` with ``-z``, so every vertex on the
    wanted side gets ``2^(1-d)`` and each tie keeps its ``2^-d``: the half-weight rule.
    Randomness per row: ``d + 1`` uniforms and ``d`` random bits.

    Outputs are the constants ``±B``, so there is no floating-point leak (SPEC §12).

    References
    ----------
    .. [DJW18] J. C. Duchi, M. I. Jordan, M. J. Wainwright, "Minimax optimal procedures for
       locally private estimation", JASA 2018.
    .. [W19] N. Wang et al., "Collecting and analyzing multidimensional data with local
       differential privacy", ICDE 2019, Algorithm 3.
    """

    @property
    def constant(self) -> float:
        """``B(d, epsilon)``."""
        return duchi_multidim_constant(self.d, self.epsilon)

    @property
    def p(self) -> float:
        """``P[u = 1] = e^eps / (e^eps + 1)``."""
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    def _sample_block(self, t: np.ndarray, rng: np.random.Generator, out: np.ndarray) -> None:
        m, d = out.shape
        b = self.constant
        rng.random(out=out)
        buf = np.frombuffer(rng.bytes((m * d + 7) // 8), dtype=np.uint8)
        w_pos = np.unpackbits(buf, count=m * d).view(bool).reshape(m, d)  # w_j = +1
        u = rng.random(m) < self.p
        s = 2 * np.count_nonzero(w_pos, axis=1) - d  # z.v = sum(w)
        flip = np.where(u, s < 0, s > 0)
        out *= 2.0
        out -= 1.0
        negative = out < t  # v_j = +1, with P = (1 + t_j)/2 ...
        negative ^= w_pos  # ... so now z_j = v_j w_j = -1 (v_j, w_j differ)
        negative ^= flip[:, None]  # z <- -z on flipped rows
        np.multiply(negative, -2.0 * b, out=out)
        out += b

    def _variance(self, t: np.ndarray) -> np.ndarray:
        return self.constant**2 - t * t

    @property
    def output_bounds(self) -> tuple[float, float]:
        b = self.constant
        return (-b, b)
