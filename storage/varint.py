"""Varints of Kafka's record format (the one reader and writer of storage's file formats).

Kafka's ``ByteUtils``: an unsigned varint is little-endian base-128, 7 bits per byte, the high
bit set on every byte but the last; a signed varint / varlong is the zigzag encoding of the value
(``(v << 1) ^ (v >> 63)``) written as an unsigned varint. A record (``DefaultRecord``) uses them
for its length, timestamp delta, offset delta, key and value lengths and header count; all are
read here as varlongs (at most 10 bytes), which accepts every valid varint too.

Every read is bounded by ``end`` (the end of the record or buffer being parsed): a varint that
runs past it or over 10 bytes raises ``VarintError``, which is both a ``CorruptRecordError``
(the storage engine's error) and a ``RecordDecodeError`` (the record codec's ``ValueError``).

Wire-only varints of the protocol layer (tagged fields, compact lengths) are read by
``protocol.fast.common.uvarint`` (protocol may not import storage).

Hot loops that decode one- and two-byte varints inline (``record_codec._decode_records``,
``analytics.arrow``) mirror ``read_uvarint``; ``tests/storage/test_varint.py`` checks that
they agree.

Threading: pure functions.
"""

from __future__ import annotations

from .errors import CorruptRecordError
from .record_types import RecordDecodeError

__all__ = [
    "MAX_VARLONG_BYTES",
    "VarintError",
    "read_uvarint",
    "read_varint",
    "write_uvarint",
    "write_varint",
    "zigzag_decode",
]

MAX_VARLONG_BYTES = 10
_U64 = 0xFFFF_FFFF_FFFF_FFFF

Buffer = bytes | bytearray | memoryview


class VarintError(RecordDecodeError, CorruptRecordError):
    """A varint truncated by the end of its record or longer than 10 bytes."""


def read_uvarint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (still zigzagged for signed fields) and the position
    after it; it must end before ``end``."""
    raw = 0
    shift = 0
    while True:
        if pos >= end:
            raise VarintError("truncated varint in a record")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return raw, pos
        shift += 7
        if shift > 63:
            raise VarintError("varint longer than 10 bytes in a record")


def zigzag_decode(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


def read_varint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """The signed (zigzag) varint / varlong at ``pos`` and the position after it."""
    raw, pos = read_uvarint(buf, pos, end)
    return (raw >> 1) ^ -(raw & 1), pos


def write_uvarint(value: int, out: bytearray) -> None:
    """Append ``value`` (0 <= value < 2^64) as an unsigned varint."""
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(value: int, out: bytearray) -> None:
    """Append ``value`` as a zigzag varlong (64-bit)."""
    write_uvarint(((value << 1) ^ (value >> 63)) & _U64, out)
