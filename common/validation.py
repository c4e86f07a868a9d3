"""Checkers for public parameters: one place for the type and range rules every module applies.

Each checker takes the value and its parameter name (keyword-only), returns the value converted
to the plain Python or numpy type the caller computes with, and raises the privfed error types
(STYLE rule 9):

* :class:`~privfed.common.errors.ConfigTypeError` when the value has the wrong type. It is both a
  ``ConfigError`` and a ``TypeError``, as scikit-learn's ``InvalidParameterError`` is both a
  ``ValueError`` and a ``TypeError`` (``sklearn/utils/_param_validation.py``): callers that catch
  either see it.
* :class:`~privfed.common.errors.ConfigError` when the type is right but the value is out of range.

``bool`` is never accepted as a number, though Python counts it as an ``int``: ``d=True`` is a
bug, not the value 1. numpy scalars are accepted (``np.int64(3)``, ``np.float32(0.5)``: numpy
registers them as :mod:`numbers` types) and converted to ``int`` / ``float``.

Messages name the parameter, the value received and the allowed range; ``fix`` appends the remedy
the caller knows (``"use 0 for exact null-space cleaning"``) to type and range errors alike.

Pure: imports only the stdlib, numpy and :mod:`privfed.common.errors` (STYLE rule 1).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from numbers import Integral, Real

import numpy as np

from privfed.common.errors import ConfigError, ConfigTypeError


def _with_fix(message: str, fix: str | None) -> str:
    return message if fix is None else f"{message}; {fix}"


def check_int(value: object, *, name: str, minimum: int, maximum: int | None = None, fix: str | None = None) -> int:
    """``value`` as an ``int`` in ``[minimum, maximum]`` (no upper limit when ``maximum`` is None).

    Raises
    ------
    ConfigTypeError
        ``value`` is not an integer (``bool``, ``float`` and strings included).
    ConfigError
        ``value`` is below ``minimum`` or above ``maximum``.
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ConfigTypeError(_with_fix(f"{name} must be an int, got {value!r} of type {type(value).__name__}", fix))
    number = int(value)
    if maximum is None and number < minimum:
        raise ConfigError(_with_fix(f"{name} must be an int >= {minimum}, got {value!r}", fix))
    if maximum is not None and not minimum <= number <= maximum:
        raise ConfigError(_with_fix(f"{name} must be an int in [{minimum}, {maximum}], got {value!r}", fix))
    return number


def check_real(value: object, *, name: str, fix: str | None = None) -> float:
    """``value`` as a ``float``; any real number passes, NaN and ±inf included (the range checkers
    below refuse them).

    Raises
    ------
    ConfigTypeError
        ``value`` is not a real number (``bool``, ``complex`` and strings included).
    """
    if type(value) is float:  # the common case, without the ABC check (issue 27: a node's hot path)
        return value
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ConfigTypeError(
            _with_fix(f"{name} must be a real number, got {value!r} of type {type(value).__name__}", fix)
        )
    return float(value)


def check_positive(value: object, *, name: str, allow_inf: bool = False, fix: str | None = None) -> float:
    """``value`` as a ``float > 0``: finite, or also ``math.inf`` with ``allow_inf`` (a privacy
    budget, where ``inf`` asks for a non-private run).

    Raises
    ------
    ConfigTypeError
        ``value`` is not a real number.
    ConfigError
        ``value`` is <= 0 or NaN, or infinite without ``allow_inf``.
    """
    number = check_real(value, name=name, fix=fix)
    if allow_inf and not number > 0:  # also NaN
        raise ConfigError(_with_fix(f"{name} must be > 0 (or inf), got {value!r}", fix))
    if not allow_inf and not 0 < number < math.inf:
        raise ConfigError(_with_fix(f"{name} must be finite and > 0, got {value!r}", fix))
    return number


def check_non_negative(value: object, *, name: str, allow_inf: bool = False, fix: str | None = None) -> float:
    """``value`` as a ``float >= 0``: finite, or also ``math.inf`` with ``allow_inf`` (the ε of a
    ledger entry or budget, where ``inf`` records a non-private release).

    Raises
    ------
    ConfigTypeError
        ``value`` is not a real number.
    ConfigError
        ``value`` is negative or NaN, or infinite without ``allow_inf``.
    """
    number = check_real(value, name=name, fix=fix)
    if allow_inf and not number >= 0:  # also NaN
        raise ConfigError(_with_fix(f"{name} must be >= 0 (or inf), got {value!r}", fix))
    if not allow_inf and not 0 <= number < math.inf:
        raise ConfigError(_with_fix(f"{name} must be finite and >= 0, got {value!r}", fix))
    return number


def check_probability(value: object, *, name: str, fix: str | None = None) -> float:
    """``value`` as a ``float`` in the closed interval ``[0, 1]`` (a δ of (ε, δ)-DP).

    Raises
    ------
    ConfigTypeError
        ``value`` is not a real number.
    ConfigError
        ``value`` is not in ``[0, 1]`` (NaN included).
    """
    number = check_real(value, name=name, fix=fix)
    if not 0 <= number <= 1:
        raise ConfigError(_with_fix(f"{name} is a probability and must be in [0, 1], got {value!r}", fix))
    return number


def check_fraction(value: object, *, name: str, fix: str | None = None) -> float:
    """``value`` as a ``float`` strictly between 0 and 1 (a share of a budget or of the rows).

    Raises
    ------
    ConfigTypeError
        ``value`` is not a real number.
    ConfigError
        ``value`` is not in the open interval ``(0, 1)``.
    """
    number = check_real(value, name=name, fix=fix)
    if not 0 < number < 1:
        raise ConfigError(_with_fix(f"{name} must be a number in (0, 1), got {value!r}", fix))
    return number


def check_choice(value: object, *, name: str, allowed: Collection[str]) -> str:
    """``value`` if it is one of the strings ``allowed``.

    Raises
    ------
    ConfigError
        ``value`` is not one of ``allowed`` (a value of another type included).
    """
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(f"{name} must be one of {tuple(allowed)}, got {value!r}")
    return value


def check_rng(rng: object) -> np.random.Generator:
    """``rng`` if it is a ``numpy.random.Generator``; ``None`` never means a global generator
    (STYLE rule 5).

    Raises
    ------
    ConfigTypeError
        ``rng`` is anything else (``None``, a ``RandomState``, a seed).
    """
    if not isinstance(rng, np.random.Generator):
        raise ConfigTypeError(
            f"rng must be a numpy.random.Generator, got {type(rng).__name__}; "
            "build one with privfed.common.rng.make_rng('seeded', seed) or make_rng('secure')"
        )
    return rng


def check_real_array(values: object, *, name: str) -> np.ndarray:
    """``values`` as an ndarray of integers or floats, not converted (``np.asarray``).

    Raises
    ------
    ConfigTypeError
        The array's dtype is not integer or floating (booleans, complex, strings, objects).
    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf":
        raise ConfigTypeError(f"{name} must be a real-valued array, got dtype {arr.dtype}")
    return arr


def check_int_array(values: object, *, name: str, fix: str | None = None) -> np.ndarray:
    """``values`` as an ndarray of (signed or unsigned) integers, not converted: class labels, counts.

    Raises
    ------
    ConfigTypeError
        The array's dtype is not an integer type (booleans and floats included, even ``1.0``).
    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise ConfigTypeError(_with_fix(f"{name} must be an array of integers, got dtype {arr.dtype}", fix))
    return arr
