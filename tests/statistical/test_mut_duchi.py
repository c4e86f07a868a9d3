"""Mutation round 3 (common/mechanisms/duchi.py, arithmetic): every row of a block gets its own random signs.

A mutant reading ``(m d - 7) // 8`` random bytes for the ``m d`` sign bits of a block (for ``(m d + 7) // 8``)
passed every test: ``np.unpackbits`` pads the missing bits with zeros, so the last 8 to 14 signs of each block
are always -1 and the last rows of every call report ``+-B (1, ..., 1)`` only, biased towards the sign of
``sum(t)``. The moment tests privatize one large block and average over all its rows, where two rows do not
show. So the last row of a call is checked for unbiasedness on its own (5 s.e.).
"""

import math

import numpy as np

from privfed.common.mechanisms import DuchiMultidim


def test_the_last_row_of_each_call_is_unbiased():
    mech = DuchiMultidim(epsilon=1.0, d=4)
    t = np.array([0.5, -0.3, 0.2, 0.0])
    rows = np.tile(t, (8, 1))  # 32 sign bits: 4 bytes, the last one the mutant left out
    rng = np.random.Generator(np.random.PCG64(20261129))
    n = 4000
    last = np.array([mech.privatize(rows, rng)[-1] for _ in range(n)])
    se = last.std(axis=0) / math.sqrt(n)
    assert np.all(np.abs(last.mean(axis=0) - t) <= 5 * se), (last.mean(axis=0), t, se)
    assert len({tuple(np.sign(r)) for r in last}) > 2  # not only +-(1, 1, 1, 1)
