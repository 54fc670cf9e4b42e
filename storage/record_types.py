"""Value types of Kafka record data (see `storage.record_codec`, which re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass, field


class RecordDecodeError(ValueError):
    """Record data that is not what Kafka's format allows (truncated, corrupt, unknown codec)."""


COMPRESSION_CODES: dict[str, int] = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COMPRESSION_NAMES: dict[int, str] = {v: k for k, v in COMPRESSION_CODES.items()}
HEADER_SIZE = 61  # v2 batch header
LOG_OVERHEAD = 12  # offset i64 + length i32, common to every magic
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
class BatchHeader:
    """The 61-byte header of a v2 batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def compression_name(self) -> str:
        return COMPRESSION_NAMES.get(self.compression, f"unknown({self.compression})")

    @property
    def timestamp_type(self) -> int:
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & 0x40)

    @property
    def delete_horizon_ms(self) -> int:
        return self.base_timestamp if self.has_delete_horizon else -1


@dataclass(frozen=True, slots=True)
class DecodedBatch(BatchHeader):
    """A v2 batch: its header fields and its records."""

    records: tuple[Record, ...] = ()


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
