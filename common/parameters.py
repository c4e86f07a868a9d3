"""Parameters declared once (issue 25 item 2), in the style of scikit-learn's ``_parameter_constraints``.

A parameter's default lives in its dataclass field (``BoostingParams``, a job's parameter objects in
``privfed.server.parameters``), as an estimator's
lives in its ``__init__`` signature; everything else about it is one :class:`Param` in its table, keyed by
the field's name: its :class:`Constraint` (what a value must be, and how a flag's text is read), a one-line
help, its command-line flag (if a flag sets it) and whether it travels in tasks (``wire``). Validation, the
flags' names (``privfed.server.config.FLAGS``), their argparse arguments (``privfed.deploy.cli``) and the
TOML keys (``privfed.deploy.simulation_config``) are all read from the tables.

Pure: no argparse here (nothing below ``deploy/`` imports it); a constraint's ``parse`` turns a flag's
text into a value and raises :class:`ValueError` on text that is none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.validation import (
    check_choice,
    check_fraction,
    check_int,
    check_non_negative,
    check_positive,
)


@dataclass(frozen=True)
class Constraint:
    """What a parameter's value must be.

    ``check(value, name)`` returns the value (converted) or raises :class:`ConfigError` naming ``name``;
    ``parse`` reads a flag's text (None: no flag can set it); ``choices`` are the values a flag offers;
    ``optional``: None is allowed too (the field then derives its value, as its docstring says).
    """

    check: Callable[[object, str], object]
    parse: Callable[[str], object] | None = None
    choices: tuple[str, ...] | None = None
    optional: bool = False

    def __call__(self, value: object, name: str) -> object:
        return value if self.optional and value is None else self.check(value, name)


def options(allowed: tuple[str, ...], *, optional: bool = False) -> Constraint:
    """One of ``allowed``."""
    return Constraint(lambda v, name: check_choice(v, name=name, allowed=allowed), str, allowed, optional)


def integer(minimum: int, *, optional: bool = False, maximum: int | None = None) -> Constraint:
    """An int ``>= minimum`` (and ``<= maximum``, if given)."""
    return Constraint(lambda v, name: check_int(v, name=name, minimum=minimum, maximum=maximum), int, None, optional)


def positive(*, allow_inf: bool = False, fix: str | None = None, optional: bool = False) -> Constraint:
    """A real number > 0 (``inf`` too when ``allow_inf``)."""
    return Constraint(lambda v, name: check_positive(v, name=name, allow_inf=allow_inf, fix=fix), float, None, optional)


def _fraction(value: object, name: str) -> object:
    return check_fraction(value, name=name)


#: A real number in (0, 1).
fraction = Constraint(_fraction, float)


def _below_one(value: object, name: str) -> object:
    if check_non_negative(value, name=name) >= 1:
        raise ConfigError(f"{name} must be a number in [0, 1), got {value!r}")
    return value


#: A real number in [0, 1) (a δ).
below_one = Constraint(_below_one, float)


def _public_bounds(value: object, name: str) -> object:
    if not isinstance(value, Bounds):
        raise ConfigError(f"{name} must be a Bounds (public configuration), got {type(value).__name__}")
    return value


#: A :class:`~privfed.common.bounds.Bounds` (public configuration, never from the rows); no flag.
public_bounds = Constraint(_public_bounds)
#: No constraint of its own: checked with the other fields by the dataclass (no flag).
anything = Constraint(lambda value, name: value)
#: A switch (a flag without a value).
switch = Constraint(lambda value, name: value)


@dataclass(frozen=True)
class Param:
    """One parameter (module docstring): its constraint, its help, its flag, whether it goes on the wire.

    ``help`` may be empty for a field whose flag each command declares itself (the common fields of a
    job, whose help and defaults differ between ``privfed simulate`` and ``privfed coordinator``).
    """

    check: Constraint
    help: str = ""
    wire: bool = True
    flag: str | None = None


def check_all(table: Mapping[str, Param], values: object, *, name: Callable[[str], str] = str) -> None:
    """Check every field of ``values`` that ``table`` names; an error names the field as ``name(field)``."""
    for field, param in table.items():
        param.check(getattr(values, field), name(field))
