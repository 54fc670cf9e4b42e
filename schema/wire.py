"""The Schema Registry wire format of a key or value, as Confluent's serializers write it.

A zero byte (the magic), the schema id as a 4-byte big-endian integer, then the encoded
record. Protobuf puts the message indexes between the id and the message: a zigzag varint
count, then that many zigzag varints (the path to the message in the file: ``[0]`` is the
first top-level message, written as the single byte 0).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tidelog.storage.varint import VarintError, read_varint, write_varint

__all__ = ("MAGIC", "Frame", "FrameError", "encode_frame", "parse_frame")

MAGIC = 0
_ID = struct.Struct(">I")
#: More message indexes than any real nesting has (a guard on corrupt input).
_MAX_INDEXES = 64


class FrameError(ValueError):
    """Bytes that are not in the registry's wire format."""


@dataclass(frozen=True, slots=True)
class Frame:
    schema_id: int
    #: Protobuf message indexes (empty for Avro and JSON Schema).
    message_indexes: tuple[int, ...]
    #: Where the encoded record starts.
    offset: int


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    try:
        return read_varint(data, pos, len(data))
    except VarintError as exc:
        raise FrameError(f"message indexes: {exc}") from None


def parse_frame(data: bytes, *, protobuf: bool = False) -> Frame:
    if len(data) < 5:
        raise FrameError(f"{len(data)} bytes: shorter than the 5-byte registry header")
    if data[0] != MAGIC:
        raise FrameError(f"magic byte {data[0]}, not 0: not written by a registry serializer")
    (schema_id,) = _ID.unpack_from(data, 1)
    if not protobuf:
        return Frame(schema_id, (), 5)
    count, pos = _varint(data, 5)
    if count == 0:
        return Frame(schema_id, (0,), pos)
    if not 0 < count <= _MAX_INDEXES:
        raise FrameError(f"{count} message indexes")
    indexes = []
    for _ in range(count):
        index, pos = _varint(data, pos)
        indexes.append(index)
    return Frame(schema_id, tuple(indexes), pos)


def encode_frame(schema_id: int, payload: bytes, message_indexes: tuple[int, ...] = ()) -> bytes:
    out = bytearray([MAGIC]) + _ID.pack(schema_id)
    if message_indexes == (0,):
        out.append(0)  # the usual case, one byte
    elif message_indexes:
        write_varint(len(message_indexes), out)
        for index in message_indexes:
            write_varint(index, out)
    return bytes(out + payload)
