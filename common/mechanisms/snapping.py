"""Float-safe release of continuous noise: full-precision uniforms, a grid that grows with the noise
scale, and public clamps (SPEC §12; Mironov, CCS 2012).

Mironov showed that the textbook sampler ``x + b ln U`` (``U`` a 53-bit uniform) reaches a sparse set
of doubles that depends on ``x``: an observer rules out every input from which the output it saw is
unreachable, and after a few releases knows the input exactly, whatever ε says. Every continuous
release in privfed (Laplace, the Piecewise Mechanism, the Gaussian releases) is built from the
pieces below, so that the set of outputs it can produce does not depend on its input.

1. **A full-precision uniform** (:func:`full_uniform`). ``U`` takes *every* double in
   ``[2^-1022, 1)``, each with probability exactly its ulp: it is a real uniform rounded down to a
   double (an exponent from the number of leading zero bits of a random string, a geometric
   variable, and 52 random mantissa bits; Mironov §5.2). Neighbouring doubles ``u < u'`` give
   ``-ln u`` and ``-ln u'`` at most ``2^-52`` apart, so a monotone transform of ``U`` such as
   ``b (-ln U)`` has no gaps coarser than ``b 2^-51`` anywhere out to ``708 b``
   (``U = 2^-1022``); a 53-bit uniform leaves gaps of ``b e^(|y|/b) 2^-53`` in the tails.
2. **A power-of-two grid that grows with the noise scale** (:func:`grid_for`). Outputs are rounded
   to multiples of ``L = 2^(ceil(log2 s) - GRID_BITS)``, ``s`` the mechanism's noise scale (the
   Laplace scale, the Gaussian sigma, the width of PM's centre piece), and never finer than the wire's
   ``2^-20`` (``proto/serde.py`` sends reports as int64 indices on it). Out to 708 scales the
   noise steps by at most ``b 2^-41`` between neighbouring uniforms, so each cell of width ``L``
   is hit by at least ``2^29`` distinct doubles and every cell between the clamps is reachable
   from every input whose clamps the noise reaches.
3. **A public clamp** (:class:`OutputGrid`). Outputs are clamped to ``[-B, B]``, ``B`` a multiple
   of ``L`` fixed by public parameters; each mechanism puts ``B`` far enough out that the clamp
   moves a negligible mass (Laplace: 40 scales, a bias below ``b e^-40``) and close enough that
   the noise reaches it from every input in its public input range.
4. **The input split on the grid** (:meth:`OutputGrid.add`, for ranges wider than ``2^22`` cells).
   ``x = k L + r`` with ``k`` an integer and ``|r| <= L/2``, both exact; the noise is added to ``r``,
   rounded, and ``k`` added back in exact integer arithmetic. The rounding error then does not grow
   with ``|x|``.

Privacy argument. Let ``M`` be the mechanism computed in real arithmetic and followed by the same
rounding and clamp: post-processing of the exact mechanism, so it has the exact mechanism's ε (and
δ). The float implementation puts a real draw into a different cell than ``M`` only when the draw is
within ``eta`` of a cell boundary, where ``eta <= 2^-49 (|noise| + L)``: ``np.log``, ``np.sqrt``
and ``np.cos`` are within 4 ulp (a unit test checks ``np.log`` against the correctly rounded
``math.log``), products and sums round to nearest, and ``U`` differs from the real uniform by less
than one ulp. Within ``T`` noise scales of the input that is ``eta / L <= 2^-(37 - log2 T)``; the
densities used here change by a factor of at most ``e^(L/b)`` across a cell, so each output's
probability is within a factor ``1 +- rho``, ``rho <= 2 e^(1 + L/b) eta / L``, of ``M``'s, and the
release is ``(epsilon + 2 ln((1 + rho)/(1 - rho)))``-DP. For the local mechanisms here ``T <= 70`` and
``rho <= 2^-28``: the excess is below ``2^-25``, 0.3 % of the smallest ε allowed (:data:`EPSILON_FLOOR`);
cells up to 708 scales out, which only a central release reaches, have ``rho <= 2^-25``, an excess
below ``2^-23``. The unit tests compute the float implementation's exact cell probabilities
(:func:`cell_probabilities`, by bisection over the doubles) and check the ε-ratio against them.

Limits. (a) ``np.log`` is not correctly rounded (Mironov assumes crlibm's ``log_rn``); the argument
uses a 4-ulp bound instead, which the test checks on this machine's numpy. (b) ``U`` stops at
``2^-1022``, so noise beyond 708 scales never happens. For a local mechanism the whole input range is
within 70 scales of the clamps and every input reaches every cell; for a central release whose
public input range is wider (an evaluation sum of an owner with many rows), two neighbouring inputs
can differ in reachable cells more than 700 scales out, an event of probability below ``e^-700``,
which the docstrings count as δ. (c) The ε floor and ceiling (:func:`check_epsilon_range`) keep the
constants above true: below the floor the outputs no longer fit the wire, above the ceiling
probabilities near ``e^-ε`` approach the ``2^-53`` resolution of the discrete mechanisms' uniforms.

References
----------
.. [M12] I. Mironov, "On significance of the least significant bits for differential privacy",
   CCS 2012 (the snapping mechanism, §5).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from privfed.common.errors import ConfigError, EpsilonOutOfRange
from privfed.common.validation import check_positive

#: Smallest ε any mechanism accepts (one release). Below it the outputs of the row mechanisms leave
#: the wire's range for realistic ``d`` and carry nothing (a Laplace report's grid alone is ``2 d``
#: wide at the floor); the snapping argument's excess ``2^-25`` stays below 0.3 % of it.
EPSILON_FLOOR = 1e-5
#: Largest ε any mechanism accepts (one release, or one attribute of Algorithm 4). Above it the
#: smallest probabilities of the discrete mechanisms (``e^-ε``, e.g. k-RR's ``q``) come within a
#: factor ``10^3`` of the ``2^-53`` resolution of their uniforms, and some outputs would become
#: unreachable for some inputs.
EPSILON_CEILING = 30.0

#: The output grid is ``2^-GRID_BITS`` of the noise scale (rounded up to a power of two).
GRID_BITS = 12
#: Finest grid: reports travel as int64 indices on ``2^-WIRE_GRID_BITS`` (``proto/serde.py``).
WIRE_GRID_BITS = 20
WIRE_GRID = 2.0**-WIRE_GRID_BITS

#: Largest exponent ``z`` of :func:`full_uniform` (``U >= 2^-(z+1) = 2^-1022``, the smallest normal).
_MAX_ZEROS = 1021
_LOW11 = np.uint64(0x7FF)
_SIGN_SHIFT = np.uint64(52)  # bit 11 of a word to its sign bit
_SIGN_BIT = np.uint64(1 << 63)
_MANTISSA_SHIFT = np.uint64(12)
_ONE_BITS = np.uint64(0x3FF0000000000000)  # the exponent field of 1.0: ``bits | _ONE_BITS`` is in [1, 2)
_EXPONENT_MASK = np.uint64(0x7FF0000000000000)
_TWO52_BITS = np.uint64(0x4330000000000000)  # the exponent field of 2^52
_ELEVEN_BINADES = np.uint64(11 << 52)  # subtracted from an exponent field: times 2^-11


def check_epsilon_range(epsilon: float, *, name: str = "epsilon", what: str = "this mechanism") -> float:
    """``epsilon`` if it lies in ``[EPSILON_FLOOR, EPSILON_CEILING]``, else :class:`EpsilonOutOfRange`.

    The check sees the public ε only, so a refusal never depends on data (DESIGN "Release discipline").
    """
    if not EPSILON_FLOOR <= epsilon <= EPSILON_CEILING:
        raise EpsilonOutOfRange(
            f"{name}={epsilon!r} is outside [{EPSILON_FLOOR:g}, {EPSILON_CEILING:g}], the range {what} "
            "releases safely in floating point (SPEC §12); choose an epsilon inside it"
        )
    return epsilon


def grid_for(scale: float) -> float:
    """``2^(ceil(log2 scale) - GRID_BITS)``, at least the wire's ``2^-20``: the output grid of noise of this scale."""
    scale = check_positive(scale, name="noise scale")
    mantissa, exponent = math.frexp(scale)  # scale = mantissa 2^exponent, mantissa in [1/2, 1)
    ceil_log2 = exponent - 1 if mantissa == 0.5 else exponent
    return max(math.ldexp(1.0, ceil_log2 - GRID_BITS), WIRE_GRID)


def full_uniform(
    rng: np.random.Generator, shape: tuple[int, ...], magnitude: float = 1.0, work: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(U, s * magnitude)``: ``U`` uniform on (0, 1) at full double precision, and an independent fair
    sign ``s = +-1`` times ``magnitude`` (a positive double, given so that callers save a pass).
    ``work``, a C-contiguous float64 array of ``shape`` the caller overwrites next, serves as scratch
    (a block-sized temporary fewer: each costs page faults).

    Every double ``u`` in ``[2^-1022, 1)`` is a possible ``U``, with ``P[U = u] = ulp(u)``: ``U`` is
    a real uniform rounded down to a double. Two 64-bit words per value: the first's top 52 bits are the
    mantissa, bit 11 is the sign, and the leading zeros ``z`` of bits 10..0 (continued into the second
    word for the one value in 2048 whose 11 bits are all zero, and word by word past it for one in 2^75)
    give the binade
    ``[2^-(z+1), 2^-z)``. Vectorised with exact bit and float operations only: bits 10..0 as a
    double ``v`` (``(2^52 + v) - 2^52``) with its mantissa cleared is ``2^floor(log2 v) = 2^(10 - z)``, and
    ``U = (1.m) 2^(10 - z) 2^-11``. The lowest binade also holds the mass ``2^-1022`` below it (never
    drawn in practice).
    """
    size = math.prod(shape)
    raw = rng.bit_generator.random_raw(size)
    sign_bits = np.left_shift(raw, _SIGN_SHIFT)  # bit 11 to bit 63
    sign_bits &= _SIGN_BIT
    sign_bits |= np.float64(check_positive(magnitude, name="magnitude")).view(np.uint64)
    scale = np.empty(size) if work is None else work.reshape(size)  # every step in place
    bits = scale.view(np.uint64)
    np.bitwise_and(raw, _LOW11, out=bits)
    bits |= _TWO52_BITS  # the double 2^52 + v, exactly
    scale -= 2.0**52  # v as a double, exactly
    bits &= _EXPONENT_MASK  # 2^floor(log2 v), 0 for v = 0
    short = bits == 0  # the 11 bits were all zero: continue in further words
    bits -= _ELEVEN_BINADES  # 2^(floor(log2 v) - 11) (garbage where v = 0: replaced below)
    raw >>= _MANTISSA_SHIFT
    raw |= _ONE_BITS
    u = raw.view(np.float64)  # 1.m, in [1, 2)
    # Every value reads its next word and has its short binade computed, used where it is short: a branch for
    # the one value in 2048 read further words only when one was below 2^-11, where the noise is largest, and
    # an answer's time told it (audit 10, ``tests/adversary/test_timing_float_uniform.py``).
    zeros = 11 + _leading_zeros64(rng.bit_generator.random_raw(size))
    todo = np.flatnonzero(short & (zeros == 75))  # that word was all zero too (probability 2^-75): word by word
    frac = u[todo]
    deep = np.ldexp(u, -(np.minimum(zeros, _MAX_ZEROS) + 1).astype(np.int32))
    u *= scale
    np.copyto(u, deep, where=short)
    pending = np.arange(todo.size)
    while pending.size:
        more = _leading_zeros64(rng.bit_generator.random_raw(pending.size))
        zeros[todo[pending]] += more
        pending = pending[(more == 64) & (zeros[todo[pending]] < _MAX_ZEROS)]
    if todo.size:
        u[todo] = np.ldexp(frac, -(np.minimum(zeros[todo], _MAX_ZEROS) + 1).astype(np.int32))
    return u.reshape(shape), sign_bits.view(np.float64).reshape(shape)  # (sign | |magnitude|): +-magnitude


def _leading_zeros64(words: np.ndarray) -> np.ndarray:
    """Leading zero bits of each uint64 (64 for 0), exactly: each 32-bit half converts to a double exactly."""
    high = (words >> np.uint64(32)).astype(np.float64)
    low = (words & np.uint64(0xFFFFFFFF)).astype(np.float64)
    return np.where(high > 0, 32 - np.frexp(high)[1], 64 - np.frexp(low)[1]).astype(np.int64)


@dataclass(frozen=True)
class OutputGrid:
    """The public grid and clamp of one release: multiples of ``grid`` in ``[-bound, bound]``.

    Build it with :meth:`for_noise`; ``bound`` is a multiple of ``grid`` and ``bound / grid < 2^52``,
    so every output is an exact double and an exact int64 index.
    """

    grid: float
    bound: float

    @classmethod
    def for_noise(cls, scale: float, reach: float) -> OutputGrid:
        """The grid of noise of scale ``scale`` (:func:`grid_for`), clamped at ``reach`` rounded down to it.

        Rounding ``reach`` *down* keeps the outermost cells at least half a cell wide, so their
        probabilities are never a float-sized sliver. Raises :class:`ConfigError` if the range
        needs more than 2^52 cells (the public parameters are absurd).
        """
        grid = grid_for(scale)
        cells = math.floor(check_positive(reach, name="output bound") / grid)
        if not 1 <= cells < 2**52:
            raise ConfigError(
                f"an output range of +-{reach:.3g} on a grid of {grid:.3g} needs {cells} cells, outside [1, 2^52); "
                "the public bounds of this release are out of proportion to its noise"
            )
        return cls(grid=grid, bound=cells * grid)

    def add(self, x: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``clamp(round(x + noise))`` on the grid, written into ``noise``.

        If the range holds more than ``2^22`` cells, ``x`` is first clamped and split into
        ``k grid + r`` exactly (``x / grid`` is exact, so is ``x/grid - rint``), the noise is added to
        ``r`` and rounded, and ``k`` is added back as an integer: no rounding error grows with ``|x|``.
        Otherwise ``|x| <= bound <= 2^22 grid`` and adding ``x`` directly errs by less than
        ``2^-31`` cells (every step in place: temporaries of a block's size cost page faults).
        """
        if self.bound / self.grid <= 2.0**22:
            noise += x
            noise /= self.grid
            np.rint(noise, out=noise)
            return self._clamp(noise)
        q = np.clip(x, -self.bound, self.bound)
        q /= self.grid
        k = np.rint(q)
        q -= k
        noise /= self.grid
        noise += q
        np.rint(noise, out=noise)
        noise += k
        return self._clamp(noise)

    def round(self, y: np.ndarray) -> np.ndarray:
        """``clamp(round(y * ...))`` for values ``y`` already in grid units (bounded); in place."""
        np.rint(y, out=y)
        return self._clamp(y)

    def _clamp(self, cells: np.ndarray) -> np.ndarray:
        limit = self.bound / self.grid
        np.clip(cells, -limit, limit, out=cells)
        cells *= self.grid
        return cells


# --- exact output distributions (the privacy argument, checked) ---------------------------------

_LOWEST = np.float64(2.0**-1022).view(np.int64)
_HIGHEST = np.nextafter(1.0, 0.0).view(np.int64)


def cell_probabilities(
    release: Callable[[np.ndarray, np.ndarray], np.ndarray], cells: np.ndarray, signs: tuple[float, ...] = (1.0, -1.0)
) -> np.ndarray:
    """Exact probability of each output in ``cells`` of a release driven by one :func:`full_uniform` draw.

    ``release(U, sign)`` maps arrays of uniforms and signs (:func:`full_uniform`'s pair), always of
    ``cells``' shape (so a caller may pair each cell with its own input), to outputs, and for a fixed
    sign is monotone in ``U`` (the samplers here are). For each target ``c`` and sign, bisection over the
    bit patterns of the doubles finds the interval ``[a, b)`` of uniforms released as ``c``; its
    probability is ``b - a`` exactly (``P[U < u] = u`` for a double ``u``), computed from the two
    endpoints so that tail cells keep their relative precision. Returns ``P[output == c]`` summed
    over the signs, each weighted 1/2: the float implementation's distribution, not the ideal one.
    """
    cells = np.asarray(cells, dtype=np.float64)
    before = np.nextafter(cells, -np.inf)  # the outputs are on a grid: "<= before" is "< c"
    total = np.zeros_like(cells)
    for sign in signs:
        signs_ = np.full(cells.shape, sign)
        first, last = (release(np.full(cells.shape, u), signs_).ravel()[:1] for u in (2.0**-1022, 1.0 - 2.0**-53))
        increasing = bool(last[0] >= first[0])
        if increasing:  # {release == c} = [first u with release > before, first u with release > c)
            width = _first_past(release, cells, signs_, True) - _first_past(release, before, signs_, True)
        else:  # {release == c} = [first u with release <= c, first u with release <= before)
            width = _first_past(release, before, signs_, False) - _first_past(release, cells, signs_, False)
        total += 0.5 * width
    return total


def _first_past(
    release: Callable[[np.ndarray, np.ndarray], np.ndarray], c: np.ndarray, signs: np.ndarray, increasing: bool
) -> np.ndarray:
    """The first uniform ``u`` (as a real number: 0 if every double qualifies, 1 if none does) with
    ``release(u) > c`` (increasing) or ``release(u) <= c`` (decreasing), by bisection over bit patterns."""
    lo = np.full(c.shape, _LOWEST, dtype=np.int64)
    hi = np.full(c.shape, _HIGHEST + 1, dtype=np.int64)  # _HIGHEST + 1: "no double qualifies"
    while np.any(lo < hi):
        mid = lo + (hi - lo) // 2
        out = release(np.minimum(mid, _HIGHEST).view(np.float64), signs)
        qualifies = (out > c) if increasing else (out <= c)
        open_ = lo < hi
        hi = np.where(open_ & qualifies, mid, hi)
        lo = np.where(open_ & ~qualifies, mid + 1, lo)
    first = np.minimum(lo, _HIGHEST).view(np.float64)
    return np.where(lo > _HIGHEST, 1.0, np.where(lo == _LOWEST, 0.0, first))
