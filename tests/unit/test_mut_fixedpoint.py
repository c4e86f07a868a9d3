"""Mutation round 2 (common/secagg/fixedpoint.py): the half unit in ``N (max_abs 2^f + 1/2) < 2^63``.

Mutants that dropped the ``+ 1/2`` (or made it 1/3) passed every test. Without it an encoding is accepted whose
rounded values can sum to ``2^63``: ``rint`` may round each ``max_abs 2^f`` up by half a unit, and N of them wrap
past the int64 range, so the secure sum decodes to ``-2^63 / 2^f`` instead of ``N max_abs``. Exact witness:
``f = 0``, ``max_abs = 2^52 - 1/2`` (``rint`` rounds it to ``2^52``, the even neighbour), ``N = 2^11``:
``N max_abs = 2^63 - 2^10`` fits, ``N rint(max_abs) = 2^63`` does not.
"""

from fractions import Fraction

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.secagg.fixedpoint import FixedPoint

MAX_ABS = 2.0**52 - 0.5


def ring_sum(fp, value, n):
    return fp.decode(np.asarray(fp.encode(np.full(n, value)).sum(dtype=np.uint64)))


def test_an_encoding_whose_rounded_sum_would_wrap_is_refused():
    with pytest.raises(ConfigError, match="overflow"):
        FixedPoint(0, 2**11, MAX_ABS)


@pytest.mark.parametrize("value", [MAX_ABS, -MAX_ABS])
def test_the_largest_accepted_ring_sums_every_value_at_the_bound_exactly(value):
    fp = FixedPoint(0, 2**11 - 1, MAX_ABS)  # one party fewer: N (2^52 - 1/2 + 1/2) < 2^63
    n = fp.n_parties
    assert float(ring_sum(fp, value, n)) == n * np.rint(value)
    assert abs(Fraction(float(ring_sum(fp, value, n))) - n * Fraction(value)) <= Fraction(fp.error_bound)
