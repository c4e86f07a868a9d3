"""The building blocks of serde: arrays, reports on the snapping grid, bounds, and the wire's enums.

Every ``*_from_proto`` validates what a peer sent and raises :class:`RemoteProtocolError` on
anything malformed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from functools import lru_cache
from typing import Any, Generic, TypeVar, cast

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.mechanisms.base import REPORT_LIMIT, SNAP_BITS
from privfed.proto import privfed_pb2 as pb

_O = TypeVar("_O")
_M = TypeVar("_M")


class LastEncoded(Generic[_O, _M]):
    """``encode(obj)``, kept for the last object by identity: a round's tasks carry the same spec,
    config, history and learner objects, so the coordinator encodes each once per round, not once
    per owner. The pair is swapped in one assignment (gRPC threads encode concurrently); the message
    is only ever copied into its parents, never changed."""

    def __init__(self, encode: Callable[[_O], _M]) -> None:
        self._encode = encode
        self._last: tuple[_O, _M] | None = None

    def __call__(self, obj: _O) -> _M:
        last = self._last
        if last is not None and last[0] is obj:
            return last[1]
        msg = self._encode(obj)
        self._last = (obj, msg)
        return msg


def decoded_once(message: type[_M], decode: Callable[[_M], _O], size: int = 8) -> Callable[[_M], _O]:
    """``decode``, run once per distinct message (by its deterministic bytes) of the ``size`` latest: a
    round's tasks carry the same spec, so a node decodes and validates it once per round, not once
    per owner (issue 27). Only the exact bytes of a message decoded before hit: any other message is
    decoded, and checked, again; a message that does not decode raises every time (nothing is kept).
    The tasks that share a message share its decoded object, as the tasks of a round do in process."""

    @lru_cache(maxsize=size)
    def from_bytes(raw: bytes) -> _O:
        return decode(message.FromString(raw))  # type: ignore[attr-defined]

    return lambda m: from_bytes(m.SerializeToString(deterministic=True))  # type: ignore[attr-defined]


MAX_MATRIX_VALUES = 8_000_000  # 64 MB of float64; matches the transport's message bound


def matrix_to_proto(a: np.ndarray) -> pb.Matrix:
    a = np.ascontiguousarray(a, dtype="<f8")
    return pb.Matrix(shape=list(a.shape), data=a.tobytes())


def _checked_shape(m: pb.Matrix | pb.Reports, what: str) -> tuple[int, ...]:
    """The shape a peer declared, checked against the size bound and the bytes it sent."""
    shape = tuple(int(s) for s in m.shape)
    size = math.prod(shape)  # () is a scalar: one value
    if size > MAX_MATRIX_VALUES:
        raise RemoteProtocolError(f"{what} of shape {shape} exceeds {MAX_MATRIX_VALUES} values")
    if len(m.data) != 8 * size:
        raise RemoteProtocolError(f"{what} of shape {shape} needs {8 * size} bytes, got {len(m.data)}")
    return shape


def matrix_from_proto(m: pb.Matrix, what: str = "matrix") -> np.ndarray:
    shape = _checked_shape(m, what)
    return np.frombuffer(m.data, dtype="<f8").reshape(shape).astype(np.float64)


def two_d(a: np.ndarray, what: str) -> np.ndarray:
    """``a`` if it is a finite 2-D matrix; a :class:`RemoteProtocolError` otherwise."""
    if a.ndim != 2 or not np.all(np.isfinite(a)):
        raise RemoteProtocolError(f"{what} must be a finite 2-D matrix, got shape {a.shape}")
    return a


GRID_BITS = SNAP_BITS  # the mechanisms' snapping grid 2^-20 (SPEC §12)
_GRID_LIMIT = REPORT_LIMIT * 2.0**GRID_BITS  # 2^62: int64 indices with room to spare


def reports_to_proto(a: np.ndarray) -> pb.Reports:
    """Perturbed reports as int64 indices on the 2^-20 grid (exact for snapped outputs)."""
    scaled = np.rint(np.asarray(a, dtype=np.float64) * 2.0**GRID_BITS)
    if not np.all(np.isfinite(scaled)) or np.any(np.abs(scaled) >= _GRID_LIMIT):
        raise ConfigError("reports must be finite and below 2^42 in magnitude to go on the wire")
    return pb.Reports(shape=list(scaled.shape), grid_bits=GRID_BITS, data=scaled.astype("<i8").tobytes())


def reports_from_proto(m: pb.Reports) -> np.ndarray:
    shape = _checked_shape(m, "reports")
    if m.grid_bits != GRID_BITS:
        raise RemoteProtocolError(f"reports on grid 2^-{m.grid_bits}, expected 2^-{GRID_BITS}")
    return np.frombuffer(m.data, dtype="<i8").reshape(shape).astype(np.float64) * 2.0**-GRID_BITS


def integers(values: Iterable[int], what: str) -> np.ndarray:
    """Unsigned integers a peer sent (labels, sampled coordinates, oracle reports) as int64."""
    out = np.fromiter(values, dtype=np.uint64)
    if out.size and int(out.max()) > np.iinfo(np.int64).max:
        raise RemoteProtocolError(f"{what} beyond 2^63")
    return out.astype(np.int64)


def bounds_to_proto(b: Bounds) -> pb.Matrix:
    return matrix_to_proto(np.stack([b.lo, b.hi]))


def bounds_from_proto(m: pb.Matrix) -> Bounds:
    a = matrix_from_proto(m, "bounds")
    if a.ndim != 2 or a.shape[0] != 2:
        raise RemoteProtocolError(f"bounds must have shape (2, d), got {a.shape}")
    try:
        return Bounds(a[0], a[1])
    except ConfigError as exc:
        raise RemoteProtocolError(f"invalid bounds: {exc}") from exc


E = TypeVar("E", bound=int)


class WireEnum(Generic[E]):
    """The wire enum of one of Python's public choices (a tuple of names, declared where the choice is).

    Each name maps to the enum value ``<ENUM NAME IN UPPER SNAKE>_<NAME IN UPPER SNAKE>`` (``"mc-huber"``
    of ``SvmModel``: ``SVM_MODEL_MC_HUBER``). The wire has no default: UNSPECIFIED (0, what an unset
    field reads as) and a number this version does not know are malformed, so the one default is
    Python's; a name Python knows without a wire value is a :class:`ConfigError` (a bug, caught by
    ``tests/unit/test_task_kinds.py``).
    """

    def __init__(self, enum: type[E], choices: Collection[str]) -> None:
        wrapper: Any = enum  # the generated class's EnumTypeWrapper (untyped)
        self.name: str = wrapper.DESCRIPTOR.name
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", self.name).upper()
        self.choices = tuple(choices)
        wire = {c: f"{prefix}_{c.upper().replace('-', '_')}" for c in self.choices}
        self.values: Mapping[str, E] = {c: cast(E, wrapper.Value(v)) for c, v in wire.items() if v in wrapper.keys()}
        self.names = {v: c for c, v in self.values.items()}

    def to_proto(self, name: str) -> E:
        if name not in self.values:
            raise ConfigError(f"{self.name}: no wire value for {name!r}; known: {sorted(self.values)}")
        return self.values[name]

    def from_proto(self, value: int, field: str) -> str:
        if value not in self.names:
            raise RemoteProtocolError(f"{field} must name one of {sorted(self.values)}, got enum value {value}")
        return self.names[value]
