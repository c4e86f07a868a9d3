"""A running exact sum of floats: what :func:`math.fsum` returns for every value added so far, at a
cost per addition that does not grow with how many were added (the ledger's spent ε and δ, issue 27).

Method: Shewchuk's non-overlapping partials (J. R. Shewchuk, "Adaptive Precision Floating-Point
Arithmetic and Fast Robust Geometric Predicates", Discrete Comput. Geom. 18(3), 1997, §2.3,
Theorem 10 "Grow-Expansion"; the algorithm behind CPython's ``math.fsum``, Modules/mathmodule.c).
The values added so far are held exactly as a short list of non-overlapping floats (the
*partials*), in increasing magnitude; adding one value is Grow-Expansion over them (two-sum, Knuth
TAOCP vol. 2 §4.2.2 Theorem B, with the magnitude test of Dekker's Fast-Two-Sum). Non-overlapping
doubles span at most 2098 binary exponents with 53 bits each, so there are at most ~40 partials
however many values were added: an addition and a read are O(1) in the number of values.

The read (:meth:`ExactSum.value`) rounds the partials to the nearest double, ties to even, exactly
as ``math.fsum`` does at its end, including its treatment of special values (an ∞ added makes the
sum ∞; an intermediate overflow of finite values raises :class:`OverflowError`, as ``fsum`` of the
same values would). So ``ExactSum`` of ``xs`` equals ``math.fsum(xs)`` bit for bit: never less, the
property the ledger needs (a rounding that under-counts a spend would let an owner overspend).
"""

from __future__ import annotations

import math


class ExactSum:
    """The exact sum of the floats added so far, read correctly rounded (module docstring).

    >>> s = ExactSum()
    >>> for x in [0.1] * 10:
    ...     s.add(x)
    >>> s.value() == math.fsum([0.1] * 10) == 1.0
    True
    """

    __slots__ = ("_partials", "_special", "_inf", "_overflow")

    def __init__(self) -> None:
        self._partials: list[float] = []  # non-overlapping, increasing magnitude, exact sum of the finite values
        self._special = 0.0  # the sum of the infinities and NaNs added, which fsum keeps apart
        self._inf = 0.0  # the sum of the infinities added (NaN: both signs)
        self._overflow = False  # finite values whose exact sum overflowed a double

    def add(self, x: float) -> None:
        """Add ``x`` exactly (Grow-Expansion; module docstring)."""
        x = float(x)
        given = x
        partials = self._partials
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo != 0.0:
                partials[i] = lo
                i += 1
            x = hi
        del partials[i:]
        if x == 0.0:
            return
        if math.isfinite(x):
            partials.append(x)
        elif math.isfinite(given):
            self._overflow = True
        else:
            if math.isinf(given):
                self._inf += given
            self._special += given
            partials.clear()  # as fsum: the result is the special value from now on

    def value(self) -> float:
        """The sum rounded to the nearest double, ties to even: ``math.fsum`` of the values added.

        Raises
        ------
        OverflowError
            The finite values added overflow a double in their sum (as ``math.fsum`` raises).
        ValueError
            Both +∞ and -∞ were added (as ``math.fsum`` raises).
        """
        if self._overflow:
            raise OverflowError("intermediate overflow in fsum")
        if self._special != 0.0:  # also NaN
            if math.isnan(self._inf):
                raise ValueError("-inf + inf in fsum")
            return self._special
        partials = self._partials
        n = len(partials)
        if n == 0:
            return 0.0
        n -= 1
        hi = partials[n]
        lo = 0.0
        while n > 0:  # add from the largest down, until the sum becomes inexact
            x = hi
            n -= 1
            y = partials[n]
            hi = x + y
            lo = y - (hi - x)
            if lo != 0.0:
                break
        # round half to even: when the rest below lo has lo's sign, a half-way lo rounds away
        if n > 0 and ((lo < 0.0 and partials[n - 1] < 0.0) or (lo > 0.0 and partials[n - 1] > 0.0)):
            y = lo * 2.0
            x = hi + y
            if y == x - hi:
                hi = x
        return hi

    def copy(self) -> ExactSum:
        """An independent copy (O(1): the partials are few; module docstring)."""
        other = ExactSum()
        other._partials = list(self._partials)
        other._special = self._special
        other._inf = self._inf
        other._overflow = self._overflow
        return other

    @classmethod
    def of(cls, values: list[float]) -> ExactSum:
        """The running sum of ``values``."""
        s = cls()
        for x in values:
            s.add(x)
        return s


def add_rounding_up(total: float, x: float) -> float:
    """``total + x`` rounded up: the smallest double not below the exact sum of the two.

    A row account (``privfed.common.ledger_rows``) keeps one stored number per account, not its
    history, so it cannot be an :class:`ExactSum` once written to the file; round-to-nearest
    additions could then drift below the exact sum of its debits (about n × 2^-53 relative after
    n debits, past the ledger's tolerance after ~10^4) and under-count a row's spend. Rounding each
    addition up keeps every stored total at or above the exact sum of what was added: the error of
    the nearest sum is found exactly with two-sum (Knuth, TAOCP vol. 2 §4.2.2 Theorem B), and a
    rounding-down is undone by one step to the next double up. The total over-counts by at most one
    unit in the last place per debit, which only ever refuses early.

    >>> add_rounding_up(1.0, 2.0 ** -60) > 1.0
    True
    """
    nearest = total + x
    if math.isinf(nearest) or math.isnan(nearest):
        return nearest
    x_part = nearest - total
    error = (total - (nearest - x_part)) + (x - x_part)
    return math.nextafter(nearest, math.inf) if error > 0.0 else nearest
