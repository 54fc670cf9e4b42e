"""Value types of Kafka record data (see `storage.record_codec`, which re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .batch import BATCH_HEADER_SIZE, COMPRESSION_CODES, COMPRESSION_NAMES, LOG_OVERHEAD
from .batch import RecordBatchHeader as RecordBatchHeader


class RecordDecodeError(ValueError):
    """Record data that is not what Kafka's format allows (truncated, corrupt, unknown codec)."""


__all__ = [
    "COMPRESSION_CODES",
    "COMPRESSION_NAMES",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAX_UNCOMPRESSED",
    "DecodedBatch",
    "LegacyBatch",
    "NewRecord",
    "Record",
    "RecordBatchHeader",
    "RecordColumns",
    "RecordDecodeError",
]

HEADER_SIZE = BATCH_HEADER_SIZE  # v2 batch header (LOG_OVERHEAD: offset i64 + length i32)
MAX_UNCOMPRESSED = 256 * 1024 * 1024  # default cap on one batch's decompressed size


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a consumer sees it. `control_type` is 0 (abort) / 1 (commit) on control
    records, -1 on data records; `sequence` is -1 when the batch carries no producer sequence."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_type: int = 0
    sequence: int = -1
    is_control: bool = False
    control_type: int = -1
    magic: int = 2

    @property
    def size(self) -> int:
        """Bytes of key + value (what Spark and most tools report as a record's size)."""
        return len(self.key or b"") + len(self.value or b"")


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to encode; its offset is the batch's base offset plus its index."""

    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None  # None: now, in ms


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """A v2 batch: its header (the one header type, ``storage.batch.RecordBatchHeader``) and its
    records. The header's fields and properties are forwarded, so ``DecodedBatch.producer_id`` reads
    as before the header had one home."""

    header: RecordBatchHeader
    records: tuple[Record, ...] = ()

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def batch_length(self) -> int:
        return self.header.batch_length

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def magic(self) -> int:
        return self.header.magic

    @property
    def crc(self) -> int:
        return self.header.crc

    @property
    def attributes(self) -> int:
        return self.header.attributes

    @property
    def last_offset_delta(self) -> int:
        return self.header.last_offset_delta

    @property
    def base_timestamp(self) -> int:
        return self.header.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def records_count(self) -> int:
        return self.header.records_count

    @property
    def size_in_bytes(self) -> int:
        return self.header.size_in_bytes

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def compression(self) -> int:
        return self.header.compression

    @property
    def compression_name(self) -> str:
        return self.header.compression_name

    @property
    def timestamp_type(self) -> int:
        return self.header.timestamp_type

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def has_delete_horizon(self) -> bool:
        return self.header.has_delete_horizon

    @property
    def delete_horizon_ms(self) -> int:
        return self.header.delete_horizon_ms

    @property
    def last_sequence(self) -> int:
        return self.header.last_sequence

    @property
    def size(self) -> int:
        """Bytes of the batch, log overhead included (``header.size_in_bytes``)."""
        return self.header.size_in_bytes


@dataclass(frozen=True, slots=True)
class LegacyBatch:
    """One outer message of a v0/v1 message set (a wrapper when compressed) and its records."""

    offset: int  # the outer offset: for a wrapper, the offset of its last inner record
    size: int  # bytes including the 12-byte log overhead
    magic: int
    crc: int
    attributes: int
    timestamp: int
    records: tuple[Record, ...]

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        return (self.attributes >> 3) & 1 if self.magic > 0 else -1

    @property
    def base_offset(self) -> int:
        return self.records[0].offset if self.records else self.offset

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """Column lists that `decode_batch_into` appends to (fast path for bulk readers)."""

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    timestamp_types: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[tuple[tuple[str, bytes | None], ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)
