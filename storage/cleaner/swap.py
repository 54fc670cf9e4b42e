"""Swapping a cleaned segment into a live partition log (Kafka's LocalLog.replaceSegments).

Precondition: the writer's files are ``N.log.swap`` / ``N.index.swap`` / ``N.timeindex.swap``,
fsynced (see ``segment_writer``). Under the partition lock, and only if the log still holds
exactly the segments that were cleaned (same objects, same sizes, none of them active, log not
closed; otherwise retention, truncation or deletion changed the log meanwhile and the swap is
abandoned - its files are removed):

1. each replaced segment's three files are renamed ``.deleted`` (``PartitionLog``'s own
   scheduled deletion: open file descriptors stay valid and the files are removed after
   ``file.delete.delay.ms``, so readers that looked a segment up before the swap keep reading
   the old bytes - through the segment object, or by path through ``FileRegion``'s fallback to
   the ``.deleted`` name);
2. the ``.swap`` files are renamed to their live names (indexes first, the log last);
3. a ``LogSegment`` for the new files takes the replaced segments' place in the segment list
   (``PartitionLog.replace_segments``, which checks and changes its ``LogSegments``); its
   indexes are the writer's (already in memory), nothing is re-read.

The partition lock is held only for these renames and list updates (no I/O beyond ``rename``);
the directory is fsynced after it is released.

Crash states and what recovery (``storage.recovery``) makes of them - always the old or the new
segments, never a mix:

* ``.cleaned`` files present (the swap had not started): they are deleted, old segments stay;
  a log ``.swap`` whose base offset is at or above a ``.cleaned`` one is deleted too.
* ``N.log.swap`` present, the old segments live or already ``.deleted``: the swap is completed.
  Every live segment whose base offset lies in ``[N, next offset of the swap)`` is removed,
  ``.deleted`` files are removed, the swap is renamed live and its indexes are rebuilt. The
  cleaner always keeps the last batch of a group (empty if need be), so the swap's next offset
  is the replaced segments' next offset and exactly the replaced segments are removed.

Threading: called by a cleaner thread; takes the partition lock itself.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import KafkaStorageError
from ..fileio import fsync_dir
from ..segment import LogSegment
from .segment_writer import CleanedSegmentWriter

if TYPE_CHECKING:
    from ..log import PartitionLog

__all__ = ["replace_segments"]

logger = logging.getLogger("tidelog.storage.cleaner")


def replace_segments(
    log: PartitionLog,
    old: list[LogSegment],
    sizes: list[int],
    writer: CleanedSegmentWriter,
    now_ms: int,
) -> LogSegment | None:
    """Put the writer's (``.swap``) segment in place of ``old``; None if the log changed.

    On None the writer's files are removed. Raises ``KafkaStorageError`` if a rename fails.
    """

    def go_live() -> LogSegment:
        """Under the partition lock, the old segments already renamed ``.deleted``."""
        try:
            writer.go_live()
        except OSError as exc:
            raise KafkaStorageError(
                f"swap of cleaned segment {writer.log_path} failed: {exc}"
            ) from exc
        writer.close_log_file()
        segment = LogSegment(
            log.dir, writer.base_offset, log.config, now_ms=now_ms, handles=log.file_handles
        )
        fresh_offset_index, fresh_time_index = segment.offset_index, segment.time_index
        segment.offset_index = writer.offset_index
        segment.time_index = writer.time_index
        fresh_offset_index.close()
        fresh_time_index.close()
        segment.next_offset = writer.next_offset
        segment.max_timestamp_so_far = writer.max_timestamp
        segment.offset_of_max_timestamp_so_far = writer.offset_of_max_timestamp
        segment.bytes_since_last_index_entry = writer.bytes_since_last_index_entry
        first_ts = writer.first_batch_max_timestamp
        segment.rolling_based_ms = first_ts if first_ts is not None and first_ts >= 0 else None
        segment.dirty = False
        # Kafka divergence: the aborted-transaction entries move to the cleaned segment's
        # .txnindex after the swap, not inside it (a crash between loses them for a segment
        # below the recovery point).
        for replaced in old:
            for txn in replaced.txn_index.entries:
                segment.txn_index.append(txn)
        return segment

    try:
        segment = log.replace_segments(old, sizes, go_live, now_ms)
    except OSError as exc:  # renaming an old segment .deleted failed
        raise KafkaStorageError(f"swap of cleaned segment {writer.log_path} failed: {exc}") from exc
    if segment is None:
        writer.abort()
        return None
    try:
        fsync_dir(log.dir)
    except OSError as exc:  # the next flush of the log fsyncs the directory again
        logger.warning("fsync of %s after a swap failed: %s", log.dir, exc)
    return segment
