"""A structural pre-check of request bodies, run before kio's native reader sees them.

kio's reader trusts array lengths: a garbage compact array length of 2**32 makes it try to
allocate ~34 GB and the whole process aborts (a Rust allocation failure cannot be caught). So
every request body is walked first by a validator compiled from the same kio schema: it checks
that each string, byte and array length fits in the bytes that are left (an array of n elements
needs at least n bytes, each element's minimum size times n in fact), descends into tagged
fields it knows, and raises FrameDecodeError otherwise. It builds nothing, so it costs a few
microseconds for the small request shapes of the hot path.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

from tidelog.protocol.errors import FrameDecodeError
from tidelog.protocol.fast.common import uvarint

__all__ = ("check_request_body", "validator_for")

#: skip(buffer, position, end) -> position after the value
Skip = Callable[[bytes | memoryview, int, int], int]

_FIXED = {
    "int8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _need(end: int, pos: int, n: int) -> None:
    if n < 0 or pos + n > end:
        raise FrameDecodeError(f"request body truncated: {n} bytes needed at {pos}, end {end}")


def _uvarint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    # protocol's one wire varint reader is protocol.fast.common.uvarint
    return uvarint("request body", buf, pos, end)


def _fixed(size: int) -> Skip:
    def skip(buf: bytes | memoryview, pos: int, end: int) -> int:
        _need(end, pos, size)
        return pos + size

    return skip


def _sized(flexible: bool, legacy_width: int, nullable: bool) -> Skip:
    """string (int16 length) / bytes, records (int32 length); compact: uvarint length + 1."""
    length_struct = _I16 if legacy_width == 2 else _I32

    def skip(buf: bytes | memoryview, pos: int, end: int) -> int:
        if flexible:
            n, pos = _uvarint(buf, pos, end)
            n -= 1
        else:
            _need(end, pos, legacy_width)
            (n,) = length_struct.unpack_from(buf, pos)
            pos += legacy_width
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise FrameDecodeError(f"negative length {n} at {pos}")
        _need(end, pos, n)
        return pos + n

    return skip


def _array(flexible: bool, nullable: bool, element: Skip, min_size: int) -> Skip:
    def skip(buf: bytes | memoryview, pos: int, end: int) -> int:
        if flexible:
            n, pos = _uvarint(buf, pos, end)
            n -= 1
        else:
            _need(end, pos, 4)
            (n,) = _I32.unpack_from(buf, pos)
            pos += 4
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise FrameDecodeError(f"negative array length {n} at {pos}")
        if n * max(min_size, 1) > end - pos:
            raise FrameDecodeError(f"array of {n} elements cannot fit in {end - pos} bytes")
        for _ in range(n):
            pos = element(buf, pos, end)
        return pos

    return skip


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> tuple[Skip, int]:
    """(skipper, minimum encoded size)."""
    if kafka_type in _FIXED:
        return _fixed(_FIXED[kafka_type]), _FIXED[kafka_type]
    if kafka_type == "string":
        return _sized(flexible, 2, nullable), 1 if flexible else 2
    if kafka_type in ("bytes", "records"):
        return _sized(flexible, 4, nullable), 1 if flexible else 4
    raise NotImplementedError(f"no validator for kafka type {kafka_type!r}")


def _field(field: dataclasses.Field[Any], flexible: bool, tagged: bool) -> tuple[Skip, int]:
    kind = classify_field(field)
    nullable = False if tagged else is_optional(field)
    if isinstance(kind, PrimitiveField):
        return _primitive(str(field.metadata["kafka_type"]), flexible, nullable)
    if isinstance(kind, PrimitiveTupleField):
        element, size = _primitive(str(field.metadata["kafka_type"]), flexible, False)
        return _array(flexible, nullable, element, size), 1 if flexible else 4
    if isinstance(kind, EntityTupleField):
        element, size = _entity(kind.type_)
        return _array(flexible, nullable, element, size), 1 if flexible else 4
    assert isinstance(kind, EntityField)
    inner, size = _entity(kind.type_)
    if not nullable:
        return inner, size

    def skip_nullable(buf: bytes | memoryview, pos: int, end: int) -> int:
        _need(end, pos, 1)
        marker = buf[pos]
        return pos + 1 if marker == 0xFF else inner(buf, pos + 1, end)

    return skip_nullable, 1


@functools.cache
def _entity(cls: type) -> tuple[Skip, int]:
    flexible = bool(getattr(cls, "__flexible__", False))
    plain: list[Skip] = []
    tagged: dict[int, Skip] = {}
    min_size = 1 if flexible else 0
    for f in dataclasses.fields(cls):
        tag = f.metadata.get("tag")
        skip, size = _field(f, flexible, tag is not None)
        if tag is None:
            plain.append(skip)
            min_size += size
        else:
            tagged[int(tag)] = skip
    skippers = tuple(plain)

    def skip_entity(buf: bytes | memoryview, pos: int, end: int) -> int:
        for skip in skippers:
            pos = skip(buf, pos, end)
        if flexible:
            count, pos = _uvarint(buf, pos, end)
            if count > end - pos:
                raise FrameDecodeError(f"{count} tagged fields cannot fit in {end - pos} bytes")
            for _ in range(count):
                tag, pos = _uvarint(buf, pos, end)
                size, pos = _uvarint(buf, pos, end)
                _need(end, pos, size)
                known = tagged.get(tag)
                if known is not None and known(buf, pos, pos + size) != pos + size:
                    raise FrameDecodeError(f"tagged field {tag} does not fill its {size} bytes")
                pos += size
        return pos

    return skip_entity, min_size


def validator_for(request_cls: type) -> Skip:
    """The compiled validator of a kio request class (cached)."""
    return _entity(request_cls)[0]


def check_request_body(request_cls: type, frame: bytes | memoryview, offset: int) -> None:
    """Raise FrameDecodeError unless the body at ``offset`` is structurally sound."""
    validator_for(request_cls)(frame, offset, len(frame))
