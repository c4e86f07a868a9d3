"""Laplace mechanism with the budget split over the coordinates (SPEC §1), released float-safely (SPEC §12)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from privfed.common.mechanisms.base import Mechanism
from privfed.common.mechanisms.snapping import OutputGrid, full_uniform

#: The clamp sits this many Laplace scales beyond the input range: the mass it moves is ``e^-40 / 2``.
TAIL_SCALES = 40.0


def laplace_from_uniform(
    x: np.ndarray, u: np.ndarray, signed_scale: np.ndarray, *, grid: OutputGrid, out: np.ndarray | None = None
) -> np.ndarray:
    """``clamp(round(x + s b ln u))`` on ``grid``: the Laplace release of ``x`` from uniforms ``u``.

    ``(u, s b)`` come from :func:`~privfed.common.mechanisms.snapping.full_uniform` with
    ``magnitude=b`` (``signed_scale``): ``b (-ln U)`` is exponential with scale ``b`` and a random sign
    ``s = +-1`` makes it Laplace. Monotone in ``u`` for a fixed sign (the adversary tests and
    :func:`~privfed.common.mechanisms.snapping.cell_probabilities` replay it). Written into ``out``
    (a new array if None), which must not be ``u``'s buffer if ``u`` is needed afterwards.
    """
    out = np.log(u, out=out)  # ln U in [-708, 0)
    out *= signed_scale  # -s times an exponential of scale b
    return grid.add(x, out)


def laplace_grid(scale: float, input_bound: float) -> OutputGrid:
    """The public grid of Laplace noise of scale ``b`` on inputs in ``[-input_bound, input_bound]``:
    ``2^-12`` of ``b`` (power of two), clamped :data:`TAIL_SCALES` scales beyond the inputs."""
    return OutputGrid.for_noise(scale, input_bound + TAIL_SCALES * scale)


@dataclass(frozen=True, kw_only=True)
class LaplaceMechanism(Mechanism):
    """Laplace mechanism on ``[-1, 1]^d``, ``epsilon / d`` per coordinate (SPEC §1).

    ``t*_j = t_j + Lap(b)`` with ``b = 2 d / epsilon`` (sensitivity 2 of each coordinate on
    ``[-1, 1]``), so each coordinate is ``(epsilon/d)``-LDP and the row is ``epsilon``-LDP by
    sequential composition. Unbiased; ``V_j = 2 b^2 = 8 d^2 / epsilon^2``.

    Parameters
    ----------
    epsilon : float
        Budget for a whole row, in ``[EPSILON_FLOOR, EPSILON_CEILING] = [1e-5, 30]``.
    d : int
        Coordinates per row.

    Notes
    -----
    Float-safe release (SPEC §12; Mironov CCS 2012, the snapping mechanism; :mod:`.snapping`).
    One 64-bit word per value gives a full-precision uniform ``U`` and a sign; the report is
    ``clamp_B(round_L(t + s b (-ln U)))`` with the grid ``L = 2^(ceil(log2 b) - 12)`` (at least
    ``2^-20``) and ``B = 1 + 40 b`` rounded down to the grid (:func:`laplace_grid`).

    * Reachable reports: every multiple of ``L`` in ``[-B, B]``, for every input ``t`` -- the
      noise is gap-free at ``L`` out to 708 scales, and the clamps are at most ``2/b + 40 =
      epsilon/d + 40 <= 70`` scales from any input.
    * Privacy: the ideal mechanism followed by rounding and clamping is post-processing of the
      Laplace mechanism, so ``epsilon``-LDP; the float implementation's cell probabilities are
      within a factor ``1 +- 2^-28`` of it, so it is ``(epsilon + 2^-25)``-LDP (module
      :mod:`.snapping`, "Privacy argument"; the unit tests check the ratio on exact cell
      probabilities).
    * Bias: rounding a density of total variation ``1/b`` to a grid ``L`` moves the mean by at most
      ``L^2 / (4 b) <= 2^-24 b``; the clamp by at most ``b e^-40``. The variance changes by at most
      ``L^2 / 4``. ``bias`` reports the exact mechanism's 0.

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

    @cached_property
    def output_grid(self) -> OutputGrid:
        """The public grid and clamp of the reports (:func:`laplace_grid` on inputs in ``[-1, 1]``)."""
        return laplace_grid(self.scale, 1.0)

    def _sample_block(self, t: np.ndarray, rng: np.random.Generator, out: np.ndarray) -> None:
        u, signed_scale = full_uniform(rng, out.shape, self.scale, work=out)
        laplace_from_uniform(t, u, signed_scale, grid=self.output_grid, out=out)

    def _variance(self, t: np.ndarray) -> np.ndarray:
        return np.full_like(t, 2.0 * self.scale**2)

    @property
    def bias_bound(self) -> float:
        """``|E[t*] - t| <= L^2 / (4 b) + b e^-40`` for the float-safe release (rounding, then the clamp)."""
        return self.output_grid.grid**2 / (4.0 * self.scale) + self.scale * math.exp(-TAIL_SCALES)

    @property
    def output_bounds(self) -> tuple[float, float]:
        bound = self.output_grid.bound
        return (-bound, bound)

    @property
    def max_abs_output(self) -> float:
        """``B``; ``inf`` if the grid cannot be built (so the range check refuses the ε)."""
        try:
            return self.output_grid.bound
        except ValueError:
            return math.inf
