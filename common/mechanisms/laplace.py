"""The Laplace family, released float-safely (SPEC §1, §12): the row mechanism with the budget split over
the coordinates (:class:`LaplaceMechanism`) and the evaluation release of federated boosting, an owner's
weighted (error, weight) pair (:class:`ErrorPairLaplace`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError
from privfed.common.mechanisms.base import ErrorPairRelease, Mechanism, clip_error_pairs
from privfed.common.mechanisms.snapping import OutputGrid, check_epsilon_range, full_uniform
from privfed.common.validation import check_rng

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


def error_pair_scale(row_bound: float, epsilon: float) -> float:
    """Laplace scale per coordinate of an :class:`ErrorPairLaplace` release, in weight units: ``2 b / epsilon``
    (0 at ``epsilon = inf``); one row moves each coordinate by at most ``b``, so the pair's L1 sensitivity is ``2 b``."""
    return 0.0 if math.isinf(epsilon) else 2.0 * float(row_bound) / float(epsilon)


@dataclass(frozen=True, kw_only=True)
class ErrorPairLaplace(ErrorPairRelease):
    """The Laplace evaluation release of federated boosting: an owner's weighted (error, weight) pair plus
    ``Lap(2 b / epsilon)`` per coordinate, float-safe and clamped (seed 002 Alg. 2 lines 11-12; SPEC §1, §12;
    Dwork, McSherry, Nissim, Smith TCC 2006).

    Input, per owner: ``(e, w) = (sum_r min(w_r, b) 1[miss_r], sum_r min(w_r, b))``, every row's SAMME weight
    clipped to the public row bound ``b`` first (``privfed.common.boosting.owner.evaluation_sums``); made
    well-formed by :func:`~.base.clip_error_pairs`. Output: the pair plus Laplace noise of scale ``2 b /
    epsilon`` per coordinate (in units of ``b / 2``: scale ``4 / epsilon``), on the public grid of inputs up
    to ``2 max_rows`` (:func:`laplace_grid`: full-precision uniform, grid ``2^-12`` of the scale, clamp 40
    scales out), then clipped to ``[-M, M]``, ``M = b (max_rows + 80 / epsilon)`` (the largest possible pair
    plus 40 noise scales, where the grid's clamp sits, so the clip binds only for an owner holding more than
    ``max_rows`` rows -- biased, never less private: post-processing).

    Privacy (row-level DP, the unit privfed uses for multi-row owners; NCC perturbs every row at ε,
    parallel composition over rows, seed 002 §3.5.1; FedDPDR is add/remove-one-row DP, SPEC §7-8). A row's
    SAMME weight is a function of that row alone and of the public history the coordinator sends (kept
    learners, their α, the published totals of earlier rounds: post-processing of releases already
    debited), so after the clip each row adds a pair ``(u miss, u)``, ``0 <= u <= b``, whatever its features
    and label and whatever history and learner the coordinator names. Adding, removing or replacing one row
    moves each coordinate by at most ``b``: L1 sensitivity ``2 b``, and ``Lap(2 b / epsilon)`` per coordinate
    makes one release ``epsilon``-DP for every row of the owner, independent of how many rows it holds. For
    a one-row owner (the paper's setting, seed 002 §2) the neighbouring data sets are all of its possible
    data: the release is then ``epsilon``-LDP for the owner. Ring membership and re-formed rings do not
    matter: the guarantee is local, and a coordinator's totals are post-processing.

    What is public: ``b``, ``epsilon`` and ``max_rows`` (configuration of the run, checked by the owner).
    The noise does not depend on ``max_rows``; it sizes the clamp ``M`` and with it the secure sum's
    fixed-point range (SPEC §11.1). Row counts are never public.

    Parameters
    ----------
    epsilon : float
        The release's ε, in ``[EPSILON_FLOOR, EPSILON_CEILING]``; ``inf``: the pair clipped to ``[-M, M]``, no
        noise (the non-private reference).
    row_bound : float > 0
        ``b``.
    max_rows : int >= 1
        Public bound on an owner's rows: sizes the clamp only.

    Notes
    -----
    Float safety (SPEC §12; :mod:`.snapping`): for an owner of one row every output on the grid is
    reachable from every input; for larger owners, neighbouring inputs (one row apart) reach the same
    outputs except beyond 700 noise scales (probability below ``e^-700``, counted as δ). Unbiased up to the
    grid's rounding (at most ``2^-24`` of the scale) for pairs within the public range; ``variance`` is the
    exact mechanism's ``8 b^2 / epsilon^2`` per coordinate.
    """

    def _check_finite(self) -> None:
        if not (math.isfinite(self.bound) and math.isfinite(TAIL_SCALES * self.scale)):
            raise ConfigError(
                f"the evaluation release at epsilon={self.epsilon!r} with eval_row_bound={self.row_bound!r} has a "
                "non-finite noise scale or range; use a larger epsilon"
            )
        check_epsilon_range(self.epsilon, name="evaluation epsilon", what="the Laplace evaluation release")
        self.output_grid  # noqa: B018 - public: a range too wide for the grid is refused here, before any row

    @property
    def scale(self) -> float:
        """The Laplace scale per coordinate, ``2 b / epsilon`` (:func:`error_pair_scale`)."""
        return error_pair_scale(self.row_bound, self.epsilon)

    @property
    def noise_scale(self) -> float:
        """The Laplace scale of the noise per coordinate (its standard deviation is ``sqrt 2`` times it)."""
        return self.scale

    @property
    def bound(self) -> float:
        """``M = b max_rows + 40 (2 b / epsilon)``: every output coordinate is in ``[-M, M]``."""
        exact = float(self.row_bound) * float(self.max_rows)
        return exact if math.isinf(self.epsilon) else exact + TAIL_SCALES * self.scale

    @property
    def unit_scale(self) -> float:
        """The Laplace scale in units of ``b / 2``: ``4 / epsilon`` (the sampler works in these units)."""
        return 4.0 / self.epsilon

    @cached_property
    def output_grid(self) -> OutputGrid:
        """The public grid and clamp in units of ``b / 2`` (:func:`laplace_grid` of inputs up to ``2 max_rows``)."""
        return laplace_grid(self.unit_scale, 2.0 * self.max_rows)

    def from_uniform(self, pairs: np.ndarray, u: np.ndarray, signed_scale: np.ndarray) -> np.ndarray:
        """The release of well-formed ``pairs`` from :func:`~.snapping.full_uniform`'s ``(U, s * unit_scale)``
        (same shape): Laplace on the grid, back in weight units, clipped to ``[-M, M]``. Monotone in ``U`` for
        a fixed sign, so :func:`~.snapping.cell_probabilities` gives its exact output distribution."""
        half = float(self.row_bound) / 2.0
        noisy = laplace_from_uniform(pairs / half, u, signed_scale, grid=self.output_grid)
        return np.clip(noisy * half, -self.bound, self.bound)

    def privatize(self, sums: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Each owner's release (n, 2) of its row-clipped ``(e, w)`` (n, 2) (class docstring)."""
        pairs = clip_error_pairs(sums)
        if math.isinf(self.epsilon):
            return np.clip(pairs, -self.bound, self.bound)
        check_rng(rng)
        u, signed_scale = full_uniform(rng, pairs.shape, self.unit_scale)  # Lap(2b/eps) in units of b/2 (SPEC §1)
        return self.from_uniform(pairs, u, signed_scale)

    def variance(self, sums: ArrayLike) -> np.ndarray:
        """``8 b^2 / epsilon^2`` per coordinate (``2 scale^2``; 0 at ``epsilon = inf``), shape of the pairs."""
        return np.full(clip_error_pairs(sums).shape, 2.0 * self.scale**2)

    def bias(self, sums: ArrayLike) -> np.ndarray:
        """The clamp's effect on a well-formed pair, ``clip(pair, -M, M) - pair`` (zero within the public range;
        the rounding's ``2^-24`` of the scale and the clamp's ``e^-40`` tail are left out)."""
        pairs = clip_error_pairs(sums)
        return np.clip(pairs, -self.bound, self.bound) - pairs
