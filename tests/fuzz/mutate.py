"""Schema-driven mutation of protobuf messages for the fuzz tests (issue 14, item 3).

:func:`mutated` takes a valid message and a hypothesis ``data`` object and returns a copy in
which some fields were replaced by hostile values of the field's wire type: NaN, ±inf, huge and
negative numbers, unknown enum values, random or oversized strings and bytes, repeated fields of
random lengths, sub-messages cleared or mutated in turn. It walks the descriptor, so it follows
privfed.proto as the schema changes, and every mutation is a valid protobuf encoding (the
undecodable case is covered by random bytes).
"""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor as F
from hypothesis import strategies as st

_FLOATS = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-300, 1e300, -1.0, 5e-324]),
    st.floats(allow_nan=True, allow_infinity=True),
)
_INTS = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1),
    F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    F.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1),
    F.TYPE_SINT64: (-(2**63), 2**63 - 1),
    F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_FIXED32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1),
    F.TYPE_FIXED64: (0, 2**64 - 1),
}
#: Strings a parser may choke on: empty, control characters, other encodings of ids, long ones.
_TEXT = st.one_of(
    st.sampled_from(["", "\x00", "inf", "nan", "-1", "owner-0.o00000", "../../etc/passwd", "x" * 4096]),
    st.text(max_size=40),
)
_BYTES = st.one_of(st.sampled_from([b"", b"\x00" * 7, b"\xff" * 4097]), st.binary(max_size=64))


def _scalar(data, field: F):
    t = field.type
    if t in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        value = data.draw(_FLOATS)
        return value if t == F.TYPE_DOUBLE or abs(value) < 3e38 or value != value else float("inf")
    if t in _INTS:
        lo, hi = _INTS[t]
        return data.draw(st.one_of(st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1, 2]), st.integers(lo, hi)))
    if t == F.TYPE_BOOL:
        return data.draw(st.booleans())
    if t == F.TYPE_ENUM:  # proto3 enums are open: unknown numbers must be handled
        return data.draw(st.integers(-3, 1000))
    if t == F.TYPE_STRING:
        return data.draw(_TEXT)
    return data.draw(_BYTES)


def mutate_in_place(message, data, depth: int = 0) -> None:
    """Replace a random subset of ``message``'s fields by hostile values (recursively)."""
    for field in message.DESCRIPTOR.fields:
        if not data.draw(st.integers(0, 3), label=f"touch {field.name}") == 0:  # each field: 1 in 4
            continue
        is_message = field.type == F.TYPE_MESSAGE
        if field.is_repeated:
            target = getattr(message, field.name)
            if is_message and field.message_type.GetOptions().map_entry:
                target.clear()
                continue
            length = data.draw(st.sampled_from([0, 1, 3, 1000]))
            del target[:]
            for _ in range(length):
                if is_message:
                    item = target.add()
                    if depth < 3 and length < 100:
                        mutate_in_place(item, data, depth + 1)
                else:
                    target.append(_scalar(data, field) if length < 100 else _scalar_cheap(field))
        elif is_message:
            if data.draw(st.booleans()):
                message.ClearField(field.name)
            elif depth < 3:
                mutate_in_place(getattr(message, field.name), data, depth + 1)
        else:
            setattr(message, field.name, _scalar(data, field))


def _scalar_cheap(field: F):
    """A fixed value of the field's type, for long repeated fields (keeps examples fast)."""
    t = field.type
    if t in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        return float("nan")
    if t in _INTS or t == F.TYPE_ENUM:
        return 1
    if t == F.TYPE_BOOL:
        return True
    return "" if t == F.TYPE_STRING else b""


def mutated(message, data):
    """A mutated copy of ``message`` (the original is left alone)."""
    copy = type(message)()
    copy.CopyFrom(message)
    mutate_in_place(copy, data)
    return copy
