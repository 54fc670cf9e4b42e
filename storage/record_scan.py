"""Just enough record decoding for timestamp look-ups (ListOffsets by time, max timestamp).

The append and fetch paths never decode records; only ``offset_for_timestamp`` and
``offset_of_max_timestamp`` look inside one batch. A v2 record is::

    length           varint   bytes of the record after this field
    attributes       int8     unused
    timestamp_delta  varlong  record timestamp minus the batch's base_timestamp
    offset_delta     varint   record offset minus the batch's base_offset
    key, value, headers       (skipped by ``length``)

Batch compression (attributes bits 0-2): 1 gzip, 2 snappy, 3 lz4, 4 zstd; decompression is
``storage.record_compression``'s (bounded output). In a LogAppendTime batch every record's
timestamp is the batch's ``max_timestamp``. Every length is checked against the bytes present.

Threading: pure functions, meant for worker threads when batches are large (the broker runs a
compacted topic's key check of a compressed or big batch, and timestamp look-ups, off its event
loop). Two gates bound how many batches are inflated at once: ``REQUEST_INFLATING`` for client
requests (produce key checks, ListOffsets by time) and ``CLEANER_INFLATING`` for the log cleaner,
so client requests never queue behind the cleaner. A long key scan lets other threads take the
GIL every ``_PAUSE_EVERY`` records (``time.sleep(0)``), so a worker scanning 30,000 records does
not hold the event loop's thread off for the interpreter's 5 ms switch interval at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import cast

from .batch import BATCH_HEADER_SIZE, CONTROL_MASK, LOG_OVERHEAD, RecordBatchHeader
from .errors import CorruptRecordError, InvalidRecordError
from .record_compression import decompress as _decompress
from .varint import read_varint as _varint

__all__ = [
    "CLEANER_INFLATING",
    "REQUEST_INFLATING",
    "decompress",
    "record_timestamps",
    "require_record_keys",
]


#: The most one batch's records may inflate to when the broker itself decodes them (keys of a
#: compacted topic on produce, timestamp look-ups). A whole batch is inflated in memory, in up
#: to num.io.threads look-ups at once: a batch of zeros is a ~1000x "decompression bomb".
#: Kafka divergence: Kafka streams records out of a compressed batch and has no such limit.
BROKER_DECOMPRESS_LIMIT = 32 * 1024 * 1024
#: ... and at most two such batches of client requests are inflated at once (their memory adds
#: up), and one of the log cleaner's (it has its own gate: requests never wait for it).
REQUEST_INFLATING = threading.BoundedSemaphore(2)
CLEANER_INFLATING = threading.BoundedSemaphore(1)
#: Codecs whose libraries decompress from a memoryview (snappy's framing checks need bytes).
_READS_BUFFERS = frozenset((1, 3, 4))
#: A key scan gives other threads the GIL every this many records.
_PAUSE_EVERY = 2048


def decompress(
    compression: int,
    data: bytes | memoryview,
    *,
    gate: threading.BoundedSemaphore = REQUEST_INFLATING,
) -> bytes:
    """Decompress a batch's records section (codecs of ``storage.record_compression``); more
    than ``BROKER_DECOMPRESS_LIMIT`` bytes of records is ``CorruptRecordError``. ``gate``
    bounds the inflations running at once (the cleaner passes ``CLEANER_INFLATING``)."""
    if compression == 0:
        return bytes(data)
    # gzip, lz4 and zstd read any buffer: no copy of a 32 MiB batch (made holding the GIL)
    source = data if compression in _READS_BUFFERS else bytes(data)
    try:
        with gate:
            return _decompress(compression, cast(bytes, source), limit=BROKER_DECOMPRESS_LIMIT)
    except ValueError as exc:  # RecordDecodeError
        reason = str(exc)
    # Raised outside the handler: the failed decompression's frames (and its partial output,
    # up to the limit) must not live on in this exception's traceback chain.
    raise CorruptRecordError(f"cannot decompress batch: {reason}")


def record_timestamps(header: RecordBatchHeader, batch: bytes) -> Iterator[tuple[int, int]]:
    """Yield ``(offset, timestamp)`` of each record of a whole batch's bytes."""
    if header.timestamp_type == 1:
        # LogAppendTime: every record carries the batch's max timestamp.
        for delta in range(header.last_offset_delta + 1):
            yield header.base_offset + delta, header.max_timestamp
        return
    body = decompress(header.compression, memoryview(batch)[BATCH_HEADER_SIZE:])
    end = len(body)
    pos = 0
    for _ in range(header.records_count):
        length, pos = _varint(body, pos, end)
        if length < 0 or pos + length > end:
            raise CorruptRecordError("record length beyond the batch")
        record_end = pos + length
        cursor = pos + 1  # attributes
        timestamp_delta, cursor = _varint(body, cursor, record_end)
        offset_delta, cursor = _varint(body, cursor, record_end)
        yield header.base_offset + offset_delta, header.base_timestamp + timestamp_delta
        pos = record_end


def _keyless_records(data: bytes, count: int) -> list[int]:
    """Indexes of the records without a key in a records section (nothing else is decoded)."""
    n = len(data)
    pos = 0
    out: list[int] = []
    for i in range(count):
        if i % _PAUSE_EVERY == _PAUSE_EVERY - 1:
            time.sleep(0)  # a long scan: let the event loop's thread have the GIL
        length, pos = _varint(data, pos, n)
        end = pos + length
        if length < 6 or end > n:
            raise CorruptRecordError("record length overruns the batch")
        cursor = pos + 1
        _, cursor = _varint(data, cursor, end)  # timestamp delta
        _, cursor = _varint(data, cursor, end)  # offset delta
        key_length, _ = _varint(data, cursor, end)
        if key_length < 0:
            out.append(i)
        pos = end
    return out


def require_record_keys(
    records: bytes | bytearray | memoryview,
    batches: Sequence[tuple[int, RecordBatchHeader]],
    topic_partition: str = "",
) -> None:
    """Refuse keyless records (``InvalidRecordError``, INVALID_RECORD) for a compacted log.

    ``batches`` are ``(position, header)`` as ``storage.batch.validate_records`` returns them
    (CRC already checked). Control batches are skipped. A compressed batch is decompressed.
    The error lists every keyless record (KIP-467) with Kafka's LogValidator messages, so a
    client fails only those records.
    """
    view = memoryview(records)
    keyless: list[int] = []
    first_index = 0
    for position, header in batches:
        count = header.records_count
        if header.attributes & CONTROL_MASK:
            first_index += max(count, 0)
            continue
        size = header.batch_length + LOG_OVERHEAD
        body = decompress(header.compression, view[position + BATCH_HEADER_SIZE : position + size])
        try:
            keyless.extend(first_index + i for i in _keyless_records(body, count))
        except (IndexError, CorruptRecordError) as exc:
            raise CorruptRecordError(f"batch at position {position}: {exc}") from None
        first_index += count
    if keyless:
        what = (
            "Compacted topic cannot accept message without key in topic partition "
            f"{topic_partition}"  # Kafka 4's words (3.x ended them with a full stop)
        )
        errors = tuple((i, what) for i in keyless)
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{what}')" for i in keyless[:3])
        raise InvalidRecordError(
            f"One or more records have been rejected due to {len(keyless)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]",
            errors,
        )
