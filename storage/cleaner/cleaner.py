"""One cleaning pass over one log (Kafka's Cleaner.doClean / buildOffsetMap / cleanSegments).

A pass over a ``LogToClean`` (chosen by ``storage.cleaner.manager``) with dirty range
``[first_dirty_offset, first_uncleanable_offset)`` - the uncleanable offset is always a segment
base offset at or below the active segment's, so the active segment is never read or written:

1. Offset map: the dirty segments are read from ``first_dirty_offset`` on; every keyed record
   of a data batch maps its key to its offset; ``latest_offset`` follows the last batch mapped
   and, after each whole segment, the next segment's base offset - 1 (gaps). When the map's
   budget is exhausted the map stops at a batch boundary: ``latest_offset`` then marks how far
   this pass cleans and the rest stays dirty for the next pass.
2. Groups: the sealed segments below ``end offset = latest_offset + 1`` - the clean part too, as
   Kafka does, so keys superseded in the dirty part vanish from the clean part - are grouped
   greedily in offset order while the group's ``.log`` bytes stay within ``segment.bytes``, each
   index within ``segment.index.bytes`` and the offsets within 2**31 - 1 of the first base
   offset (Kafka's groupSegmentsBySize).
3. Each group is filtered batch by batch (``batch_filter``) into a cleaned segment named after
   the group's first base offset (``segment_writer``) and swapped in (``swap``). A group of one
   segment whose every batch came through unchanged is left alone (no rewrite, no swap).
4. The result's ``end_offset`` becomes the log's first dirty offset in the cleaner checkpoint.

Reads use the cleaner's own file descriptors (opened by path, falling back to the ``.deleted``
name if retention renamed the segment meanwhile); every byte read and written passes the
throttle. A damaged batch (CRC, framing) raises ``CorruptRecordError`` and nothing is swapped
for its group. ``check_done`` is called per batch so shutdown and log deletion abort a pass
quickly (``CleaningAbortedError``); whatever was swapped before stays (each swap is whole).

Transactions: batches of aborted transactions (the log's ``.txnindex`` entries) are left out of
the offset map and dropped from the cleaned segments (``storage/cleaner/aborted.py``); the
aborted-transaction entries of the replaced segments go to the cleaned segment's ``.txnindex``;
a marker whose transaction keeps no data goes after ``delete.retention.ms``.

Threading: a ``Cleaner`` belongs to one cleaner thread. Appends, reads and flushes of the log go
on meanwhile; the partition lock is taken only to snapshot producer state and for each swap.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..batch import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    LOG_OVERHEAD,
    RecordBatchHeader,
    parse_batch_header,
)
from ..fileio import pread_all
from ..segment import DELETED_SUFFIX, LogSegment
from .aborted import AbortedTransactions
from .batch_filter import FilterContext, filter_batch
from .config import CompactionConfig
from .offset_map import OffsetMap
from .records import records_section
from .segment_writer import CleanedSegmentWriter
from .swap import replace_segments
from .throttler import Throttler

if TYPE_CHECKING:
    from ..log import PartitionLog

__all__ = [
    "CleanResult",
    "Cleaner",
    "CleanerStats",
    "CleaningAbortedError",
    "LogToClean",
    "group_segments_by_size",
]

logger = logging.getLogger("tidelog.storage.cleaner")

INT32_MAX = 2**31 - 1


class CleaningAbortedError(Exception):
    """The pass was stopped (shutdown, log closed or changed); nothing half-done remains."""


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log and its cleanable range (Kafka's LogToClean)."""

    log: PartitionLog
    compaction: CompactionConfig
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False
    horizon_due: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanerStats:
    """Counters of one pass (Kafka's CleanerStats)."""

    map_bytes_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    groups_swapped: int = 0
    map_seconds: float = 0.0
    seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class CleanResult:
    end_offset: int  # the first dirty offset after this pass
    stats: CleanerStats
    earliest_delete_horizon: int  # of tombstones still in the log, -1 if none


def group_segments_by_size(
    segments: list[LogSegment],
    sizes: dict[int, int],
    max_size: int,
    max_index_size: int,
    first_uncleanable_offset: int,
) -> list[list[LogSegment]]:
    """Consecutive runs of ``segments`` that fit one cleaned segment (see the module doc)."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = sizes[id(segments[i])]
        index_size = segments[i].offset_index.size_in_bytes
        time_size = segments[i].time_index.size_in_bytes
        i += 1
        while i < len(segments):
            candidate = segments[i]
            size = sizes[id(candidate)]
            last = (
                segments[i + 1].base_offset - 1
                if i + 1 < len(segments)
                else first_uncleanable_offset - 1
            )
            if (
                log_size + size > max_size
                or index_size + candidate.offset_index.size_in_bytes > max_index_size
                or time_size + candidate.time_index.size_in_bytes > max_index_size
                or (size > 0 and last - group[0].base_offset > INT32_MAX)
            ):
                break
            group.append(candidate)
            log_size += size
            index_size += candidate.offset_index.size_in_bytes
            time_size += candidate.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


def _open_segment(segment: LogSegment) -> int:
    path = segment.log_path
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        if path.name.endswith(DELETED_SUFFIX):
            raise
        return os.open(path.with_name(path.name + DELETED_SUFFIX), os.O_RDONLY)


def _iter_batches(
    fd: int, start: int, end: int, buffer_size: int, throttle: Callable[[float], None]
) -> Iterator[tuple[int, RecordBatchHeader, memoryview]]:
    """``(position, header, batch bytes)`` of the batches in ``[start, end)`` of a file."""
    position = start
    while position < end:
        chunk = pread_all(fd, position, min(buffer_size, end - position))
        throttle(len(chunk))
        view = memoryview(chunk)
        n = len(chunk)
        p = 0
        while n - p >= BATCH_HEADER_SIZE:
            header = parse_batch_header(chunk, p, available=end - position - p)
            size = header.batch_length + LOG_OVERHEAD
            if p + size > n:
                break
            yield position + p, header, view[p : p + size]
            p += size
        if p == 0:  # a batch larger than the buffer (or a damaged tail)
            head = pread_all(fd, position, min(BATCH_HEADER_SIZE, end - position))
            header = parse_batch_header(head, 0, available=end - position)
            whole = pread_all(fd, position, header.batch_length + LOG_OVERHEAD)
            throttle(len(whole))
            yield position, header, memoryview(whole)
            p = len(whole)
        position += p


def _active_producers(log: PartitionLog) -> dict[int, int]:
    """Producer id -> last data offset, for every producer the log's state knows."""
    return log.producer_ids_by_last_offset()


class Cleaner:
    """Cleans one log per ``clean`` call; owns an offset map and I/O buffer size."""

    def __init__(
        self,
        *,
        dedupe_buffer_size: int = 128 * 1024 * 1024,
        io_buffer_size: int = 512 * 1024,
        throttler: Throttler | None = None,
        clock: Callable[[], int] | None = None,
        check_done: Callable[[PartitionLog], None] | None = None,
    ) -> None:
        self.offset_map = OffsetMap(dedupe_buffer_size)
        self.io_buffer_size = io_buffer_size
        self.throttler = throttler or Throttler(float("inf"))
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._check_done = check_done or (lambda _log: None)
        self._aborted = AbortedTransactions(())

    # -- the pass ------------------------------------------------------------------------------
    def clean(self, to_clean: LogToClean, now_ms: int | None = None) -> CleanResult:
        log = to_clean.log
        now = self._clock() if now_ms is None else now_ms
        stats = CleanerStats()
        segments = log.segments()
        sealed = segments[:-1]
        sizes = {id(s): s.size for s in sealed}
        start = to_clean.first_dirty_offset
        upper = min(to_clean.first_uncleanable_offset, segments[-1].base_offset)
        offset_map = self.offset_map
        offset_map.clear()
        offset_map.update_latest_offset(start - 1)
        logger.info(
            "cleaning %s-%d: dirty offsets [%d, %d)", log.topic, log.partition, start, upper
        )
        aborted = AbortedTransactions(log.aborted_transactions(0, upper))
        self._aborted = aborted
        self._build_offset_map(log, segments, sizes, start, upper, stats)
        stats.map_seconds = time.monotonic() - stats.started
        end_offset = max(offset_map.latest_offset + 1, start)
        groups = group_segments_by_size(
            [s for s in sealed if s.base_offset < end_offset],
            sizes,
            log.config.segment_bytes,
            log.config.segment_index_bytes,
            upper,
        )
        ctx = FilterContext(
            offset_map,
            now,
            to_clean.compaction.delete_retention_ms,
            _active_producers(log),
            aborted if aborted else None,
        )
        horizon = [-1]
        for group in groups:
            self._clean_group(log, group, sizes, ctx, stats, horizon, now)
        stats.seconds = time.monotonic() - stats.started
        logger.info(
            "cleaned %s-%d up to offset %d: %d -> %d bytes, %d -> %d records, %d swap(s), %.3fs",
            log.topic,
            log.partition,
            end_offset,
            stats.bytes_read,
            stats.bytes_written,
            stats.messages_read,
            stats.messages_written,
            stats.groups_swapped,
            stats.seconds,
        )
        return CleanResult(end_offset, stats, horizon[0])

    # -- offset map ----------------------------------------------------------------------------
    def _build_offset_map(
        self,
        log: PartitionLog,
        segments: list[LogSegment],
        sizes: dict[int, int],
        start: int,
        upper: int,
        stats: CleanerStats,
    ) -> None:
        offset_map = self.offset_map
        for i, segment in enumerate(segments[:-1]):
            next_base = segments[i + 1].base_offset
            if segment.base_offset >= upper:
                break
            if next_base <= start:
                continue
            position = segment.offset_index.lookup(start)[1] if segment.base_offset < start else 0
            if self._map_segment(log, segment, position, sizes[id(segment)], start, stats):
                return
            offset_map.update_latest_offset(min(next_base, upper) - 1)

    def _map_segment(
        self,
        log: PartitionLog,
        segment: LogSegment,
        position: int,
        end: int,
        start: int,
        stats: CleanerStats,
    ) -> bool:
        """Map one segment's records from ``position``; True when the map became full."""
        offset_map = self.offset_map
        fd = _open_segment(segment)
        try:
            for _, header, view in _iter_batches(
                fd, position, end, self.io_buffer_size, self.throttler.maybe_throttle
            ):
                self._check_done(log)
                stats.map_bytes_read += len(view)
                if header.last_offset < start:
                    continue
                if not header.attributes & CONTROL_MASK and not self._aborted.is_aborted(header):
                    if offset_map.full:
                        return True
                    data = records_section(view, header)
                    offset_map.put_batch(data, header.records_count, header.base_offset, start)
                offset_map.update_latest_offset(header.last_offset)
        finally:
            os.close(fd)
        return False

    # -- cleaning a group ----------------------------------------------------------------------
    def _clean_group(
        self,
        log: PartitionLog,
        group: list[LogSegment],
        sizes: dict[int, int],
        ctx: FilterContext,
        stats: CleanerStats,
        horizon: list[int],
        now_ms: int,
    ) -> bool:
        config = log.config
        writer = CleanedSegmentWriter(
            log.dir,
            group[0].base_offset,
            index_interval_bytes=config.index_interval_bytes,
            segment_index_bytes=config.segment_index_bytes,
            buffer_size=self.io_buffer_size,
        )
        changed = len(group) > 1
        earliest = horizon[0]
        throttle = self.throttler.maybe_throttle
        try:
            for i, segment in enumerate(group):
                size = sizes[id(segment)]
                last_segment = i == len(group) - 1
                fd = _open_segment(segment)
                try:
                    for position, header, view in _iter_batches(
                        fd, 0, size, self.io_buffer_size, throttle
                    ):
                        self._check_done(log)
                        outcome = filter_batch(
                            view,
                            header,
                            ctx,
                            last_in_group=last_segment and position + len(view) == size,
                        )
                        stats.bytes_read += len(view)
                        stats.messages_read += outcome.records_read
                        stats.messages_written += outcome.records_kept
                        changed = changed or outcome.changed
                        if outcome.tombstone_horizon >= 0 and (
                            earliest < 0 or outcome.tombstone_horizon < earliest
                        ):
                            earliest = outcome.tombstone_horizon
                        if outcome.data is not None:
                            writer.append(outcome.data)
                            stats.bytes_written += len(outcome.data)
                            throttle(len(outcome.data))
                finally:
                    os.close(fd)
            horizon[0] = earliest
            if not changed:
                writer.abort()
                return False
            writer.finish(_mtime(group[-1]))
            swapped = replace_segments(
                log, group, [sizes[id(s)] for s in group], writer, max(now_ms, self._clock())
            )
        except BaseException:
            writer.abort()
            raise
        if swapped is None:
            raise CleaningAbortedError(f"{log.topic}-{log.partition} changed while cleaning")
        stats.groups_swapped += 1
        logger.debug("swapped cleaned segment %s for %d segment(s)", swapped, len(group))
        return True


def _mtime(segment: LogSegment) -> float | None:
    try:
        return os.stat(segment.log_path).st_mtime
    except FileNotFoundError:
        try:
            return os.stat(str(segment.log_path) + DELETED_SUFFIX).st_mtime
        except FileNotFoundError:
            return None
