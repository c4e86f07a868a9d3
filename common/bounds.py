"""Public feature bounds and the map between data space and the mechanisms' [-1, 1] (SPEC §4).

Bounds are configuration: they come from flags, a bounds file or a data set's published
description, never from the private rows themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError

#: Values below this magnitude are read as 0 (:func:`flush_tiny`): their products with what the mechanisms compute
#: could be subnormal, whose arithmetic takes the CPU's slow path. ``2^-300 ~ 5e-91`` is far below every rounding
#: they enter. A feature is at least :data:`NARROWEST` wide, so :meth:`Bounds.to_unit` maps 0 and such a value
#: to the same ``t`` when the lower bound is 0 or at least ``2^-246`` in magnitude (``x - lo`` rounds to ``-lo``,
#: or ``2x/w - 1`` to ``-1``), and within one rounding step (``2^-53``) otherwise. FedDPDR's scalings divide it
#: by the bounds' radius: a value below ``2^-300 / R``, which moves no release by more than that, far inside
#: its output grid (``2^-20`` and coarser), and which the solvers zeroed already (:mod:`.mechanisms.amp`).
TINY = 2.0**-300
#: A float's magnitude orders as its bits without the sign bit (:func:`flush_tiny`).
_MAGNITUDE, _TINY_BITS = np.int64(2**63 - 1), np.float64(TINY).view(np.int64)
#: The narrowest bounds a feature may have: below it, reading a tiny value as 0 (:data:`TINY`) could move its
#: mapped value, so such bounds are refused (no data set documents a feature this narrow).
NARROWEST = 2.0**-200


#: ``exp`` of an argument below ``-EXP_FLOOR`` is read as 0 (:func:`exp_nonpositive`). ``e^-300 ~ 2^-433``, so a
#: probability made from it, times a row value (0 or at least ``2^-300``; a mapped one, at least ``2^-53``) and a
#: weight, is still a normal float, and ``e^-300`` is below the rounding of every sum it enters.
EXP_FLOOR = 300.0


def exp_nonpositive(a: ArrayLike) -> np.ndarray:
    """``exp(a)`` for ``a <= 0``, 0 below ``-EXP_FLOOR``, where it is never computed.

    Why (audits 8, 9): ``exp`` of an argument below -708 is subnormal (0 below -745), and an operation whose
    result underflows takes the same slow path as a subnormal operand; the arguments of the owner's fits are
    scores of its rows under a model the coordinator may choose, so an unclamped ``exp`` let the time of an
    ``lr_gradient`` answer count the rows whose scores it placed in ``[-745, -708]`` (``tests/adversary/
    test_underflow_parameters.py``). Branch-free: the same work for every value."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(a < -EXP_FLOOR, 0.0, np.exp(np.maximum(a, -EXP_FLOOR)))


def flush_tiny(values: ArrayLike) -> np.ndarray:
    """A copy of ``values`` (as float64) with every entry below :data:`TINY` in magnitude set to ``+0.0``.

    Why (audit 8): on x86 an operation with a subnormal operand or result takes a microcode assist, tens to
    hundreds of cycles (B. Andrysco et al., "On subnormal floating point and abnormal timing", IEEE S&P 2015).
    An owner's rows holding 1e-310 where another's hold 0 were told apart from one answer's time at 0.65-0.75
    (``bench/timing_channels.py``, the ``tiny-zero vs subnormal`` lines), though every release reads the two
    alike. The owner reads its rows through this when they are loaded (:class:`~privfed.owner.local.LocalOwner`,
    :func:`~privfed.owner.data.row_digests`), and the FedDPDR solvers their scaled rows (:mod:`.mechanisms.amp`).
    A function of each value alone: neighbouring data sets stay neighbours, so no guarantee changes; and with
    the bounds at least :data:`NARROWEST` wide, no release moves by more than the rounding it already does
    (:data:`TINY`)."""
    array = np.asarray(values, dtype=np.float64)
    # On the bits: a floating-point comparison of a subnormal is itself an operation on one (audit 9: this
    # also reads the coordinator's parameters, which may be subnormal). No branch: the same work for any value.
    return np.where(array.view(np.int64) & _MAGNITUDE < _TINY_BITS, 0.0, array)


@dataclass(frozen=True)
class Bounds:
    """Per-feature public bounds ``lo[j] <= x[:, j] <= hi[j]``.

    Parameters
    ----------
    lo, hi : array_like of shape (d,), or scalars broadcast to ``d`` by :meth:`of`. Read as 0 below ``2^-300``
        once checked (:func:`flush_tiny`): a served model's bounds are the coordinator's, and ``lo = -1e-310``
        clipped a query's negative values to a subnormal, whose arithmetic took the slow path (audit 9).
    """

    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self) -> None:
        lo = np.atleast_1d(np.asarray(self.lo, dtype=np.float64))
        hi = np.atleast_1d(np.asarray(self.hi, dtype=np.float64))
        if lo.shape != hi.shape or lo.ndim != 1:
            raise ConfigError(f"bounds lo and hi must be 1-D of one length, got shapes {lo.shape} and {hi.shape}")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ConfigError("bounds must be finite numbers")
        if np.any(hi <= lo):
            j = int(np.argmax(hi <= lo))
            raise ConfigError(f"bounds need lo < hi for every feature; feature {j} has lo={lo[j]}, hi={hi[j]}")
        with np.errstate(over="ignore"):
            narrow = hi - lo < NARROWEST  # an overflow (inf) is wide, which the check below refuses
        if np.any(narrow):
            j = int(np.argmax(narrow))
            raise ConfigError(
                f"bounds of feature {j} ({lo[j]}, {hi[j]}) are narrower than 2^-200: give the feature in a unit "
                "whose range is a number a row can hold"
            )
        with np.errstate(over="ignore"):
            half_squares = ((hi - lo) / 2.0) ** 2
            wide = ~np.isfinite(2.0 * (hi - lo)) | ~np.isfinite(half_squares)
            radius_overflows = not np.isfinite(np.sum(half_squares))
        if np.any(wide) or radius_overflows:
            # :meth:`to_unit` would give inf or NaN, and the ball scaling of FedDPDR (radius
            # sqrt(sum(((hi - lo) / 2)^2))) every row zero or NaN: every release its fallback, with no word
            j = int(np.argmax(wide)) if np.any(wide) else int(np.argmax(half_squares))
            raise ConfigError(
                f"bounds of feature {j} ({lo[j]}, {hi[j]}) are too far apart: the width of the bounds' box "
                "overflows a float; give the feature's documented range"
            )
        # flushed once checked: at least NARROWEST wide, the bounds keep lo < hi and move by less than TINY
        object.__setattr__(self, "lo", flush_tiny(lo))
        object.__setattr__(self, "hi", flush_tiny(hi))

    @classmethod
    def of(cls, lo: float, hi: float, d: int) -> Bounds:
        """The same scalar bounds for ``d`` features."""
        return cls(np.full(d, float(lo)), np.full(d, float(hi)))

    @property
    def d(self) -> int:
        return self.lo.shape[0]

    def clip(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """Clip rows to the bounds; return the clipped copy and how many values moved."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape[-1] != self.d:
            raise ConfigError(f"rows have {x.shape[-1]} features but the bounds describe {self.d}")
        clipped = np.clip(x, self.lo, self.hi)
        return clipped, int(np.count_nonzero(clipped != x))

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        """Clip, then map ``[lo, hi]`` affinely onto ``[-1, 1]``: t = 2(x - lo)/(hi - lo) - 1."""
        clipped, _ = self.clip(x)
        return 2.0 * (clipped - self.lo) / (self.hi - self.lo) - 1.0

    def to_unit_ball(self, x: np.ndarray) -> np.ndarray:
        """Rows scaled feature by feature by the public bounds into the unit ball: ``to_unit(x) / sqrt(d)``.

        Every feature counts by its documented range, not by its unit (issue 22: a feature ranging to
        4254 no longer drowns one ranging to 0.3), and ``||row|| <= 1`` as the sensitivity of DP-PCA and
        of the objective-perturbed SVM needs (SPEC §7-8). Costs no privacy: public bounds only.
        """
        return self.to_unit(x) / np.sqrt(self.d)

    def from_unit(self, t: np.ndarray) -> np.ndarray:
        """Inverse affine map, applied to reports or to mean estimates (no clipping: SPEC §4)."""
        return (self.lo + self.hi) / 2.0 + np.asarray(t, dtype=np.float64) * (self.hi - self.lo) / 2.0

    def to_list(self) -> dict:
        return {"lo": self.lo.tolist(), "hi": self.hi.tolist()}


def box_scale(bounds: Bounds | tuple[ArrayLike, ArrayLike]) -> np.ndarray:
    """The per-feature factors ``1 / (h_j sqrt(d))``, ``h_j = (hi_j - lo_j) / 2``, of FedDPDR's ``"box"`` row
    scaling (:func:`~privfed.common.feddpdr.pca.scale_rows_to_unit_box`); 0 for a feature of zero width
    (``lo_j == hi_j``: it carries nothing, and nothing is divided by zero; :class:`Bounds` refuses such a
    feature, a ``(lo, hi)`` pair may hold one). Public bounds only: no row is read."""
    lo, hi = (bounds.lo, bounds.hi) if isinstance(bounds, Bounds) else bounds
    half = (np.asarray(hi, dtype=np.float64) - np.asarray(lo, dtype=np.float64)) / 2.0
    d = half.shape[0]
    with np.errstate(over="ignore"):  # a half-width below 2^-1000 or so: 1/h overflows, clamped by the caller's clip
        return np.divide(1.0, half * np.sqrt(d), out=np.zeros_like(half), where=half > 0)
