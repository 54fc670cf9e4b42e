"""Readers for the files of a Kafka partition directory, for ``tidelog dump-log`` (offline).

Formats (Kafka's, big-endian):

* ``.log`` - batches back to back. Each starts with offset i64, size i32 (bytes after these 12)
  and has its magic byte at position 16: magic 2 is a v2 batch (its 61-byte header is parsed by
  ``storage.batch``, the one home of that format), magic 0/1 a legacy message (read by
  ``storage.record_codec``).
* ``.index`` - 8-byte entries: offset relative to the segment's base offset i32, position i32.
* ``.timeindex`` - 12-byte entries: timestamp i64, relative offset i32.
* ``.snapshot`` - producer state, read by ``storage.producer_snapshot`` (its spec).
* ``.txnindex`` - 34-byte aborted transactions, read by ``storage.transaction_index`` (its spec).

The segment's base offset is the number the file name starts with (``00000000000000000042.log``).
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c as _crc32c

from tidelog.storage.batch import (
    BATCH_HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    RecordBatchHeader,
    increment_sequence,
    unpack_batch_header,
)
from tidelog.storage.index import decode_offset_index, decode_time_index
from tidelog.storage.producer_snapshot import CorruptSnapshotError, SnapshotEntry, decode_snapshot
from tidelog.storage.record_codec import legacy_inner_crc_checks, legacy_message_header
from tidelog.storage.transaction_index import ABORTED_TXN_SIZE, unpack_entry

__all__ = [
    "AbortedTxn",
    "LogBatch",
    "ProducerSnapshotEntry",
    "SegmentFileError",
    "base_offset_of",
    "increment_sequence",  # re-exported from storage.batch
    "iter_log_batches",
    "legacy_inner_checks",
    "read_offset_index",
    "read_producer_snapshot",
    "read_time_index",
    "read_txn_index",
]

HEADER_UP_TO_MAGIC = 17
V2_HEADER_SIZE = BATCH_HEADER_SIZE
LEGACY_OVERHEAD_V0 = 14  # smallest legal size field (Kafka's LegacyRecord.RECORD_OVERHEAD_V0)

_I32 = struct.Struct(">i")


class SegmentFileError(Exception):
    """A file that cannot be read as what its suffix says (the message names the problem)."""


@dataclass(frozen=True, slots=True)
class LogBatch:
    """One batch of a ``.log`` file: where it is, its bytes, whether its CRC holds, and its
    header - for a v2 batch ``storage.batch.RecordBatchHeader``, for a legacy (v0/v1) message
    its own offset, crc, attributes and timestamp."""

    position: int
    data: bytes  # the whole batch, log overhead included
    is_valid: bool
    magic: int
    crc: int
    attributes: int
    header: RecordBatchHeader | None  # v2 only
    legacy_offset: int = -1
    legacy_timestamp: int = -1

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def base_offset(self) -> int:
        return self.legacy_offset if self.header is None else self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.legacy_offset if self.header is None else self.header.last_offset

    @property
    def count(self) -> int | None:
        return None if self.header is None else self.header.records_count

    @property
    def base_sequence(self) -> int:
        return -1 if self.header is None else self.header.base_sequence

    @property
    def last_sequence(self) -> int:
        return -1 if self.header is None else self.header.last_sequence

    @property
    def producer_id(self) -> int:
        return -1 if self.header is None else self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return -1 if self.header is None else self.header.producer_epoch

    @property
    def partition_leader_epoch(self) -> int:
        return -1 if self.header is None else self.header.partition_leader_epoch

    @property
    def max_timestamp(self) -> int:
        return self.legacy_timestamp if self.header is None else self.header.max_timestamp

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        """-1 (no timestamps, magic 0), 0 CreateTime, 1 LogAppendTime."""
        return -1 if self.magic == 0 else (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return self.header is not None and self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header is not None and self.header.is_control

    @property
    def delete_horizon_ms(self) -> int | None:
        if self.header is not None and self.header.has_delete_horizon:
            return self.header.delete_horizon_ms
        return None


#: A producer as a ``.snapshot`` stores it (storage's type: one codec for the format).
ProducerSnapshotEntry = SnapshotEntry


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An entry of a ``.txnindex`` file with its version (``storage.transaction_index`` decodes
    it; dump-log shows the version too)."""

    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def base_offset_of(path: str | Path) -> int:
    """The base offset a segment file's name starts with."""
    stem = Path(path).name.split(".")[0]
    if not stem.isdigit():
        raise SegmentFileError(
            f"{path}: the file name must start with the segment's base offset "
            "(e.g. 00000000000000000000.log)"
        )
    return int(stem)


def _read(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise SegmentFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise SegmentFileError(f"{path}: cannot read it ({exc.strerror})") from None


# ---------------------------------------------------------------- .log


def _v2_batch(position: int, data: bytes) -> LogBatch:
    header = unpack_batch_header(data)
    valid = len(data) >= V2_HEADER_SIZE and (_crc32c.crc32c(data[21:]) & 0xFFFFFFFF) == header.crc
    return LogBatch(position, data, valid, header.magic, header.crc, header.attributes, header)


def _legacy_batch(position: int, data: bytes) -> LogBatch:
    offset, _size, crc, magic, attributes, timestamp = legacy_message_header(data)
    valid = len(data) >= LOG_OVERHEAD + LEGACY_OVERHEAD_V0 and zlib.crc32(data[16:]) == crc
    return LogBatch(position, data, valid, magic, crc, attributes, None, offset, timestamp)


def iter_log_batches(
    path: str | Path, start: int = 0, max_bytes: int = INT32_MAX
) -> Iterator[LogBatch]:
    """Batches of a ``.log`` file from byte ``start``, within ``max_bytes`` of it; stops at a
    partial trailing batch (as Kafka's reader does). Raises SegmentFileError on a size field
    too small to be a batch."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed in finally (a generator)
    except FileNotFoundError:
        raise SegmentFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise SegmentFileError(f"{path}: cannot read it ({exc.strerror})") from None
    try:
        fd = f.fileno()
        end = min(os.fstat(fd).st_size, start + max_bytes)
        pos = start
        while pos + HEADER_UP_TO_MAGIC < end:
            head = os.pread(fd, HEADER_UP_TO_MAGIC, pos)
            (size,) = _I32.unpack_from(head, 8)
            if size < LEGACY_OVERHEAD_V0:
                raise SegmentFileError(
                    f"Found record size {size} smaller than minimum record overhead "
                    f"({LEGACY_OVERHEAD_V0}) in file {path} at position {pos}."
                )
            if pos + LOG_OVERHEAD + size > end:
                return
            data = os.pread(fd, LOG_OVERHEAD + size, pos)
            if len(data) < LOG_OVERHEAD + size:
                return  # the file shrank under us
            magic = head[16]
            if magic == 2:
                if size < V2_HEADER_SIZE - LOG_OVERHEAD:
                    raise SegmentFileError(
                        f"{path}: v2 batch at position {pos} has size {size}, smaller than "
                        f"its {V2_HEADER_SIZE}-byte header"
                    )
                yield _v2_batch(pos, data)
            elif magic in (0, 1):
                yield _legacy_batch(pos, data)
            else:
                raise SegmentFileError(
                    f"{path}: batch at position {pos} has magic {magic}; only 0, 1 and 2 exist"
                )
            pos += LOG_OVERHEAD + size
    finally:
        f.close()


def legacy_inner_checks(batch: LogBatch) -> list[tuple[int, bool]]:
    """(crc, valid) of each message a legacy batch holds: the batch itself when uncompressed,
    the messages inside a compressed wrapper otherwise."""
    if batch.compression == 0:
        return [(batch.crc, batch.is_valid)]
    return legacy_inner_crc_checks(batch.data, batch.magic, batch.compression)


# ---------------------------------------------------------------- indexes


def read_offset_index(path: str | Path) -> list[tuple[int, int]]:
    """(absolute offset, position) entries of an ``.index`` file, without the zero-filled
    preallocated tail (the layout: ``storage.index.decode_offset_index``)."""
    return decode_offset_index(_read(path), base_offset_of(path))


def read_time_index(path: str | Path) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) entries of a ``.timeindex`` file."""
    return decode_time_index(_read(path), base_offset_of(path))


def offset_index_sanity(path: str | Path) -> None:
    """Kafka's OffsetIndex.sanityCheck (what decides an index rebuild at start-up).

    Kafka divergence: Kafka's tool checks the zero-filled slots an active segment's preallocated
    index ends with too, so an active segment's time index always "fails" its sanity check there;
    here only written entries are checked (``read_offset_index`` and ``read_time_index`` leave
    those slots out).
    """
    base = base_offset_of(path)
    entries = read_offset_index(path)
    absolute = os.path.abspath(path)
    if entries and entries[-1][0] < base:
        raise SegmentFileError(
            f"Corrupt index found, index file {absolute} has non-zero size but the last offset "
            f"is {entries[-1][0]} which is less than the base offset {base}"
        )
    length = os.path.getsize(path)
    if length % 8:
        raise SegmentFileError(
            f"Index file {absolute} is corrupt, found {length} bytes which is neither positive "
            "nor a multiple of 8"
        )


def time_index_sanity(path: str | Path) -> None:
    """Kafka's TimeIndex.sanityCheck."""
    base = base_offset_of(path)
    entries = read_time_index(path)
    absolute = os.path.abspath(path)
    if entries and entries[-1][0] < entries[0][0]:
        raise SegmentFileError(
            f"Corrupt time index found, time index file ({absolute}) has non-zero size but the "
            f"last timestamp is {entries[-1][0]} which is less than the first timestamp "
            f"{entries[0][0]}"
        )
    if entries and entries[-1][1] < base:
        raise SegmentFileError(
            f"Corrupt time index found, time index file ({absolute}) has non-zero size but the "
            f"last offset is {entries[-1][1]} which is less than the first offset {base}"
        )
    length = os.path.getsize(path)
    if length % 12:
        raise SegmentFileError(
            f"Time index file {absolute} is corrupt, found {length} bytes which is neither "
            "positive nor a multiple of 12."
        )


def index_lookup(entries: list[tuple[int, int]], target: int) -> int:
    """Position of the largest index entry with offset <= target (0 when there is none)."""
    lo, hi, found = 0, len(entries) - 1, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if entries[mid][0] <= target:
            found = entries[mid][1]
            lo = mid + 1
        else:
            hi = mid - 1
    return found


# ---------------------------------------------------------------- producer state, txn index


def read_producer_snapshot(path: str | Path) -> list[SnapshotEntry]:
    """Entries of a producer-state ``.snapshot`` file (``storage.producer_snapshot`` decodes
    it); SegmentFileError if it is corrupt (with Kafka's wording)."""
    try:
        return decode_snapshot(_read(path), name=str(path))
    except CorruptSnapshotError as exc:
        raise SegmentFileError(str(exc)) from None


def read_txn_index(path: str | Path) -> list[AbortedTxn]:
    data = _read(path)
    if len(data) % ABORTED_TXN_SIZE:
        raise SegmentFileError(
            f"{path}: {len(data)} bytes is not a multiple of the {ABORTED_TXN_SIZE}-byte entry"
        )
    out: list[AbortedTxn] = []
    for position in range(0, len(data), ABORTED_TXN_SIZE):
        version, t = unpack_entry(data, position)
        out.append(
            AbortedTxn(version, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
        )
    return out
