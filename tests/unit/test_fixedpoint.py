"""Fixed point in Z_2^64 (SPEC §11.1): sanity values, overflow conditions, invalid parameters."""

from functools import reduce

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from privfed.common.errors import ConfigError
from privfed.common.secagg.fixedpoint import MAX_CHOSEN_FRAC_BITS, FixedPoint


def test_spec_encode_minus_one_f16():
    fp = FixedPoint(16, 1, 1.0)
    assert fp.encode(-1.0) == np.uint64(18446744073709486080)
    assert fp.encode([-1.0]).dtype == np.uint64
    assert fp.decode(np.uint64(18446744073709486080)) == -1.0


def test_spec_sum_example_f20():
    fp = FixedPoint(20, 4, 3.0)
    total = reduce(FixedPoint.add, fp.encode([1.5, -2.25, 3.0, -1e-6]))
    assert f"{float(fp.decode(total)):.7f}" == "2.2499990"
    assert abs(fp.decode(total) - 2.249999) <= fp.error_bound


def test_matches_spec_numpy_formula(rng):
    fp = FixedPoint(24, 10, 5.0)
    x = rng.uniform(-5, 5, 1000)
    np.testing.assert_array_equal(fp.encode(x), np.rint(x * 2**24).astype(np.int64).view(np.uint64))
    np.testing.assert_array_equal(fp.decode(fp.encode(x)), np.rint(x * 2**24).astype(np.int64) / 2**24)


def test_add_and_sub_wrap_mod_2_64():
    top = np.array([2**64 - 1, 2**63], dtype=np.uint64)
    one = np.ones(2, dtype=np.uint64)
    np.testing.assert_array_equal(FixedPoint.add(top, one), np.array([0, 2**63 + 1], dtype=np.uint64))
    np.testing.assert_array_equal(FixedPoint.sub(one - one, one), np.array([2**64 - 1] * 2, dtype=np.uint64))
    np.testing.assert_array_equal(FixedPoint.sub(FixedPoint.add(top, top), top), top)


def test_error_bound_and_masked_sum_decodes_exactly(rng):
    fp = FixedPoint(30, 8, 100.0)
    assert fp.error_bound == 8 * 2.0**-31
    x = rng.uniform(-100, 100, (8, 50))
    mask = np.frombuffer(rng.bytes(8 * 50), "<u8")
    masked = reduce(FixedPoint.add, fp.encode(x), mask)
    total = fp.decode(FixedPoint.sub(masked, mask))
    assert np.max(np.abs(total - x.sum(axis=0))) <= fp.error_bound + 1e-12


def test_extreme_sum_does_not_wrap():
    fp = FixedPoint.choose(1000, 1.0)
    x = np.full(1000, -1.0)
    total = reduce(FixedPoint.add, fp.encode(x[:, None]))
    assert fp.decode(total)[0] == -1000.0


@settings(max_examples=200, deadline=None, database=None)
@given(f=st.integers(0, 40), data=st.data())
def test_round_trip_within_half_unit(f, data):
    fp = FixedPoint(f, 1, 1000.0)
    x = data.draw(arrays(np.float64, 8, elements=st.floats(-1000.0, 1000.0, allow_nan=False)))
    assert np.all(np.abs(fp.decode(fp.encode(x)) - x) <= 2.0 ** (-fp.frac_bits - 1))


def test_choose_picks_largest_safe_frac_bits():
    assert FixedPoint.choose(10, 1.0).frac_bits == MAX_CHOSEN_FRAC_BITS
    fp = FixedPoint.choose(10_000, 1e6)
    assert fp.frac_bits == 29
    with pytest.raises(ConfigError):
        FixedPoint(fp.frac_bits + 1, 10_000, 1e6)
    # the 2^53 condition binds for a single party with a large bound
    assert FixedPoint.choose(1, 2.0**20).frac_bits == 33
    assert FixedPoint.choose(3, 1.0, min_frac_bits=0).frac_bits == 40


def test_choose_refuses_when_min_frac_bits_unsafe():
    with pytest.raises(ConfigError, match="largest safe: 9"):
        FixedPoint.choose(10_000, 1e12)
    assert FixedPoint.choose(10_000, 1e12, min_frac_bits=9).frac_bits == 9
    with pytest.raises(ConfigError, match="min_frac_bits"):
        FixedPoint.choose(3, 1.0, min_frac_bits=41)


@pytest.mark.parametrize(
    "f, n, max_abs, pattern",
    [
        (40, 10_000, 1e6, "frac_bits <= 29"),  # N(max_abs 2^f + 1/2) >= 2^63
        (34, 1, 2.0**20, "2\\^53"),  # max_abs 2^f > 2^53
        (0, 10, 1e300, "no frac_bits >= 0 is safe"),
        (63, 1, 1.0, "frac_bits must be an int in"),
        (-1, 1, 1.0, "frac_bits must be an int in"),
        (16, 0, 1.0, "n_parties must be an int >= 1"),
        (16, 2, 0.0, "max_abs must be finite and > 0"),
        (16, 2, float("inf"), "max_abs must be finite"),
        (16, 2, float("nan"), "max_abs must be finite"),
    ],
)
def test_invalid_parameters(f, n, max_abs, pattern):
    with pytest.raises(ConfigError, match=pattern):
        FixedPoint(f, n, max_abs)


def test_boundaries_of_both_conditions_are_exact():
    # N = 2^10: N(max_abs 2^f + 1/2) = 2^63 + 2^9 at max_abs 2^f = 2^53 (refused), 2^63 - 2^9 one below.
    with pytest.raises(ConfigError, match="2\\^63"):
        FixedPoint(0, 1024, 2.0**53)
    FixedPoint(0, 1024, 2.0**53 - 1)
    FixedPoint(0, 1, 2.0**53)  # max_abs 2^f = 2^53 is allowed ...
    with pytest.raises(ConfigError, match="2\\^53"):
        FixedPoint(0, 1, 2.0**53 + 2)  # ... the next double is not
    FixedPoint(9, 1, 2.0**44)


@pytest.mark.parametrize("args", [(16.0, 2, 1.0), (16, 2.0, 1.0), (True, 2, 1.0), (16, 2, "1"), (16, 2, None)])
def test_wrong_types(args):
    with pytest.raises(TypeError):
        FixedPoint(*args)


@pytest.mark.parametrize("bad", [1.0000001, -2.0, np.nan, np.inf, -np.inf])
def test_encode_refuses_out_of_range(bad):
    fp = FixedPoint(16, 2, 1.0)
    with pytest.raises(ConfigError, match="max_abs"):
        fp.encode(np.array([0.0, bad]))


def test_shapes_are_kept():
    fp = FixedPoint(16, 2, 1.0)
    x = np.zeros((3, 4))
    assert fp.encode(x).shape == (3, 4) and fp.decode(fp.encode(x)).shape == (3, 4)
    assert fp.decode(fp.encode(x)).dtype == np.float64


def test_frozen():
    fp = FixedPoint(16, 2, 1.0)
    with pytest.raises(AttributeError):
        fp.frac_bits = 20
