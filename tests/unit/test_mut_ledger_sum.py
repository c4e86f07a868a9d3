"""Mutation round 3 (common/ledger_sum.py): the read of the exact sum, on short sums of signed values.

A mutant computing the read's error term as ``lo = y + (hi - x)`` (for ``y - (hi - x)``) in ``ExactSum.value``
passed every test, test_ledger_sum's adversarial, random and signed sequences included. It takes the
round-half-to-even branch on a wrong error term, and reads sums of mixed signs a few ulps off ``math.fsum``
(``0.1 + 2^-21 + 5e-17 + 1.0 - (1 + 2^-52)`` reads 8 ulps low). The ledger itself only adds
non-negative ε and δ, where 300 000 fuzzed sums read the same with and without the mutant, so this is a gap of
the primitive's own claim (``ExactSum`` equals ``fsum`` bit for bit, whatever the signs), not an overspend.
So short sums of ledger-like magnitudes, with either sign, are checked against ``math.fsum`` after every
addition.
"""

import math
import random

from privfed.common.ledger_sum import ExactSum

PALETTE = [1.0, 0.1, 0.3, 0.7, 0.5, 3.0, 1e-16, 1e-17, 2.0**-52, 2.0**-53, 2.0**-60, 2.0**-106, 1.0 + 2.0**-52]
SCALES = [1.0, 3.0, 5.0, 2.0**-20, -1.0]


def test_short_signed_sums_read_as_fsum_bit_for_bit():
    r = random.Random(20261129)
    for _ in range(20_000):
        values = [r.choice(PALETTE) * r.choice(SCALES) for _ in range(r.randint(2, 6))]
        s = ExactSum()
        for i, x in enumerate(values):
            s.add(x)
            assert s.value().hex() == math.fsum(values[: i + 1]).hex(), values[: i + 1]


def test_a_found_case_reads_as_fsum():
    values = [0.1, 4.76837158203125e-07, 5.0000000000000005e-17, 1.0, -1.0000000000000002]
    assert ExactSum.of(values).value().hex() == math.fsum(values).hex()
