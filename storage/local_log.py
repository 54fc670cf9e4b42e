"""The file side of a partition log (Kafka's LocalLog): segments, LEO, recovery point, roll.

A partition directory ``<log dir>/<topic>-<partition>/`` holds its segments (see
``storage.segment``) and ``partition.metadata``. ``LocalLog`` owns the ``LogSegments`` of one
partition and the offsets that describe its files: ``log_end_offset`` (the next offset to
write; the active segment's ``next_offset``) and ``recovery_point`` (every byte below it has
been fsynced). It rolls, appends prepared batches, truncates, retires segments (renamed
``.deleted``, removed after ``file.delete.delay.ms``), replaces a run of sealed segments
(the cleaner's swap) and fsyncs. It knows nothing of the high watermark, the log start offset
or producers: ``storage.log.PartitionLog`` (Kafka's UnifiedLog) owns those and this object.

Invariants: the last segment is the active one and the only one written; ``log_end_offset``
is its ``next_offset``; ``recovery_point <= log_end_offset``; a segment leaves the list only
through ``schedule_delete`` (or ``close``), so its files outlive the readers that snapshotted
it.

Durability: ``append`` writes to the page cache only. A flush takes the segments written since
the last one (``take_dirty``, under the partition lock), fsyncs them without the lock
(``sync``: the active segment's ``.log`` only, its indexes are rebuilt after a crash), and on
failure gives them back (``restore_dirty``).

Threading: not thread-safe. ``PartitionLog`` calls every method under its partition lock
except ``sync`` (a worker thread, under the log's flush lock) and ``delete_files`` (any
thread, on segments already out of the list).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .batch import PreparedAppend
from .config import LogConfig
from .errors import KafkaStorageError
from .file_handles import FileHandleCache
from .fileio import fsync_dir
from .log_segments import LogSegments
from .segment import DELETED_SUFFIX, LogSegment

__all__ = ["FlushWork", "LocalLog", "parse_partition_dir_name", "wall_clock_ms"]

logger = logging.getLogger("tidelog.storage")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``"<topic>-<partition>"`` -> ``(topic, partition)``; None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


@dataclass(frozen=True, slots=True)
class FlushWork:
    """What one flush fsyncs: the segments written since the last flush, taken under the lock."""

    segments: list[LogSegment]
    active: LogSegment
    sync_dir: bool


class LocalLog:
    """The segments of one partition and the offsets of its files (Kafka's LocalLog)."""

    __slots__ = (
        "_deleted",
        "_on_roll",
        "config",
        "dir",
        "dir_dirty",
        "file_handles",
        "last_flush_ms",
        "log_end_offset",
        "name",
        "recovery_point",
        "segments",
    )

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        recovery_point: int,
        now_ms: int,
        file_handles: FileHandleCache,
        on_roll: Callable[[int], object],
    ) -> None:
        """``segments``: as the loader (``recovery.load_segments``, Kafka's LogLoader) left
        them. ``on_roll(new_base_offset)`` runs under the lock before a roll seals the active
        segment (the partition log snapshots its producer state there, as Kafka's roll)."""
        self.dir = directory
        self.name = directory.name
        self.config = config
        self.file_handles = file_handles
        self.segments = LogSegments(segments)
        self.log_end_offset = segments[-1].next_offset
        self.recovery_point = min(recovery_point, self.log_end_offset)
        #: When the last flush ended (the clock of ``flush.ms``).
        self.last_flush_ms = now_ms
        self.dir_dirty = True
        self._deleted: list[LogSegment] = []
        self._on_roll = on_roll

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def snapshot(self, start_offset: int | None = None) -> list[tuple[LogSegment, int]]:
        """``(segment, size)`` of every segment (from the one holding ``start_offset``): what a
        reader may read once the lock is released."""
        segments: Sequence[LogSegment] = self.segments
        if start_offset is not None:
            segments = self.segments.from_offset(start_offset)
        return [(s, s.size) for s in segments]

    # -- append and roll -----------------------------------------------------------------------
    def append(self, prepared: PreparedAppend, now: int) -> LogSegment:
        """Write prepared batches to the active segment (rolling first when it is due) and move
        the LEO; returns the segment written."""
        config = self.config
        segment = self.segments[-1]
        if segment.should_roll(
            config,
            messages_size=prepared.size_in_bytes,
            max_offset=prepared.last_offset,
            now_ms=now,
        ):
            segment = self.roll(now)
        segment.append(prepared, config.index_interval_bytes, now)
        self.log_end_offset = prepared.last_offset + 1
        return segment

    def roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at the LEO (none when the active segment is empty)."""
        active = self.segments[-1]
        if active.size == 0:
            return active
        new_base = self.log_end_offset
        self._on_roll(new_base)
        active.seal()
        segment = self._new_segment(new_base, now_ms)
        self.segments.add(segment)
        logger.debug("rolled %s at offset %d", self.name, new_base)
        return segment

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        segment = LogSegment(
            self.dir, base_offset, self.config, now_ms=now_ms, handles=self.file_handles
        )
        segment.start_empty(self.config)  # a stray file with our name starts afresh
        self.dir_dirty = True
        return segment

    # -- truncation ----------------------------------------------------------------------------
    def truncate_to(self, offset: int, now_ms: int) -> None:
        """Remove every batch holding offsets >= ``offset``; the segment holding ``offset``
        stays (the caller sends an offset below the first segment to ``truncate_fully``)."""
        while len(self.segments) > 1 and self.segments.active.base_offset > offset:
            self.schedule_delete(self.segments.remove_last(), now_ms)
        active = self.segments[-1]
        active.truncate_to(offset)
        active.make_active(self.config)
        self._truncated(active.next_offset)

    def truncate_fully(self, new_offset: int, now_ms: int) -> None:
        """Retire every segment; the log restarts empty at ``new_offset``."""
        for segment in self.segments.clear():
            self.schedule_delete(segment, now_ms)
        self.segments.add(self._new_segment(new_offset, now_ms))
        self._truncated(new_offset)
        self.recovery_point = new_offset

    def _truncated(self, leo: int) -> None:
        self.log_end_offset = leo
        self.recovery_point = min(self.recovery_point, leo)
        self.dir_dirty = True

    # -- retiring and replacing segments -------------------------------------------------------
    def deletable_count(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], high_watermark: int
    ) -> int:
        """How many of the oldest segments ``predicate(segment, next_segment)`` lets go: a
        prefix of segments wholly below ``high_watermark``, never an empty active segment."""
        segments = self.segments
        count = 0
        for i, segment in enumerate(segments):
            next_segment = segments[i + 1] if i + 1 < len(segments) else None
            upper = next_segment.base_offset if next_segment else self.log_end_offset
            last_and_empty = next_segment is None and segment.size == 0
            if upper > high_watermark or last_and_empty or not predicate(segment, next_segment):
                break
            count += 1
        return count

    def delete_first(self, count: int, now_ms: int) -> None:
        """Retire the ``count`` oldest segments (retention); when that is all of them, a roll
        first gives the log a new active segment."""
        segments = self.segments
        if count == len(segments):
            self.roll(now_ms)
        for segment in segments[:count]:
            self.schedule_delete(segment, now_ms)
        segments.remove_first(count)
        self.dir_dirty = True

    def replace(
        self,
        old: list[LogSegment],
        sizes: list[int],
        make_new: Callable[[], LogSegment],
        now_ms: int,
    ) -> LogSegment | None:
        """Put the segment ``make_new()`` returns in place of ``old`` (Kafka's replaceSegments).

        Only if the log still holds ``old`` as a run of sealed segments, each with the size in
        ``sizes`` (retention, truncation or deletion may have changed the log meanwhile); else
        None and ``make_new`` is not called. The old segments are renamed ``.deleted``
        (scheduled deletion) first, then ``make_new`` puts the new files live and returns their
        segment. Raises what ``make_new`` raises.
        """
        first = self.segments.find_run(old, sizes)
        if first is None:
            return None
        for segment in old:
            self.schedule_delete(segment, now_ms)
        segment = make_new()
        self.segments.replace(first, len(old), segment)
        self.dir_dirty = True
        return segment

    def schedule_delete(self, segment: LogSegment, now_ms: int) -> None:
        """Rename the segment's files ``.deleted``; ``take_expired`` hands it back for removal
        after ``file.delete.delay.ms``."""
        try:
            segment.rename_with_suffix(DELETED_SUFFIX)
        except OSError as exc:
            raise KafkaStorageError(f"cannot rename {segment.log_path}: {exc}") from exc
        segment.deleted_at_ms = now_ms
        self._deleted.append(segment)

    def take_expired(self, now_ms: int) -> list[LogSegment]:
        """The retired segments due for removal (no longer kept here): call ``delete_files``
        on each, outside the lock."""
        delay = self.config.file_delete_delay_ms
        due = [
            s
            for s in self._deleted
            if s.deleted_at_ms is not None and now_ms - s.deleted_at_ms >= delay
        ]
        self._deleted = [s for s in self._deleted if s not in due]
        return due

    # -- flush and close -----------------------------------------------------------------------
    def needs_flush(self, now_ms: int) -> bool:
        """True when the flush policy (flush.messages / flush.ms) asks for an fsync now."""
        unflushed = self.log_end_offset - self.recovery_point
        if unflushed <= 0:
            return False
        config = self.config
        if config.flush_messages is not None and unflushed >= config.flush_messages:
            return True
        return config.flush_ms is not None and now_ms - self.last_flush_ms >= config.flush_ms

    def take_dirty(self) -> FlushWork:
        """The segments (and directory) written since the last flush, now marked clean."""
        dirty = [s for s in self.segments if s.dirty]
        for segment in dirty:
            segment.dirty = False
        work = FlushWork(dirty, self.segments[-1], self.dir_dirty)
        self.dir_dirty = False
        return work

    def sync(self, work: FlushWork) -> None:
        """fsync what ``take_dirty`` took (without the partition lock). Raises
        ``KafkaStorageError`` or ``OSError``; then call ``restore_dirty``."""
        for segment in work.segments:
            # Kafka divergence: Kafka fsyncs the active segment's indexes too; ours are
            # rebuilt by recovery after any crash, so only inactive ones are synced.
            segment.flush(indexes=segment is not work.active)
        if work.sync_dir:
            fsync_dir(self.dir)

    def restore_dirty(self, work: FlushWork) -> None:
        """A failed ``sync``: what it took still awaits an fsync."""
        for segment in work.segments:
            segment.dirty = True
        self.dir_dirty = self.dir_dirty or work.sync_dir

    def seal_active(self) -> list[LogSegment]:
        """Clean close, first step (under the lock): the active segment stops being active;
        returns the segments for ``flush_all``."""
        self.segments[-1].seal()
        return list(self.segments)

    def flush_all(self, segments: list[LogSegment]) -> None:
        """Clean close, second step (without the partition lock): fsync what is dirty and the
        directory."""
        for segment in segments:
            if segment.dirty:
                segment.flush()
                segment.dirty = False
        fsync_dir(self.dir)

    def close(self) -> None:
        """Close every file, retired segments' too."""
        for segment in [*self.segments, *self._deleted]:
            segment.close()
