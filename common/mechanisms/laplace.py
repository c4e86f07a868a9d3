"""Laplace mechanism with the budget split over the coordinates (SPEC §1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privfed.common.mechanisms.base import Mechanism, snap

_LOW53 = np.uint64((1 << 53) - 1)
_ONE = np.uint64(1)


@dataclass(frozen=True, kw_only=True)
class LaplaceMechanism(Mechanism):
    """Laplace mechanism on ``[-1, 1]^d``, ``epsilon / d`` per coordinate (SPEC §1).

    ``t*_j = t_j + Lap(b)`` with ``b = 2 d / epsilon`` (sensitivity 2 of each coordinate on
    ``[-1, 1]``), so each coordinate is ``(epsilon/d)``-LDP and the row is ``epsilon``-LDP by
    sequential composition. Unbiased; ``V_j = 2 b^2 = 8 d^2 / epsilon^2``; outputs unbounded.

    Parameters
    ----------
    epsilon : float
        Budget for a whole row, finite and > 0.
    d : int
        Coordinates per row.

    Notes
    -----
    Sampler: one 64-bit word per value. Its low 53 bits give ``V = (k + 1) 2^-53`` in
    ``(0, 1]`` and ``-b ln V`` is an exponential with scale ``b`` (inverse CDF); its top bit
    gives the sign, and a sign-symmetric exponential is a Laplace variable. ``V`` is never 0,
    so the noise is finite: it is truncated at ``53 b ln 2 ~ 36.7 b`` (tail mass
    ``2^-53``, negligible).

    Floating point (SPEC §12): the textbook float Laplace sampler is open to Mironov's
    distinguishing attack; reports are rounded to the grid ``2**-20`` after sampling
    (:func:`~privfed.common.mechanisms.base.snap`), a bias of at most ``2**-21``. This is the
    snapping-style mitigation the SPEC asks for, without the clamping of Mironov's full
    snapping mechanism, so its guarantee is the exact mechanism's up to that approximation.

    References
    ----------
    .. [DMNS06] C. Dwork, F. McSherry, K. Nissim, A. Smith, "Calibrating noise to sensitivity
       in private data analysis", TCC 2006.
    .. [M12] I. Mironov, "On significance of the least significant bits for differential
       privacy", CCS 2012.
    """

    @property
    def scale(self) -> float:
        """Laplace scale per coordinate, ``b = 2 d / epsilon``."""
        return 2.0 * self.d / self.epsilon

    def _sample_block(self, t: np.ndarray, rng: np.random.Generator, out: np.ndarray) -> None:
        raw = rng.bit_generator.random_raw(out.size).reshape(out.shape)
        mag = raw & _LOW53
        mag += _ONE
        np.multiply(mag, 2.0**-53, out=out)  # V in (0, 1]
        np.log(out, out=out)  # ln V <= 0
        out *= self.scale  # -Exp(b)
        np.copysign(out, raw.view(np.float64), out=out)  # sign := bit 63 of the word
        out += t
        snap(out)

    def _variance(self, t: np.ndarray) -> np.ndarray:
        return np.full_like(t, 2.0 * self.scale**2)

    @property
    def output_bounds(self) -> tuple[float, float]:
        return (-math.inf, math.inf)

    @property
    def max_abs_output(self) -> float:
        """``1 + 53 ln 2 b`` (snapped up): the sampler's noise is truncated where ``V = 2^-53``."""
        return 1.0 + 53.0 * math.log(2.0) * self.scale + 2.0**-20
