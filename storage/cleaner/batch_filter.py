"""Filtering one record batch during cleaning (Kafka's MemoryRecords.filterTo + Cleaner rules).

For each batch of the segments being cleaned, ``filter_batch`` returns the bytes to write to the
cleaned segment (or None to drop the batch):

* A control batch (transaction marker) is copied unchanged while its transaction keeps data
  in the log; once it keeps none, the marker gets a delete horizon (KIP-534, as tombstones
  below) and a later pass drops it (``_filter_marker``).
* A batch of an aborted transaction (``storage/cleaner/aborted.py``) keeps none of its records.
* Otherwise each record is kept when (Kafka's Cleaner.shouldRetainRecord):
  - its offset is above the offset map's ``latest_offset`` (not mapped this pass), or
  - it has a key, its offset is >= the key's mapped offset (it is the latest of its key), and it
    has a value or is a tombstone still inside its delete horizon.
  Records without a key are dropped (Kafka counts them as invalid).
* All records kept and no delete horizon to set: the batch is copied byte for byte.
* Some kept: a new batch with the same base offset, ``last_offset_delta``, partition leader
  epoch, producer id/epoch, base sequence, timestamp type, transactional/control bits and
  compression codec holds exactly the kept records (offset deltas unchanged, so offsets stay;
  the last offset stays, so the producer's last sequence does too). Compressed batches are
  decompressed and written back with the same codec.
* None kept: the batch is dropped, unless it must be retained empty - the batch holding an
  active producer's last data offset (its sequence and epoch are the producer state; Kafka's
  RETAIN_EMPTY), or the last batch of the segment group being cleaned. An empty batch is a
  61-byte header: ``records_count`` 0, no compression, ``base_timestamp`` -1, the original
  ``max_timestamp`` and offsets (Kafka's DefaultRecordBatch.writeEmptyHeader).

Tombstones (KIP-534, as Kafka >= 3.1): the first pass that keeps a tombstone rewrites its batch
with attribute bit 6 ("has delete horizon") set and ``base_timestamp`` = now +
``delete.retention.ms`` (the records' timestamp deltas are re-encoded against it, so their
timestamps do not change). A later pass drops the tombstone once ``now >= delete horizon``. A
batch that already carries a horizon keeps it (and its base timestamp) when rewritten.

``max_timestamp`` of a rewritten batch is the largest kept record timestamp (CreateTime) or the
original one (LogAppendTime). The CRC-32C is recomputed; a source batch whose CRC does not match
raises ``CorruptRecordError`` (the cleaner then leaves the log alone).

Kafka divergence: Kafka keeps (empty if need be) only the last batch of a whole cleaning round;
tidelog keeps the last batch of every group, so that a ``.swap`` file's offset range always
reaches the end of the segments it replaces and crash recovery removes exactly those.
Kafka divergence: a batch rewritten without a new delete horizon keeps its ``base_timestamp``
and the kept records' bytes as they are (Kafka rebuilds it with the first kept record's
timestamp as base); record timestamps are the same either way.

Threading: pure functions over one batch; the context is per cleaning pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tidelog.storage.checksum import crc32c

from ..batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    RecordBatchHeader,
)
from ..errors import CorruptRecordError
from ..record_compression import compress
from ..varint import write_varint
from .aborted import AbortedTransactions
from .offset_map import OffsetMap
from .records import records_section, scan_records

__all__ = [
    "DELETE_HORIZON_MASK",
    "FilterContext",
    "FilterOutcome",
    "empty_batch",
    "filter_batch",
]

DELETE_HORIZON_MASK = 0x40
COMPRESSION_MASK = 0x07
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class FilterContext:
    """What a cleaning pass decides records by."""

    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    # producer id -> last data offset of the producer (Kafka's lastRecordsOfActiveProducers)
    active_producers: Mapping[int, int]
    # aborted transactional data is dropped (``storage/cleaner/aborted.py``)
    aborted: AbortedTransactions | None = None
    # producer id -> whether the producer's current transaction kept data so far in this pass
    # (mutable, filled in offset order): a marker whose transaction kept none can go
    txn_has_data: dict[int, bool] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    """What ``filter_batch`` made of one batch."""

    data: bytes | None  # the batch to write (None: dropped)
    records_read: int
    records_kept: int
    changed: bool  # data differs from the source batch
    tombstone_horizon: int  # delete horizon of kept tombstones in ``data``, else -1


def _pack(
    header: RecordBatchHeader,
    attributes: int,
    base_ts: int,
    max_ts: int,
    count: int,
    payload: bytes,
) -> bytes:
    head = bytearray(
        HEADER_STRUCT.pack(
            header.base_offset,
            MIN_BATCH_LENGTH + len(payload),
            header.partition_leader_epoch,
            header.magic,
            0,
            attributes,
            header.last_offset_delta,
            base_ts,
            max_ts,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            count,
        )
    )
    crc = crc32c(payload, crc32c(memoryview(head)[ATTRIBUTES_OFFSET:]))
    head[17:21] = crc.to_bytes(4, "big")
    return bytes(head) + payload


def empty_batch(header: RecordBatchHeader) -> bytes:
    """The header-only batch Kafka keeps for producer state (writeEmptyHeader)."""
    attributes = header.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_MASK)
    return _pack(header, attributes, NO_TIMESTAMP, header.max_timestamp, 0, b"")


def filter_batch(
    batch: bytes | memoryview,
    header: RecordBatchHeader,
    ctx: FilterContext,
    *,
    last_in_group: bool,
) -> FilterOutcome:
    """Filter the whole batch ``batch`` (its bytes, header ``header``); see the module doc."""
    size = header.batch_length + LOG_OVERHEAD
    view = memoryview(batch)
    if crc32c(view[ATTRIBUTES_OFFSET:size]) != header.crc:
        raise CorruptRecordError(
            f"CRC mismatch in batch at offset {header.base_offset} while cleaning"
        )
    if header.attributes & CONTROL_MASK:
        return _filter_marker(view[:size], header, ctx, last_in_group)
    if ctx.aborted is not None and ctx.aborted.is_aborted(header):
        count = header.records_count
        producer_last = ctx.active_producers.get(header.producer_id, -2)
        if last_in_group or producer_last == header.last_offset:
            return FilterOutcome(empty_batch(header), count, 0, True, -1)
        return FilterOutcome(None, count, 0, True, -1)
    data = records_section(view, header)
    spans = scan_records(data, header.records_count)
    base_offset = header.base_offset
    attributes = header.attributes
    has_horizon = bool(attributes & DELETE_HORIZON_MASK)
    retain_deletes = not has_horizon or ctx.now_ms < header.base_timestamp
    latest = ctx.offset_map.latest_offset
    lookup = ctx.offset_map.entries.get
    kept = []
    tombstones = False
    for span in spans:
        offset = base_offset + span[5]
        if offset > latest:
            keep = True
        else:
            key = span[6]
            keep = key is not None and offset >= lookup(key, -1) and (span[7] or retain_deletes)
        if keep:
            kept.append(span)
            if not span[7]:
                tombstones = True
    count = len(spans)
    set_horizon = tombstones and not has_horizon
    if kept and header.attributes & TRANSACTIONAL_MASK:
        ctx.txn_has_data[header.producer_id] = True
    if len(kept) == count and not set_horizon:
        horizon = header.base_timestamp if tombstones else -1
        return FilterOutcome(bytes(view[:size]), count, count, False, horizon)
    if not kept:
        producer_last = ctx.active_producers.get(header.producer_id, -2)
        if last_in_group or (header.producer_id >= 0 and producer_last == header.last_offset):
            return FilterOutcome(empty_batch(header), count, 0, True, -1)
        return FilterOutcome(None, count, 0, True, -1)
    old_base_ts = header.base_timestamp
    new_base_ts = ctx.now_ms + ctx.delete_retention_ms if set_horizon else old_base_ts
    body = bytearray()
    if new_base_ts == old_base_ts:
        for span in kept:
            body += data[span[0] : span[2]]
    else:
        for span in kept:
            inner = bytearray((span[3],))
            write_varint(old_base_ts + span[4] - new_base_ts, inner)
            inner += data[span[1] : span[2]]
            write_varint(len(inner), body)
            body += inner
    if attributes & TIMESTAMP_TYPE_MASK:
        max_ts = header.max_timestamp
    else:
        max_ts = max(old_base_ts + span[4] for span in kept)
    codec = attributes & COMPRESSION_MASK
    payload = compress(codec, bytes(body)) if codec else bytes(body)
    if set_horizon:
        attributes |= DELETE_HORIZON_MASK
    out = _pack(header, attributes, new_base_ts, max_ts, len(kept), payload)
    horizon = new_base_ts if tombstones else -1
    if header.attributes & TRANSACTIONAL_MASK:
        ctx.txn_has_data[header.producer_id] = True
    return FilterOutcome(out, count, len(kept), True, horizon)


def _filter_marker(
    view: memoryview, header: RecordBatchHeader, ctx: FilterContext, last_in_group: bool
) -> FilterOutcome:
    """A transaction marker (Kafka's Cleaner, KIP-534): kept while its transaction keeps data;
    else it gets a delete horizon (now + ``delete.retention.ms``) and goes once that passed,
    so consumers that read the transaction's data meanwhile still see its end."""
    count = header.records_count
    has_data = ctx.txn_has_data.pop(header.producer_id, False)
    has_horizon = bool(header.attributes & DELETE_HORIZON_MASK)
    if has_data or last_in_group or (has_horizon and ctx.now_ms < header.base_timestamp):
        horizon = header.base_timestamp if has_horizon else -1
        return FilterOutcome(bytes(view), count, count, False, horizon)
    if has_horizon:
        return FilterOutcome(None, count, 0, True, -1)
    data = records_section(view, header)
    new_base_ts = ctx.now_ms + ctx.delete_retention_ms
    body = bytearray()
    for span in scan_records(data, count):
        inner = bytearray((span[3],))
        write_varint(header.base_timestamp + span[4] - new_base_ts, inner)
        inner += data[span[1] : span[2]]
        write_varint(len(inner), body)
        body += inner
    attributes = (header.attributes | DELETE_HORIZON_MASK) & ~COMPRESSION_MASK
    out = _pack(header, attributes, new_base_ts, header.max_timestamp, count, bytes(body))
    return FilterOutcome(out, count, count, True, new_base_ts)
