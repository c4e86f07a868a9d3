"""common/validation.py: every checker's accepted values, converted types, error types and messages."""

import math
from fractions import Fraction

import numpy as np
import pytest

from privfed.common.errors import ConfigError, ConfigTypeError, PrivfedError
from privfed.common.validation import (
    check_choice,
    check_fraction,
    check_int,
    check_int_array,
    check_non_negative,
    check_positive,
    check_probability,
    check_real,
    check_real_array,
    check_rng,
)

NOT_NUMBERS = [True, False, "3", None, 1 + 0j, [1.0], np.array([1.0])]


def test_config_type_error_is_both_a_privfed_config_error_and_a_type_error():
    assert issubclass(ConfigTypeError, ConfigError)
    assert issubclass(ConfigTypeError, TypeError)
    assert issubclass(ConfigTypeError, ValueError)
    assert issubclass(ConfigTypeError, PrivfedError)


@pytest.mark.parametrize("value", [3, np.int64(3), np.uint8(3), np.int32(3)])
def test_check_int_accepts_integers_and_returns_a_python_int(value):
    out = check_int(value, name="n", minimum=1)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize("value", [*NOT_NUMBERS, 3.0, np.float64(3.0), Fraction(3, 1)])
def test_check_int_refuses_non_integers_with_a_type_error(value):
    with pytest.raises(ConfigTypeError, match=r"^n must be an int, got .* of type "):
        check_int(value, name="n", minimum=1)


def test_check_int_range_is_closed_at_both_ends():
    assert check_int(2, name="k", minimum=2) == 2
    assert check_int(0, name="f", minimum=0, maximum=62) == 0
    assert check_int(62, name="f", minimum=0, maximum=62) == 62
    with pytest.raises(ConfigError, match=r"^k must be an int >= 2, got 1$") as info:
        check_int(1, name="k", minimum=2)
    assert not isinstance(info.value, TypeError)
    with pytest.raises(ConfigError, match=r"^f must be an int in \[0, 62\], got 63$"):
        check_int(63, name="f", minimum=0, maximum=62)
    with pytest.raises(ConfigError, match=r"^f must be an int in \[0, 62\], got -1$"):
        check_int(-1, name="f", minimum=0, maximum=62)


def test_fix_is_appended_to_type_and_range_errors():
    with pytest.raises(ConfigError, match=r"^d must be an int >= 1, got 0; pass one column$"):
        check_int(0, name="d", minimum=1, fix="pass one column")
    with pytest.raises(ConfigError, match=r"^lam must be finite and > 0, got 0; try 1e-3$"):
        check_positive(0, name="lam", fix="try 1e-3")
    with pytest.raises(ConfigTypeError, match=r"^lam must be a real number, got None of type NoneType; try 1e-3$"):
        check_positive(None, name="lam", fix="try 1e-3")
    with pytest.raises(ConfigTypeError, match=r"^d must be an int, got '2' of type str; pass one column$"):
        check_int("2", name="d", minimum=1, fix="pass one column")


@pytest.mark.parametrize("value", [0.5, 2, np.float32(0.5), np.int64(2), Fraction(1, 2), -1.0, math.inf, math.nan])
def test_check_real_accepts_every_real_and_returns_a_float(value):
    out = check_real(value, name="x")
    assert type(out) is float
    assert out == float(value) or (math.isnan(out) and math.isnan(float(value)))


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_check_real_refuses_non_reals(value):
    with pytest.raises(ConfigTypeError, match=r"^x must be a real number, got"):
        check_real(value, name="x")


@pytest.mark.parametrize("value", NOT_NUMBERS)
@pytest.mark.parametrize("checker", [check_positive, check_non_negative, check_fraction, check_probability])
def test_range_checkers_refuse_non_reals_with_a_type_error(checker, value):
    with pytest.raises(ConfigTypeError, match="must be a real number"):
        checker(value, name="x")


def test_check_positive_finite():
    assert check_positive(np.float32(0.25), name="c") == 0.25
    assert type(check_positive(1, name="c")) is float
    assert check_positive(5e-324, name="c") == 5e-324
    for bad in (0, 0.0, -0.0, -1, math.nan, math.inf, -math.inf):
        with pytest.raises(ConfigError, match=r"^c must be finite and > 0, got"):
            check_positive(bad, name="c")


def test_check_positive_with_inf_allowed():
    assert check_positive(math.inf, name="epsilon", allow_inf=True) == math.inf
    assert check_positive(0.5, name="epsilon", allow_inf=True) == 0.5
    for bad in (0, -1.0, math.nan, -math.inf):
        with pytest.raises(ConfigError, match=r"^epsilon must be > 0 \(or inf\), got"):
            check_positive(bad, name="epsilon", allow_inf=True)


def test_check_non_negative():
    assert check_non_negative(0, name="eta") == 0.0
    assert check_non_negative(1e300, name="eta") == 1e300
    for bad in (-1e-300, math.nan, math.inf, -math.inf):
        with pytest.raises(ConfigError, match=r"^eta must be finite and >= 0, got"):
            check_non_negative(bad, name="eta")


def test_check_non_negative_with_inf_allowed():
    assert check_non_negative(math.inf, name="epsilon", allow_inf=True) == math.inf
    assert check_non_negative(0, name="epsilon", allow_inf=True) == 0.0
    for bad in (-1e-300, math.nan, -math.inf):
        with pytest.raises(ConfigError, match=r"^epsilon must be >= 0 \(or inf\), got"):
            check_non_negative(bad, name="epsilon", allow_inf=True)


def test_check_probability_is_the_closed_unit_interval():
    assert check_probability(0, name="delta") == 0.0
    assert type(check_probability(1, name="delta")) is float
    assert check_probability(np.float64(1e-6), name="delta") == 1e-6
    for bad in (-1e-300, 1 + 1e-15, math.nan, math.inf):
        with pytest.raises(ConfigError, match=r"^delta is a probability and must be in \[0, 1\], got"):
            check_probability(bad, name="delta")


def test_check_fraction_is_the_open_unit_interval():
    assert check_fraction(0.2, name="p") == 0.2
    assert check_fraction(np.float64(1 - 1e-16), name="p") < 1
    for bad in (0, 0.0, 1, 1.0, -0.1, 1.5, math.nan, math.inf):
        with pytest.raises(ConfigError, match=r"^p must be a number in \(0, 1\), got"):
            check_fraction(bad, name="p")


def test_check_choice():
    assert check_choice("rr", name="labels", allowed=("clear", "rr")) == "rr"
    assert check_choice("b", name="x", allowed={"a", "b"}) == "b"
    for bad in ("RR", "", None, 1, ("rr",)):
        with pytest.raises(ConfigError, match=r"^labels must be one of \('clear', 'rr'\), got"):
            check_choice(bad, name="labels", allowed=("clear", "rr"))


def test_check_rng_accepts_only_a_generator():
    rng = np.random.default_rng(np.random.PCG64(0))
    assert check_rng(rng) is rng
    for bad in (None, 0, np.random.RandomState(0), np.random.PCG64(0)):
        with pytest.raises(ConfigTypeError, match="rng must be a numpy.random.Generator"):
            check_rng(bad)


def test_check_real_array_keeps_integer_and_float_arrays_unconverted():
    ints = np.arange(3)
    assert check_real_array(ints, name="t") is ints
    assert check_real_array([[0.5, 1.0]], name="t").dtype == np.float64
    assert check_real_array(np.zeros(2, dtype=np.uint8), name="t").dtype == np.uint8
    for bad in (np.array([True]), np.array([1 + 0j]), np.array(["a"]), np.array([None])):
        with pytest.raises(ConfigTypeError, match=r"^t must be a real-valued array, got dtype"):
            check_real_array(bad, name="t")


def test_check_int_array_refuses_floats_and_booleans():
    labels = np.array([0, 2, 1], dtype=np.int32)
    assert check_int_array(labels, name="y") is labels
    assert check_int_array([3], name="y").dtype.kind == "i"
    assert check_int_array(np.zeros(2, dtype=np.uint16), name="y").dtype == np.uint16
    for bad in (np.array([1.0]), np.array([True]), np.array(["1"])):
        with pytest.raises(ConfigTypeError, match=r"^y must be an array of integers, got dtype .*; encode them$"):
            check_int_array(bad, name="y", fix="encode them")
