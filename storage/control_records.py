"""End-transaction markers: the control batches a transaction coordinator writes.

A marker is one v2 batch (layout in ``storage.batch``) with attributes ``transactional |
control`` (0x30, uncompressed, CreateTime), the producer id and epoch of the transaction,
base sequence -1 and exactly one record whose (Kafka's ControlRecordType / EndTransactionMarker)::

    key   = version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT)
    value = version int16 (0) | coordinator_epoch int32

The record bytes are written by ``storage.record_codec.encode_control_batch`` (the home of the
record encoding); this module names the marker and reads it back from a batch as stored.

Threading: pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import CorruptRecordError
from .record_codec import decode_batch, encode_control_batch
from .record_types import RecordDecodeError

__all__ = ["ABORT", "COMMIT", "EndTxnMarker", "encode_end_txn_marker", "read_end_txn_marker"]

ABORT = 0
COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """What a marker says: COMMIT or ABORT, and the coordinator epoch that wrote it."""

    control_type: int
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type == COMMIT

    @property
    def name(self) -> str:
        return {ABORT: "ABORT", COMMIT: "COMMIT"}.get(self.control_type, "UNKNOWN")


def encode_end_txn_marker(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
) -> bytes:
    """The bytes of a marker batch (base offset 0: the log assigns it)."""
    return encode_control_batch(
        COMMIT if commit else ABORT,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp=timestamp_ms,
    )


def read_end_txn_marker(batch: bytes) -> EndTxnMarker:
    """The marker held by a control batch's bytes; ``CorruptRecordError`` if it holds none."""
    try:
        decoded = decode_batch(batch, verify_crc=False)
    except RecordDecodeError as exc:
        raise CorruptRecordError(f"unreadable control batch: {exc}") from None
    if not decoded.is_control or not decoded.records:
        raise CorruptRecordError("batch is not a control batch with a record")
    record = decoded.records[0]
    value = record.value
    if value is None or len(value) < 6:
        raise CorruptRecordError(f"control record at offset {record.offset} has no marker value")
    coordinator_epoch = int.from_bytes(value[2:6], "big", signed=True)
    return EndTxnMarker(record.control_type, coordinator_epoch)
