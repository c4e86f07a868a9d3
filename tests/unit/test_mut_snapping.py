"""Mutation round 3 (common/mechanisms/snapping.py, arithmetic): the input split on the grid, and the exact
leading-zero count.

* ``OutputGrid.add`` adds the input's fraction of a cell to the noise (``noise += q``): a mutant subtracting it
  passed every test, since test_float_safety adds a far input to *zero* noise, where ``rint(+-q)`` agree. It
  centres every release of a wide range (more than 2^22 cells) on ``k - q`` instead of ``x``: up to one cell of
  bias, and an input-dependent shift of up to one cell between neighbours.
* The split path is taken for ranges of more than ``2^22`` cells (``bound / grid``); a mutant testing
  ``bound * grid`` sent a range of ``2^42`` cells down the direct path, where ``x + noise`` is rounded at the
  ulp of ``x`` before it is rounded to the grid: a release then depends on the input's low bits (Mironov's
  leak), and the zero-noise test could not see it.
* ``_leading_zeros64`` counts ``64 - e`` for a word whose high half is zero; ``64 + e`` passed (a word in 2^32,
  read for one value in 2^11), and put those uniforms 2 e binades too deep.

The expected outputs are the exact nearest grid points, computed in rationals.
"""

from fractions import Fraction
from math import floor

import numpy as np
import pytest

from privfed.common.mechanisms.snapping import OutputGrid, _leading_zeros64


def nearest_cell(x: float, noise: float, grid: OutputGrid) -> float:
    c = (Fraction(x) + Fraction(noise)) / Fraction(grid.grid)
    n = floor(c)
    assert c - n != Fraction(1, 2)  # the cases below are no exact ties
    k = n + 1 if c - n > Fraction(1, 2) else n
    limit = round(grid.bound / grid.grid)
    return float(max(-limit, min(limit, k)) * Fraction(grid.grid))


WIDE = OutputGrid.for_noise(1.0, 2.0**30)  # grid 2^-12, 2^42 cells: the split path


@pytest.mark.parametrize(
    "x, cells",
    [
        (2.0**29 + 0.3, 0.45),  # the fraction -0.2 of a cell must be added: 1229.25 -> 1229, not 1230
        (-(2.0**29) - 0.3, -0.45),
        (12345.678, 0.3),
        (2.0**29, 0.5 + 2.0**-18),  # just above half a cell: the direct path's x + noise rounds it to the tie
        (-(2.0**29), -(0.5 + 2.0**-18)),
        (1e6 + 2.0**-14, 3.4),
    ],
)
def test_a_far_input_plus_noise_is_released_at_the_nearest_grid_point(x, cells):
    assert WIDE.bound / WIDE.grid > 2.0**22
    noise = cells * WIDE.grid
    out = WIDE.add(np.array([x]), np.array([noise]))
    assert out[0] == nearest_cell(x, noise, WIDE)


def test_the_split_and_the_direct_path_agree_with_the_exact_rounding_on_random_draws():
    rng = np.random.Generator(np.random.PCG64(20261129))
    for grid in (WIDE, OutputGrid.for_noise(1.0, 100.0)):
        x = rng.uniform(-grid.bound, grid.bound, 200)
        noise = rng.normal(0.0, 1.0, 200)
        out = grid.add(x.copy(), noise.copy())
        assert all(o == nearest_cell(a, b, grid) for o, a, b in zip(out, x, noise))


def test_leading_zeros_of_words_with_a_zero_high_half():
    words = np.array([0, 1, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1, 0xFFFF], dtype=np.uint64)
    want = [64, 63, 32, 32, 31, 0, 0, 48]
    assert _leading_zeros64(words).tolist() == want
