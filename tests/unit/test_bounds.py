"""Public bounds are checked when they are made: a feature's map to [-1, 1] must be a finite affine map."""

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError


@pytest.mark.parametrize(
    ("lo", "hi", "message"),
    [
        ([0.0, 1.0], [1.0, 1.0], "feature 1 has lo=1.0, hi=1.0"),
        ([0.0, np.nan], [1.0, 2.0], "finite"),
        ([0.0, -1e308], [1.0, 1e308], r"feature 1 \(-1e\+308, 1e\+308\) are too far apart"),
        ([0.0], [9e307], "too far apart"),
    ],
)
def test_bounds_refuse_what_no_mechanism_can_map(lo, hi, message):
    with pytest.raises(ConfigError, match=message):
        Bounds(np.array(lo), np.array(hi))


def test_the_widest_bounds_that_map_give_finite_unit_values():
    bounds = Bounds.of(
        -1e153, 1e153, 2
    )  # wider ones overflow the box's radius (tests/adversary/test_bounds_overflow.py)
    t = bounds.to_unit(np.array([[-1e153, 1e153], [0.0, 1e152]]))
    assert np.all(np.isfinite(t)) and t[0].tolist() == [-1.0, 1.0]
