"""The records of a v2 batch as the cleaner sees them: key, offset, tombstone, raw bytes.

A v2 record (inside a batch's records section, after decompression)::

    length           varint   bytes of the record after this field
    attributes       int8     unused (copied as is)
    timestamp_delta  varlong  record timestamp minus the batch's base_timestamp
    offset_delta     varint   record offset minus the batch's base_offset
    key_length       varint   -1: no key
    key              bytes
    value_length     varint   -1: no value (a tombstone)
    value            bytes
    headers          varint count, then the headers (skipped by ``length``)

``scan_records`` returns one ``RecordSpan`` per record: where the record starts, where its
``offset_delta`` field starts (everything from there on is copied verbatim when the record is
re-encoded with a new timestamp delta), where it ends, its deltas, its key and whether it has a
value. Nothing beyond the key is copied out of the buffer.

``require_record_keys`` is the produce-path check for compacted topics (Kafka's LogValidator:
"Compacted topic cannot accept message without key"): the only place where a produce request's
records are decoded, and only their keys, and only when the log's ``cleanup.policy`` contains
``compact``.

Varints are zigzag-encoded (Kafka's ByteUtils.readVarint / readVarlong). Every length is checked
against the bytes present; damage raises ``CorruptRecordError``. ``_scan`` and ``_map_keys`` read
the record length with the same inline one- and two-byte paths as ``record_codec``'s decoder
(longer varints go to ``storage.varint``): one shared function per record cost ``map_keys``
about 1.1x on 1,000 records of 10 bytes (best of 5 runs, 2026-11-27).

Threading: pure functions.
"""

from __future__ import annotations

from ..batch import BATCH_HEADER_SIZE, LOG_OVERHEAD, RecordBatchHeader
from ..errors import CorruptRecordError
from ..record_scan import CLEANER_INFLATING, decompress
from ..record_scan import require_record_keys as require_record_keys  # home: storage.record_scan
from ..varint import read_varint as _varint

__all__ = [
    "RecordSpan",
    "map_keys",
    "records_section",
    "scan_records",
]

# (start, rest_start, end, attributes, timestamp_delta, offset_delta, key, has_value)
RecordSpan = tuple[int, int, int, int, int, int, bytes | None, bool]


def records_section(batch: bytes | memoryview, header: RecordBatchHeader) -> bytes:
    """The (decompressed) records section of a whole batch's bytes."""
    end = header.batch_length + LOG_OVERHEAD
    return decompress(
        header.compression, memoryview(batch)[BATCH_HEADER_SIZE:end], gate=CLEANER_INFLATING
    )


def scan_records(data: bytes, count: int) -> list[RecordSpan]:
    """One ``RecordSpan`` per record of a records section that must hold exactly ``count``."""
    try:
        return _scan(data, count)
    except IndexError:
        raise CorruptRecordError("record data is truncated") from None


def _scan(data: bytes, count: int) -> list[RecordSpan]:
    spans: list[RecordSpan] = []
    n = len(data)
    pos = 0
    append = spans.append
    for _ in range(count):
        start = pos
        b = data[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | data[pos + 1] << 7
            length, pos = (b >> 1) ^ -(b & 1), pos + 2
        else:
            length, pos = _varint(data, pos, n)
        end = pos + length
        if length < 6 or end > n:
            raise CorruptRecordError(f"record length {length} at {start} overruns the batch")
        attributes = data[pos]
        b = data[pos + 1]
        if b < 0x80:
            ts_delta, cursor = (b >> 1) ^ -(b & 1), pos + 2
        else:
            ts_delta, cursor = _varint(data, pos + 1, end)
        rest = cursor
        b = data[cursor]
        if b < 0x80:
            offset_delta, cursor = (b >> 1) ^ -(b & 1), cursor + 1
        else:
            offset_delta, cursor = _varint(data, cursor, end)
        if cursor >= end:
            raise CorruptRecordError(f"record at {start} ends inside its header")
        b = data[cursor]
        if b == 1:  # zigzag(-1): no key
            key: bytes | None = None
            cursor += 1
        else:
            if b < 0x80:
                key_length, cursor = b >> 1, cursor + 1
                if b & 1:
                    raise CorruptRecordError(f"invalid key length in record at {start}")
            else:
                key_length, cursor = _varint(data, cursor, end)
                if key_length < 0:
                    raise CorruptRecordError(f"invalid key length in record at {start}")
            if cursor + key_length > end:
                raise CorruptRecordError(f"key of record at {start} overruns the record")
            key = data[cursor : cursor + key_length]
            cursor += key_length
        if cursor >= end:
            raise CorruptRecordError(f"record at {start} has no value field")
        b = data[cursor]  # value length: only its sign matters (zigzag: odd = negative)
        if b & 1 and b != 1:
            raise CorruptRecordError(f"invalid value length in record at {start}")
        append((start, rest, end, attributes, ts_delta, offset_delta, key, b != 1))
        pos = end
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes left over after {count} records")
    return spans


def map_keys(
    data: bytes, count: int, base_offset: int, start: int, entries: dict[bytes, int]
) -> tuple[int, int]:
    """Put ``key -> offset`` of every keyed record at or above ``start`` into ``entries``.

    The offset map's inner loop (nothing but the offset delta and the key is decoded). Returns
    ``(keys put, key bytes put)``.
    """
    try:
        return _map_keys(data, count, base_offset, start, entries)
    except IndexError:
        raise CorruptRecordError("record data is truncated") from None


def _map_keys(
    data: bytes, count: int, base_offset: int, start: int, entries: dict[bytes, int]
) -> tuple[int, int]:
    n = len(data)
    pos = 0
    put = 0
    key_bytes = 0
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        elif data[pos + 1] < 0x80:
            b = (b & 0x7F) | data[pos + 1] << 7
            length, pos = (b >> 1) ^ -(b & 1), pos + 2
        else:
            length, pos = _varint(data, pos, n)
        end = pos + length
        if length < 6 or end > n:
            raise CorruptRecordError(f"record length {length} overruns the batch")
        cursor = pos + 1
        while data[cursor] >= 0x80:  # timestamp delta: skipped
            cursor += 1
        cursor += 1
        b = data[cursor]
        if b < 0x80:
            offset_delta, cursor = (b >> 1) ^ -(b & 1), cursor + 1
        else:
            offset_delta, cursor = _varint(data, cursor, end)
        b = data[cursor]
        if b != 1:  # zigzag(-1): no key
            if b < 0x80:
                key_length, cursor = b >> 1, cursor + 1
            else:
                key_length, cursor = _varint(data, cursor, end)
            if key_length < 0 or cursor + key_length > end:
                raise CorruptRecordError("invalid key length in a record")
            offset = base_offset + offset_delta
            if offset >= start:
                entries[data[cursor : cursor + key_length]] = offset
                put += 1
                key_bytes += key_length
        pos = end
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes left over after {count} records")
    return put, key_bytes
