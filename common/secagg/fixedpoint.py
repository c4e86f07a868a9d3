"""Fixed-point encoding of reals into the ring Z_2^64 for secure sums (SPEC §11.1).

A real ``x`` is encoded as ``enc(x) = round(x·2^f) mod 2^64`` and decoded as
``dec(u) = int64(u) / 2^f``. Addition in the ring is numpy ``uint64`` addition, which wraps
modulo 2^64, so masks drawn uniformly from Z_2^64 hide the encoded value perfectly (one-time
pad) and cancel *exactly*, which real-valued masks cannot do (SPEC §11.2).

Why a ring and not floats: there is no uniform distribution on the reals, and float addition
drops low bits and leaks magnitude through the exponent (SPEC §11.2, §12).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from privfed.common.errors import ConfigError
from privfed.common.validation import check_int, check_positive

#: Largest number of fractional bits :meth:`FixedPoint.choose` will pick.
MAX_CHOSEN_FRAC_BITS = 40
_TWO_63 = 2**63
_TWO_53 = 2**53


def _overflow_ok(frac_bits: int, n_parties: int, max_abs: float) -> tuple[bool, bool]:
    """The two SPEC §11.1 conditions, evaluated exactly with rationals (no float rounding)."""
    from fractions import Fraction  # here: fractions loads decimal (0.6 MB per node process; issue 27)

    scaled = Fraction(max_abs) * 2**frac_bits
    return n_parties * (scaled + Fraction(1, 2)) < _TWO_63, scaled <= _TWO_53


@dataclass(frozen=True)
class FixedPoint:
    """Encoding of reals with ``frac_bits`` fractional bits into Z_2^64 (SPEC §11.1).

    Parameters
    ----------
    frac_bits : int
        ``f``, the number of fractional bits; resolution ``2^-f``. In ``[0, 62]``.
    n_parties : int
        ``N``, the largest number of encoded values that will ever be summed (the ring size).
    max_abs : float
        Public bound on ``|x|`` for every value a party encodes. Values beyond it are refused,
        never clipped silently.

    Raises
    ------
    TypeError
        A parameter of the wrong type.
    ConfigError
        If ``N(max_abs·2^f + ½) ≥ 2^63`` (the sum could wrap past the int64 range and decode
        to garbage) or ``max_abs·2^f > 2^53``; the message names the values and the largest
        safe ``f``.

    Notes
    -----
    Exactness (SPEC §11.1): when ``N(max_abs·2^f + ½) < 2^63`` the ring sum of ``N``
    encodings, read as int64, equals the integer sum of the rounded values, so
    ``dec(Σ enc(x_i))`` differs from ``Σ x_i`` by at most ``N·2^(-f-1)`` (each encoding rounds
    by at most half a unit of ``2^-f``): :attr:`error_bound`. Decoding returns a float64, so
    the reported value adds at most half an ulp of the result to that bound; that term is
    zero whenever ``|Σ|·2^f ≤ 2^53``.

    ``encode`` uses ``np.rint`` (round half to even); any rounding with error ≤ ½ unit meets
    the bound, and ``rint`` is the vectorised one numpy has.
    """

    frac_bits: int
    n_parties: int
    max_abs: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "frac_bits", check_int(self.frac_bits, name="FixedPoint frac_bits", minimum=0, maximum=62)
        )
        object.__setattr__(self, "n_parties", check_int(self.n_parties, name="FixedPoint n_parties", minimum=1))
        object.__setattr__(self, "max_abs", check_positive(self.max_abs, name="FixedPoint max_abs"))
        sum_ok, exact_ok = _overflow_ok(self.frac_bits, self.n_parties, self.max_abs)
        if not (sum_ok and exact_ok):
            safe = _largest_safe_frac_bits(self.n_parties, self.max_abs, upper=62)
            hint = (
                f"use frac_bits <= {safe}"
                if safe is not None
                else "no frac_bits >= 0 is safe: lower max_abs (rescale the values) or n_parties"
            )
            which = (
                "N(max_abs*2^f + 1/2) < 2^63 (the sum would overflow int64)"
                if not sum_ok
                else "max_abs*2^f <= 2^53 (beyond float64's exact integers)"
            )
            raise ConfigError(
                f"FixedPoint(frac_bits={self.frac_bits}, n_parties={self.n_parties}, max_abs={self.max_abs!r}) "
                f"violates {which}; {hint}"
            )

    @classmethod
    def choose(cls, n_parties: int, max_abs: float, min_frac_bits: int = 16) -> FixedPoint:
        """The encoding with the largest safe ``f ≤ 40`` for ``n_parties`` values of ``|x| ≤ max_abs``.

        Raises
        ------
        ConfigError
            If even ``f = min_frac_bits`` is unsafe (``max_abs`` too large for ``n_parties``).
        """
        min_frac_bits = check_int(min_frac_bits, name="min_frac_bits", minimum=0, maximum=MAX_CHOSEN_FRAC_BITS)
        coarsest = cls(0, n_parties, max_abs)  # validates n_parties and max_abs; raises if even f = 0 is unsafe
        f = _largest_safe_frac_bits(coarsest.n_parties, coarsest.max_abs, upper=MAX_CHOSEN_FRAC_BITS)
        if f is None or f < min_frac_bits:
            raise ConfigError(
                f"no frac_bits in [{min_frac_bits}, {MAX_CHOSEN_FRAC_BITS}] is safe for n_parties={n_parties}, "
                f"max_abs={max_abs!r} (largest safe: {f}); rescale the values to a smaller max_abs or lower min_frac_bits"
            )
        return cls(f, n_parties, max_abs)

    @property
    def error_bound(self) -> float:
        """Worst-case rounding error of a decoded sum of ``N`` encodings: ``N·2^(-f-1)``."""
        return self.n_parties * 2.0 ** (-self.frac_bits - 1)

    def encode(self, x: ArrayLike) -> np.ndarray:
        """``round(x·2^f) mod 2^64`` as a ``uint64`` array of the shape of ``x``.

        Raises
        ------
        ConfigError
            If any value is not finite or has ``|x| > max_abs``.
        """
        x = np.asarray(x, dtype=np.float64)
        bad = ~np.isfinite(x) | (np.abs(x) > self.max_abs)
        if np.any(bad):
            worst = x[bad].flat[0]
            raise ConfigError(
                f"{int(np.count_nonzero(bad))} value(s) outside [-max_abs, max_abs] = [-{self.max_abs}, {self.max_abs}] "
                f"(e.g. {worst!r}); clip to the public bound first or build FixedPoint with a larger max_abs"
            )
        return np.rint(np.ldexp(x, self.frac_bits)).astype(np.int64).view(np.uint64)

    def decode(self, u: ArrayLike) -> np.ndarray:
        """``int64(u) / 2^f`` as float64 (exact division; only the int64 → float64 cast rounds)."""
        u = np.asarray(u, dtype=np.uint64)
        return np.ldexp(u.view(np.int64).astype(np.float64), -self.frac_bits)

    @staticmethod
    def add(a: ArrayLike, b: ArrayLike) -> np.ndarray:
        """``a + b mod 2^64`` (numpy ``uint64`` arithmetic on arrays wraps)."""
        return np.add(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))

    @staticmethod
    def sub(a: ArrayLike, b: ArrayLike) -> np.ndarray:
        """``a - b mod 2^64``."""
        return np.subtract(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))


def _largest_safe_frac_bits(n_parties: int, max_abs: float, *, upper: int) -> int | None:
    """Largest ``f`` in ``[0, upper]`` meeting both SPEC §11.1 conditions, or ``None``."""
    for f in range(upper, -1, -1):
        if all(_overflow_ok(f, n_parties, max_abs)):
            return f
    return None
