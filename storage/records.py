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

Threading: pure functions.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from .batch import BATCH_HEADER_SIZE, RecordBatchHeader
from .errors import CorruptRecordError
from .record_compression import decompress as _decompress
from .varint import read_varint as _varint

__all__ = ["decompress", "record_timestamps"]


#: The most one batch's records may inflate to when the broker itself decodes them (keys of a
#: compacted topic on produce, timestamp look-ups). A whole batch is inflated in memory, in up
#: to num.io.threads look-ups at once: a batch of zeros is a ~1000x "decompression bomb".
#: Kafka divergence: Kafka streams records out of a compressed batch and has no such limit.
BROKER_DECOMPRESS_LIMIT = 32 * 1024 * 1024
#: ... and at most two such batches are inflated at once (their memory adds up).
_INFLATING = threading.BoundedSemaphore(2)


def decompress(compression: int, data: bytes | memoryview) -> bytes:
    """Decompress a batch's records section (codecs of ``storage.record_compression``); more
    than ``BROKER_DECOMPRESS_LIMIT`` bytes of records is ``CorruptRecordError``."""
    if compression == 0:
        return bytes(data)
    try:
        with _INFLATING:
            return _decompress(compression, bytes(data), limit=BROKER_DECOMPRESS_LIMIT)
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
