"""File I/O helpers: the recovery scan, whole writes, whole reads, directory fsync.

``scan_batches`` is the recovery scan's inner loop (see ``storage.segment`` for the format):
over a read-only mmap of a ``.log`` file it checks each batch's magic, length, CRC-32C and offset
order, stopping at the first invalid byte, and collects the index entries Kafka's rule gives.
It allocates nothing per batch but a memoryview slice, so scanning runs near memory speed for
large batches and at roughly a microsecond per batch for small ones.

Threading: pure functions over a file descriptor or buffer the caller owns.
"""

from __future__ import annotations

import errno
import mmap
import os
from array import array
from collections.abc import Callable

from tidelog.storage.checksum import crc32c

from .batch import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    SCAN_STRUCT,
)
from .errors import CorruptRecordError

__all__ = ["fsync_dir", "pread_all", "scan_batches", "write_all"]

_IOV_MAX = 1024
#: How often (bytes scanned) ``scan_batches`` reports its position to a ``progress`` callback.
PROGRESS_BYTES = 64 * 1024 * 1024


def scan_batches(
    buf: mmap.mmap,
    view: memoryview,
    size: int,
    base: int,
    prev_last_offset: int,
    index_interval_bytes: int,
    entries: tuple[array[int], array[int], array[int], array[int]],
    progress: Callable[[int], None] | None = None,
) -> tuple[int, str, int, int, int]:
    """Validate batches from position 0; returns (valid bytes, reason, next offset, max
    timestamp, its offset) and fills the rebuilt index columns in ``entries``. ``progress``
    (long recoveries log it) is called with the position every ``PROGRESS_BYTES``."""
    offsets, positions, timestamps, time_offsets = entries
    report_at = PROGRESS_BYTES if progress is not None else size + 1
    unpack = SCAN_STRUCT.unpack_from
    max_relative = base + INT32_MAX
    position = 0
    last_entry_position = 0
    max_ts = -1
    offset_of_max = base
    last_time_entry = -1
    reason = ""
    while position < size:
        if size - position < BATCH_HEADER_SIZE:
            reason = f"truncated batch header ({size - position} bytes left)"
            break
        base_offset, batch_length, magic, crc, last_delta, batch_max_ts = unpack(buf, position)
        end = position + batch_length + LOG_OVERHEAD
        if magic != MAGIC_V2 or batch_length < MIN_BATCH_LENGTH or end > size:
            if magic != MAGIC_V2:
                reason = f"invalid magic {magic}"
            elif batch_length < MIN_BATCH_LENGTH:
                reason = f"invalid batch length {batch_length}"
            else:
                reason = (
                    f"truncated batch ({end - position} bytes declared, {size - position} left)"
                )
            break
        if crc32c(view[position + ATTRIBUTES_OFFSET : end]) != crc:
            reason = f"CRC mismatch in batch at offset {base_offset}"
            break
        last_offset = base_offset + last_delta
        if base_offset <= prev_last_offset or last_delta < 0 or last_offset > max_relative:
            reason = f"offset {base_offset} out of order or out of the segment's range"
            break
        if batch_max_ts > max_ts:
            max_ts = batch_max_ts
            offset_of_max = last_offset
        if position - last_entry_position > index_interval_bytes:
            offsets.append(last_offset - base)
            positions.append(position)
            if max_ts > last_time_entry:
                timestamps.append(max_ts)
                time_offsets.append(offset_of_max - base)
                last_time_entry = max_ts
            last_entry_position = position
        prev_last_offset = last_offset
        position = end
        if position >= report_at:
            report_at = position + PROGRESS_BYTES
            if progress is not None:
                progress(position)
    next_offset = prev_last_offset + 1 if position > 0 else base
    return position, reason, next_offset, max_ts, offset_of_max


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """fsync a directory, making the creations, renames and deletions in it durable (the one
    home of this step: checkpoints, snapshots, segment rolls and swaps all call it)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_SMALL_READ = 65536


def read_small_file(path: str | os.PathLike[str]) -> bytes:
    """The whole of a small file (a snapshot, ``partition.metadata``, an index) with one
    ``open`` and a ``read`` or two: the start-up of thousands of partitions reads several
    each, and ``Path.read_bytes`` (a buffered file object) costs a few times more.
    Raises ``FileNotFoundError`` and the other ``OSError``s of ``open``/``read``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, _SMALL_READ)
            chunks.append(chunk)
            if len(chunk) < _SMALL_READ:  # a short read of a regular file: its end
                return b"".join(chunks)
    finally:
        os.close(fd)


def pread_all(fd: int, position: int, length: int) -> bytes:
    data = os.pread(fd, length, position)
    if len(data) == length:
        return data
    parts = [data]
    done = len(data)
    while done < length:
        chunk = os.pread(fd, length - done, position + done)
        if not chunk:
            raise CorruptRecordError(f"short read: wanted {length} bytes at {position}")
        parts.append(chunk)
        done += len(chunk)
    return b"".join(parts)


def write_all(
    fd: int, iov: list[bytes | bytearray | memoryview], position: int, total: int
) -> None:
    """``pwritev`` everything (chunks of IOV_MAX buffers; short writes finished by pwrite)."""
    if len(iov) <= _IOV_MAX and os.pwritev(fd, iov, position) == total:
        return  # the common case: one call wrote it all
    written = 0
    for start in range(0, len(iov), _IOV_MAX):
        chunk = iov if len(iov) <= _IOV_MAX else iov[start : start + _IOV_MAX]
        chunk_size = total if chunk is iov else sum(len(b) for b in chunk)
        done = os.pwritev(fd, chunk, position + written)
        if done < chunk_size:
            rest = b"".join(bytes(b) for b in chunk)[done:]
            while rest:
                n = os.pwrite(fd, rest, position + written + done)
                if n <= 0:
                    raise OSError(errno.EIO, "short write")
                rest = rest[n:]
                done += n
        written += chunk_size
    if written != total:
        raise OSError(errno.EIO, f"wrote {written} of {total} bytes")
