"""pad_rows writes the rows into a fresh array of the padded shape: the same array np.pad gives (dtype,
values, layout) for every axis a fit pads, and a new array even when nothing is added."""

import numpy as np
import pytest

from privfed.common.errors import ConfigError
from privfed.common.work_rows import pad_rows


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
