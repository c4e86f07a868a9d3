"""pad_rows writes the rows into a fresh array of the padded shape: the same array np.pad gives (dtype,
values, layout) for every axis a fit pads, and a new array even when nothing is added."""

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.work_rows import pad_rows, release_rows, work_rows, zero_padding


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
@pytest.mark.parametrize(
    ("shape", "axis", "value"),
    [
        ((3, 4), -2, 0.0),
        ((3,), -1, 1.0),
        ((2, 3, 4), -2, 0.0),
        ((2, 3, 4), -1, 1.0),
        ((2, 3, 4), 0, 0.0),
        ((0, 4), -2, 0.0),
    ],
)
def test_pad_rows_is_np_pad(shape, axis, value, dtype):
    a = np.random.default_rng(0).normal(size=shape).astype(dtype)
    n = a.shape[axis]
    for rows in (n, n + 1, 2 * n + 3):
        widths = [(0, 0)] * a.ndim
        widths[axis] = (0, rows - n)
        expected = np.pad(a, widths, constant_values=value)
        got = pad_rows(a, rows, axis=axis, value=value)
        assert got.dtype == expected.dtype and got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected)
        assert not np.shares_memory(got, a)  # a copy even at the top of the cell (the same work)


def test_pad_rows_refuses_more_rows_than_the_cell():
    with pytest.raises(ConfigError):
        pad_rows(np.zeros((5, 2)), 4)


@pytest.mark.parametrize(("shape", "axis"), [((8, 3), -2), ((8,), -1), ((2, 8), -1), ((2, 8, 3), -2)])
def test_zero_padding_zeroes_the_padding_and_keeps_the_real_rows_bit_for_bit(shape, axis):
    """Pad first, a per-row step on the cell, then zero the padding: the real rows are the step's on them alone, the
    padding's rows +0.0 even where the step made them -x, inf or NaN."""
    rng = np.random.default_rng(1)
    a = rng.normal(size=shape)
    a[..., 0] = -np.inf  # a padding row the step overflowed, and a NaN
    a.flat[-1] = np.nan
    for n in (0, 3, shape[axis]):
        got = zero_padding(a, n, axis=axis)
        real, pad = np.split(got, [n], axis=axis)
        np.testing.assert_array_equal(real, np.split(a, [n], axis=axis)[0])
        assert np.all(pad == 0.0) and not np.any(np.signbit(pad))


def test_release_rows_keeps_the_first_m_real_rows_of_its_permutation_sorted():
    """release_rows picks its rows by passes over the cell (audit 12: it sorted the n kept indices): the same rows
    as its definition, the first ``m`` of the cell's uniform permutation that fall below ``n``, in order."""
    for n in [*range(0, 40), 1000, 1025]:
        for bound in (None, 1, 3, 16, 40, 5000):
            for seed in range(3):
                m = work_rows(n, bound)
                order = np.random.default_rng(seed).permutation(work_rows(n))
                keep, dummies = release_rows(n, bound, np.random.default_rng(seed))
                np.testing.assert_array_equal(keep, np.sort(order[order < n][:m]))
                assert dummies == m - keep.size
