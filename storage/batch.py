"""Record batches, message format v2 (magic 2): the header, its checks, offset assignment.

Byte layout of one batch (big-endian; Kafka's DefaultRecordBatch)::

    offset  size  field
         0     8  base_offset            assigned by the broker; NOT covered by the CRC
         8     4  batch_length           bytes after this field: size_in_bytes = batch_length + 12
        12     4  partition_leader_epoch set by the broker; NOT covered by the CRC
        16     1  magic                  always 2 here
        17     4  crc                    CRC-32C (Castagnoli) of bytes [21, size_in_bytes)
        21     2  attributes             bits 0-2 compression, 3 timestamp type (1=LogAppendTime),
                                         4 transactional, 5 control, 6 delete horizon
        23     4  last_offset_delta
        27     8  base_timestamp
        35     8  max_timestamp
        43     8  producer_id
        51     2  producer_epoch
        53     4  base_sequence
        57     4  records_count
        61     .  records (varint-encoded; possibly compressed) - never decoded on the append path

A log segment (``.log`` file) is nothing but such batches back to back. Invariants checked
everywhere a batch is read: the 61-byte header is present, ``magic == 2``, ``batch_length >= 49``
(header without the 12-byte log overhead) and the whole batch lies inside the bytes present.
The CRC is checked on append and during recovery.

On append the broker rewrites bytes [0, 16) (base offset, length unchanged, leader epoch) which
the CRC does not cover; with ``LogAppendTime`` it also sets attribute bit 3 and ``max_timestamp``
and recomputes the CRC (``base_timestamp`` stays, as in Kafka). The new header is written next to
a memoryview of the untouched body (``pwritev``), so a 1 MiB batch is never copied in Python.

Threading: pure functions over buffers; nothing here holds state.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from tidelog.storage.checksum import crc32c

from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    RecordListTooLargeError,
    UnsupportedMessageFormatError,
)

__all__ = [
    "ATTRIBUTES_LOW_OFFSET",
    "BATCH_HEADER_SIZE",
    "COMPRESSION_CODES",
    "COMPRESSION_NAMES",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "PRODUCER_ID_OFFSET",
    "PRODUCER_STRUCT",
    "PreparedAppend",
    "RecordBatchHeader",
    "TRANSACTIONAL_MASK",
    "decrement_sequence",
    "increment_sequence",
    "iter_batches",
    "parse_batch_header",
    "prepare_append",
    "unpack_batch_header",
    "validate_records",
    "verify_crc",
]

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC_V2 = 2
MAGIC_OFFSET = 16
ATTRIBUTES_OFFSET = 21
# The low byte of the big-endian attributes (where the compression, timestamp-type,
# transactional, control and delete-horizon bits are).
ATTRIBUTES_LOW_OFFSET = ATTRIBUTES_OFFSET + 1
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

COMPRESSION_CODES: dict[str, int] = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COMPRESSION_NAMES: dict[int, str] = {v: k for k, v in COMPRESSION_CODES.items()}

NO_TIMESTAMP = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
PREFIX_STRUCT = struct.Struct(">qii")  # base_offset, batch_length, partition_leader_epoch
# What the recovery scan needs: base_offset, batch_length, magic, crc, last_offset_delta,
# max_timestamp (the rest of bytes [0, 43) skipped as padding).
SCAN_STRUCT = struct.Struct(">qi4xbI2xi8xq")
_LEN_MAGIC = struct.Struct(">qiib")
_ATTR_TS = struct.Struct(">hiqq")  # attributes, last_offset_delta, base_timestamp, max_timestamp
PRODUCER_STRUCT = struct.Struct(">qh")  # producer_id, producer_epoch (at PRODUCER_ID_OFFSET)

assert HEADER_STRUCT.size == BATCH_HEADER_SIZE

Buffer = bytes | bytearray | memoryview


class RecordBatchHeader(NamedTuple):
    """The 13 fields of a v2 batch header.

    A ``NamedTuple`` rather than the house-style frozen slotted dataclass: one is built per
    batch on the append, read and recovery paths, and tuple construction is ~15x cheaper than a
    frozen dataclass ``__init__``. It is just as immutable and has the same attribute names.
    """

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
    def compression(self) -> int:
        """0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression_name(self) -> str:
        return COMPRESSION_NAMES.get(self.compression, f"unknown({self.compression})")

    @property
    def has_delete_horizon(self) -> bool:
        """Attribute bit 6: ``base_timestamp`` holds the cleaner's delete horizon."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """The delete horizon the cleaner set (-1: none)."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else NO_TIMESTAMP

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (-1 without one); sequences wrap after 2^31 - 1."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    def pack(self) -> bytes:
        """The 61 header bytes (with this header's crc field as is)."""
        return HEADER_STRUCT.pack(*self)


_new_tuple = tuple.__new__


def _header(fields: tuple[int, ...]) -> RecordBatchHeader:
    return _new_tuple(RecordBatchHeader, fields)  # type: ignore[no-any-return]


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap to 0 after 2^31 - 1."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """The inverse of ``increment_sequence``."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def unpack_batch_header(buf: Buffer, position: int = 0) -> RecordBatchHeader:
    """The 13 header fields at ``position``, unchecked (the caller made sure 61 bytes exist).

    For readers with their own checks and error type (the record codec, dump-log);
    ``parse_batch_header`` is the checking parser.
    """
    return _header(HEADER_STRUCT.unpack_from(buf, position))


def parse_batch_header(
    buf: Buffer, position: int = 0, *, available: int | None = None
) -> RecordBatchHeader:
    """Parse and sanity-check the header of the batch at ``position``.

    ``available`` is how many bytes of the batch are known to exist from ``position`` (defaults
    to the rest of ``buf``); the whole batch must fit in it. The CRC is not checked here (see
    ``verify_crc``). Raises ``CorruptRecordError`` (``UnsupportedMessageFormatError`` for
    magic 0/1).
    """
    remaining = len(buf) - position
    if available is None:
        available = remaining
    if position < 0 or remaining < MAGIC_OFFSET + 1 or available < MAGIC_OFFSET + 1:
        raise CorruptRecordError(
            f"truncated batch at position {position}: {max(min(remaining, available), 0)} bytes"
        )
    _, batch_length, _, magic = _LEN_MAGIC.unpack_from(buf, position)
    if magic != MAGIC_V2:
        # Kafka divergence: v0/v1 message sets are rejected, not up-converted (magic sits at
        # byte 16 in every format, so the check is safe before the v2 length checks).
        if magic in (0, 1):
            raise UnsupportedMessageFormatError(
                f"message format v{magic} (magic {magic}) at position {position}: tidelog "
                "stores and accepts only record batches of magic 2 (Kafka >= 0.11 clients)"
            )
        raise CorruptRecordError(f"invalid magic {magic} at position {position}")
    if remaining < BATCH_HEADER_SIZE or available < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"truncated batch header at position {position}")
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch length {batch_length} at position {position} is below the minimum "
            f"{MIN_BATCH_LENGTH}"
        )
    if batch_length + LOG_OVERHEAD > available:
        raise CorruptRecordError(
            f"truncated batch at position {position}: needs {batch_length + LOG_OVERHEAD} "
            f"bytes, {available} present"
        )
    header = _header(HEADER_STRUCT.unpack_from(buf, position))
    if header.last_offset_delta < 0:
        raise CorruptRecordError(
            f"negative last offset delta {header.last_offset_delta} at position {position}"
        )
    return header


def verify_crc(buf: Buffer, position: int, header: RecordBatchHeader) -> None:
    """Check the CRC-32C of the batch at ``position`` (bytes from attributes to the end)."""
    view = memoryview(buf)
    end = position + header.size_in_bytes
    actual = crc32c(view[position + ATTRIBUTES_OFFSET : end])
    if actual != header.crc:
        raise CorruptRecordError(
            f"CRC mismatch in batch at position {position} (base offset {header.base_offset}): "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )


def iter_batches(buf: Buffer) -> Iterator[tuple[int, RecordBatchHeader]]:
    """Yield ``(position, header)`` for each batch of a buffer of concatenated batches.

    Lengths and magic are validated (a trailing partial batch raises ``CorruptRecordError``);
    CRCs are not.
    """
    position = 0
    end = len(buf)
    while position < end:
        header = parse_batch_header(buf, position)
        yield position, header
        position += header.size_in_bytes


def validate_records(
    records: Buffer,
    *,
    max_message_bytes: int,
    segment_bytes: int,
    allow_control: bool = False,
) -> list[tuple[int, RecordBatchHeader]]:
    """Validate a produce request's records field; return ``(position, header)`` per batch.

    Checks, as Kafka's LogValidator does for a client append: the whole field fits a segment
    (RECORD_LIST_TOO_LARGE), each batch's framing, magic and CRC (CORRUPT_MESSAGE), its size
    against ``max.message.bytes`` (MESSAGE_TOO_LARGE), ``records_count > 0`` and
    ``records_count == last_offset_delta + 1`` and no control batch from clients
    (INVALID_RECORD). Records themselves are not decoded.

    Kafka divergence: Kafka silently drops a partial trailing batch; here it is CORRUPT_MESSAGE.
    Kafka divergence: per-record timestamps are not checked. Keys on compacted topics are
    checked by ``PartitionLog.append`` (``storage.record_scan.require_record_keys``).
    """
    size = len(records)
    if size == 0:
        raise InvalidRecordError("produce request has no record batch")
    if size > segment_bytes:
        raise RecordListTooLargeError(
            f"records of {size} bytes exceed the segment size of {segment_bytes} bytes"
        )
    view = memoryview(records)
    batches: list[tuple[int, RecordBatchHeader]] = []
    unpack = HEADER_STRUCT.unpack_from
    position = 0
    while position < size:
        # Kafka divergence: a partial trailing batch is CORRUPT_MESSAGE (Kafka drops it), and
        # records are never decoded here (no per-record key/timestamp checks).
        remaining = size - position
        if remaining >= BATCH_HEADER_SIZE:
            fields = unpack(view, position)
            batch_length = fields[1]
            if (
                fields[3] != MAGIC_V2
                or batch_length < MIN_BATCH_LENGTH
                or batch_length + LOG_OVERHEAD > remaining
                or fields[6] < 0
            ):
                parse_batch_header(view, position)  # raises the precise error
            header = _header(fields)
        else:
            header = parse_batch_header(view, position)  # raises: truncated
        batch_size = header.batch_length + LOG_OVERHEAD
        if batch_size > max_message_bytes:
            raise MessageTooLargeError(
                f"batch of {batch_size} bytes exceeds max.message.bytes={max_message_bytes}"
            )
        if crc32c(view[position + ATTRIBUTES_OFFSET : position + batch_size]) != header.crc:
            verify_crc(view, position, header)  # raises with the details
        count = header.records_count
        if count <= 0 or count != header.last_offset_delta + 1:
            if count <= 0:
                raise InvalidRecordError(f"batch declares {count} records")
            raise InvalidRecordError(
                f"batch declares {count} records but last offset delta {header.last_offset_delta}"
            )
        if header.attributes & CONTROL_MASK and not allow_control:
            raise InvalidRecordError("clients are not allowed to write control batches")
        batches.append((position, header))
        position += batch_size
    return batches


class PreparedAppend:
    """Batches with offsets assigned, ready for one ``pwritev`` (internal, built per append)."""

    __slots__ = (
        "first_offset",
        "headers",
        "iov",
        "last_offset",
        "max_timestamp",
        "offset_of_max_timestamp",
        "positions",
        "size_in_bytes",
    )

    def __init__(
        self,
        iov: list[Buffer],
        headers: tuple[RecordBatchHeader, ...],
        positions: tuple[int, ...],
        size_in_bytes: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
    ) -> None:
        self.iov = iov
        self.headers = headers
        self.positions = positions  # of each batch relative to the start of the write
        self.size_in_bytes = size_in_bytes
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        # shallow: last offset of the batch holding max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp


def prepare_append(
    records: Buffer,
    batches: list[tuple[int, RecordBatchHeader]],
    *,
    base_offset: int,
    log_append_time_ms: int | None,
    leader_epoch: int | None = None,
) -> PreparedAppend:
    """Assign consecutive offsets from ``base_offset`` and build the buffers to write.

    With ``log_append_time_ms`` set, each batch gets the LogAppendTime bit, ``max_timestamp``
    and a recomputed CRC. ``leader_epoch`` (if given) overwrites ``partition_leader_epoch``.
    """
    view = memoryview(records)
    iov: list[Buffer] = []
    headers: list[RecordBatchHeader] = []
    positions: list[int] = []
    next_offset = base_offset
    out_position = 0
    max_timestamp = NO_TIMESTAMP
    offset_of_max = -1
    pack_prefix = PREFIX_STRUCT.pack
    for position, header in batches:
        batch_length = header[1]
        size = batch_length + LOG_OVERHEAD
        epoch = header[2] if leader_epoch is None else leader_epoch
        last_offset = next_offset + header[6]
        if log_append_time_ms is None:
            new = _header((next_offset, batch_length, epoch, *header[3:]))
            iov.append(pack_prefix(next_offset, batch_length, epoch))
            iov.append(view[position + 16 : position + size])
        else:
            attributes = header.attributes | TIMESTAMP_TYPE_MASK
            tail = _ATTR_TS.pack(
                attributes, header.last_offset_delta, header.base_timestamp, log_append_time_ms
            )
            rest = view[position + MAX_TIMESTAMP_OFFSET + 8 : position + size]
            crc = crc32c(rest, crc32c(tail))
            new = _header(
                (
                    next_offset,
                    batch_length,
                    epoch,
                    header.magic,
                    crc,
                    attributes,
                    header.last_offset_delta,
                    header.base_timestamp,
                    log_append_time_ms,
                    *header[9:],
                )
            )
            iov.append(
                pack_prefix(next_offset, batch_length, epoch)
                + struct.pack(">bI", header.magic, crc)
                + tail
            )
            iov.append(rest)
        headers.append(new)
        positions.append(out_position)
        if new[8] > max_timestamp:
            max_timestamp = new[8]
            offset_of_max = last_offset
        out_position += size
        next_offset = last_offset + 1
    return PreparedAppend(
        iov,
        tuple(headers),
        tuple(positions),
        out_position,
        base_offset,
        next_offset - 1,
        max_timestamp,
        offset_of_max if offset_of_max >= 0 else next_offset - 1,
    )
