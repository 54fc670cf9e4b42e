"""A segment's indexes at load: the sanity check, or a rebuild from the ``.log`` file.

Kafka's LogSegment.sanityCheck and LogSegment.recover, as functions of a ``LogSegment``
(``storage.segment``); the loader (``storage.recovery``) picks which one a segment gets.

- ``load_indexes``: the index files are read and checked (size a multiple of the entry size,
  monotonic entries, first and last entries inside the segment, the tail after the last
  offset-index entry parseable); any failure raises ``IndexCorruptError``.
- ``recover``: every batch of the ``.log`` file is checked (framing, magic, CRC-32C, offsets
  strictly increasing and inside the segment) in one scan over a read-only mmap, with one
  unpack and one CRC per batch and no per-batch allocation besides a memoryview slice
  (``fileio.scan_batches``). The file is cut at the first invalid byte (``cut=False`` leaves
  it and only logs), both indexes are rebuilt in memory with the entries an append of the same
  batches would have made, and the time index gets its final entry. The rebuilt entries reach
  the index files only when the segment stops being active (``LogSegment.seal``), so a loaded
  active segment costs no index write.

Threading: runs before the partition is shared (the loader), or on a private copy (tools and
tests); no lock.
"""

from __future__ import annotations

import logging
import mmap
import os
from array import array
from collections.abc import Callable
from typing import TypeAlias

from .errors import CorruptRecordError
from .fileio import scan_batches
from .index import IndexCorruptError
from .segment import LogSegment

__all__ = ["load_indexes", "recover", "recover_indexes_only"]

logger = logging.getLogger("tidelog.storage")

#: The rebuilt index columns: relative offsets and positions, timestamps and relative offsets.
IndexColumns: TypeAlias = "tuple[array[int], array[int], array[int], array[int]]"


def load_indexes(segment: LogSegment) -> None:
    """Load both index files of ``segment`` and sanity-check them; raises
    ``IndexCorruptError``."""
    offset_index, time_index = segment.offset_index, segment.time_index
    base = segment.base_offset
    offset_index.load(segment.size)
    time_index.load()
    if offset_index.entries > 0 and offset_index.last_entry()[0] < base:
        raise IndexCorruptError(f"{offset_index.path}: last offset below base")
    if time_index.entries > 0 and time_index.last_entry()[1] < base:
        raise IndexCorruptError(f"{time_index.path}: last offset below base")
    try:
        segment.reload_tail()
    except CorruptRecordError as exc:
        raise IndexCorruptError(f"{segment.log_path}: tail does not parse: {exc}") from exc
    next_offset = segment.next_offset
    if offset_index.entries > 0 and offset_index.last_entry()[0] >= next_offset:
        raise IndexCorruptError(f"{offset_index.path}: entry beyond the log")
    if time_index.entries > 0 and time_index.last_entry()[1] >= max(next_offset, base + 1):
        raise IndexCorruptError(f"{time_index.path}: entry beyond the log")
    segment.load_rolling_base()


def recover_indexes_only(segment: LogSegment, index_interval_bytes: int) -> None:
    """Rebuild the indexes from the valid prefix of the file without cutting it."""
    recover(segment, index_interval_bytes, cut=False)


def recover(
    segment: LogSegment,
    index_interval_bytes: int,
    *,
    prev_last_offset: int | None = None,
    cut: bool = True,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Rebuild both indexes from the ``.log`` file, cutting it at the first invalid byte.

    ``prev_last_offset``: the previous segment's last offset (batches must lie above it).
    Returns the number of bytes cut. ``progress`` gets the bytes scanned so far now and then
    (``fileio.scan_batches``).
    """
    base = segment.base_offset
    columns: IndexColumns = (array("i"), array("i"), array("q"), array("i"))
    size, valid_bytes, reason, next_offset, max_ts, offset_of_max = _scan(
        segment,
        index_interval_bytes,
        base - 1 if prev_last_offset is None else prev_last_offset,
        columns,
        progress,
    )
    truncated = size - valid_bytes
    if truncated > 0 and not cut:
        logger.warning(
            "segment %s has %d invalid bytes from position %d (%s); left in place",
            segment.log_path,
            truncated,
            valid_bytes,
            reason,
        )
        truncated = 0
    elif truncated > 0:
        segment.cut_file(valid_bytes)
        size = valid_bytes
        logger.warning(
            "recovered segment %s: cut %d bytes at position %d (%s)",
            segment.log_path,
            truncated,
            valid_bytes,
            reason,
        )
    offsets, positions, timestamps, time_offsets = columns
    # The rebuilt entries stay in memory: the loader makes this segment either the active one
    # (its index files are written when it stops being active, and rebuilt like this after any
    # crash) or seals it at once (``LogSegment.seal`` writes them). The files are left as they
    # are until then (``OffsetIndex.forget_file``): cutting and rewriting both index files of
    # every active segment would be most of a recovery after a SIGKILL of a broker with
    # thousands of partitions.
    segment.offset_index.replace_entries(offsets, positions, write=False)
    segment.time_index.replace_entries(timestamps, time_offsets, write=False)
    segment.recovered(
        size=size,
        valid_bytes=valid_bytes,
        next_offset=next_offset,
        max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max,
        last_index_position=positions[-1] if len(positions) else 0,
    )
    return truncated


def _scan(
    segment: LogSegment,
    index_interval_bytes: int,
    prev_last_offset: int,
    columns: IndexColumns,
    progress: Callable[[int], None] | None,
) -> tuple[int, int, str, int, int, int]:
    """``(file size, valid bytes, reason, next offset, max timestamp, its offset)`` of the
    scan; fills ``columns``."""
    base = segment.base_offset
    with segment.log_file.pinned() as fd:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0, 0, "", base, -1, base
        mapped = mmap.mmap(fd, size, prot=mmap.PROT_READ)  # the map outlives the descriptor
    try:
        mapped.madvise(mmap.MADV_SEQUENTIAL)
        view = memoryview(mapped)
        try:
            result = scan_batches(
                mapped,
                view,
                size,
                base,
                prev_last_offset,
                index_interval_bytes,
                columns,
                progress,
            )
        finally:
            view.release()
    finally:
        mapped.close()
    return (size, *result)
