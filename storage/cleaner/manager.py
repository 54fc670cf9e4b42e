"""Which log to clean next, and how far each log is clean (Kafka's LogCleanerManager).

The cleaner checkpoint: each log dir holds ``cleaner-offset-checkpoint`` in the format of the
other offset checkpoints (``storage.checkpoint``: version line ``0``, entry count, then
``<topic> <partition> <offset>`` lines; written to ``.tmp``, fsynced, renamed, dir fsynced). The
offset is the partition's first dirty offset: everything below it was cleaned at least once.
A partition without an entry starts dirty at its log start offset. Entries of partitions the
log manager no longer has are dropped at the next write. A crash between a swap and the
checkpoint write only means the next pass cleans part of the log again.

Cleanable range of a compacted log (``cleanable_offsets``; ``compaction`` = its
``CompactionConfig``):

* first dirty offset: the checkpointed offset, reset to the log start offset when it lies below
  it or above the log end offset (truncation);
* first uncleanable offset: the smallest of the high watermark (tidelog's last stable offset),
  the active segment's base offset and, when ``min.compaction.lag.ms`` > 0, the base offset of
  the first dirty segment whose largest timestamp is within that lag of now - rounded down to
  the base offset of the segment holding it, never below the first dirty offset;
* cleanable bytes: the sizes of the segments in the dirty range; clean bytes: of the segments
  below the first dirty offset; ratio = cleanable / (clean + cleanable);
* ``max.compaction.lag.ms``: a log must be cleaned now when the first batch of a dirty sealed
  segment is older than that.

``grab_filthiest_compacted_log``: among logs with ``cleanup.policy`` containing ``compact`` that
are not being cleaned and not marked uncleanable, those with cleanable bytes and either a ratio
above ``min.cleanable.dirty.ratio`` or a compaction that is due; the highest ratio wins and is
marked in progress until ``done_cleaning`` / ``done_aborted``.

Kafka divergence: a log also qualifies (at the lowest priority) once the earliest delete
horizon of the tombstones the last pass kept has passed, so tombstones leave a quiet log after
``delete.retention.ms`` instead of waiting for new dirty bytes. Horizons are remembered in
memory only; after a restart they are learnt again by the next ordinary pass.

A partition whose cleaning raised an unexpected error is marked uncleanable (logged once) and
skipped until the broker restarts, as Kafka does.

Threading: one lock guards the in-progress set, the horizons and the checkpoint files; cleaner
threads and the broker call in concurrently.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..checkpoint import CheckpointError, read_checkpoint, write_checkpoint
from ..errors import KafkaStorageError
from ..segment import LogSegment
from .cleaner import LogToClean
from .config import CompactionConfig

if TYPE_CHECKING:
    from ..log import PartitionLog
    from ..manager import LogManager

__all__ = ["CLEANER_OFFSET_CHECKPOINT", "LogCleanerManager", "cleanable_offsets"]

logger = logging.getLogger("tidelog.storage.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

TopicPartition = tuple[str, int]


def _segment_range(segments: list[LogSegment], start: int, end: int) -> list[LogSegment]:
    """Segments holding offsets in ``[start, end)`` (the floor segment of ``start`` on).

    ``segments`` is the whole list, active segment included: a segment's end is the next one's
    base offset, so an empty range (``start >= end``, a clean log) selects nothing.
    """
    out: list[LogSegment] = []
    if start >= end:
        return out
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if segment.base_offset >= end:
            break
        if next_base is not None and next_base <= start:
            continue
        out.append(segment)
    return out


def cleanable_offsets(
    log: PartitionLog,
    segments: list[LogSegment],
    last_clean_offset: int | None,
    now_ms: int,
    compaction: CompactionConfig,
) -> tuple[int, int, bool]:
    """``(first dirty, first uncleanable segment base, checkpoint needs reset)``."""
    log_start = log.log_start_offset
    checkpointed = log_start if last_clean_offset is None else last_clean_offset
    force = False
    if checkpointed < log_start or checkpointed > log.log_end_offset:
        if checkpointed > log.log_end_offset or not log.config.delete_enabled:
            logger.warning(
                "resetting first dirty offset of %s-%d to the log start offset %d (checkpoint "
                "said %d)",
                log.topic,
                log.partition,
                log_start,
                checkpointed,
            )
        checkpointed = log_start
        force = last_clean_offset is not None
    first_dirty = checkpointed
    active = segments[-1]
    uncleanable = min(log.high_watermark, active.base_offset)
    if compaction.min_compaction_lag_ms > 0:
        for segment in _segment_range(segments, first_dirty, active.base_offset):
            if segment.largest_timestamp > now_ms - compaction.min_compaction_lag_ms:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    uncleanable = max(uncleanable, first_dirty)
    holding = _segment_range(segments, uncleanable, uncleanable + 1)
    first_uncleanable = holding[0].base_offset if holding else active.base_offset
    return first_dirty, max(min(first_uncleanable, active.base_offset), 0), force


def _compaction_due(
    segments: list[LogSegment], first_dirty: int, now_ms: int, compaction: CompactionConfig
) -> bool:
    """Kafka's maxCompactionDelay > 0: a dirty sealed segment's first batch is too old."""
    limit = now_ms - max(compaction.max_compaction_lag_ms, 0)
    for segment in _segment_range(segments, first_dirty, segments[-1].base_offset):
        first_ts = segment.rolling_based_ms
        if first_ts is not None and 0 < first_ts < limit:
            return True
    return False


class LogCleanerManager:
    """Checkpoints, the in-progress set and the choice of the filthiest log."""

    def __init__(
        self,
        log_manager: LogManager,
        compaction_config: Callable[[PartitionLog], CompactionConfig],
    ) -> None:
        self.log_manager = log_manager
        self._compaction_config = compaction_config
        self._lock = threading.Lock()
        self._in_progress: set[TopicPartition] = set()
        self._aborted: set[TopicPartition] = set()
        self._paused: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()
        self._horizons: dict[TopicPartition, int] = {}
        self._done = threading.Condition(self._lock)

    # -- checkpoints ---------------------------------------------------------------------------
    def _checkpoint_path(self, log_dir: Path) -> Path:
        return log_dir / CLEANER_OFFSET_CHECKPOINT

    def _read(self, log_dir: Path) -> dict[TopicPartition, int]:
        try:
            return read_checkpoint(self._checkpoint_path(log_dir))
        except CheckpointError as exc:
            logger.warning("ignoring unreadable cleaner checkpoint: %s", exc)
            return {}

    def _update_checkpoint_locked(self, log: PartitionLog, offset: int) -> None:
        log_dir = self.log_manager.log_dir_of(log.topic, log.partition)
        if log_dir is None:
            return
        live = {(lg.topic, lg.partition) for lg in self.log_manager.logs()}
        entries = {tp: o for tp, o in self._read(log_dir).items() if tp in live}
        entries[(log.topic, log.partition)] = offset
        try:
            write_checkpoint(self._checkpoint_path(log_dir), entries)
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot write the cleaner checkpoint in {log_dir}: {exc}"
            ) from exc

    def update_checkpoint(self, log: PartitionLog, offset: int) -> None:
        with self._lock:
            self._update_checkpoint_locked(log, offset)

    # -- choosing ------------------------------------------------------------------------------
    def log_to_clean(
        self, log: PartitionLog, last_clean_offset: int | None, now_ms: int
    ) -> tuple[LogToClean, bool]:
        compaction = self._compaction_config(log)
        segments = log.segments()
        first_dirty, first_uncleanable, force = cleanable_offsets(
            log, segments, last_clean_offset, now_ms, compaction
        )
        clean_bytes = sum(s.size for s in segments[:-1] if s.base_offset < first_dirty)
        cleanable = sum(s.size for s in _segment_range(segments, first_dirty, first_uncleanable))
        tp = (log.topic, log.partition)
        horizon = self._horizons.get(tp, -1)
        return (
            LogToClean(
                log=log,
                compaction=compaction,
                first_dirty_offset=first_dirty,
                first_uncleanable_offset=first_uncleanable,
                clean_bytes=clean_bytes,
                cleanable_bytes=cleanable,
                need_compaction_now=_compaction_due(segments, first_dirty, now_ms, compaction),
                horizon_due=0 <= horizon <= now_ms and clean_bytes > 0,
            ),
            force,
        )

    def grab_filthiest_compacted_log(self, now_ms: int) -> LogToClean | None:
        """The log to clean next (marked in progress), or None."""
        with self._lock:
            checkpoints: dict[TopicPartition, int] = {}
            for log_dir in self.log_manager.log_dirs:
                checkpoints.update(self._read(log_dir))
            candidates: list[LogToClean] = []
            for log in self.log_manager.logs():
                tp = (log.topic, log.partition)
                if (
                    log.closed
                    or not log.config.compact_enabled
                    or tp in self._in_progress
                    or tp in self._paused
                    or tp in self._uncleanable
                ):
                    continue
                try:
                    to_clean, force = self.log_to_clean(log, checkpoints.get(tp), now_ms)
                    if force:
                        self._update_checkpoint_locked(log, to_clean.first_dirty_offset)
                except Exception:
                    logger.exception("cannot compute the cleanable range of %s", log)
                    self._uncleanable.add(tp)
                    continue
                if to_clean.total_bytes > 0:
                    candidates.append(to_clean)
            cleanable = [
                c
                for c in candidates
                if (c.need_compaction_now and c.cleanable_bytes > 0)
                or c.cleanable_ratio > c.compaction.min_cleanable_dirty_ratio
                or c.horizon_due
            ]
            if not cleanable:
                return None
            chosen = max(
                cleanable,
                key=lambda c: (not c.horizon_due or c.cleanable_bytes > 0, c.cleanable_ratio),
            )
            self._in_progress.add((chosen.log.topic, chosen.log.partition))
            return chosen

    def begin_cleaning(self, log: PartitionLog, now_ms: int) -> LogToClean | None:
        """Mark ``log`` in progress and return its range now, whatever its ratio (forced)."""
        with self._lock:
            tp = (log.topic, log.partition)
            if tp in self._in_progress or tp in self._paused or log.closed:
                return None
            checkpoints = self._read(
                self.log_manager.log_dir_of(log.topic, log.partition) or log.dir.parent
            )
            to_clean, _ = self.log_to_clean(log, checkpoints.get(tp), now_ms)
            self._in_progress.add(tp)
            return to_clean

    # -- finishing -----------------------------------------------------------------------------
    def done_cleaning(self, log: PartitionLog, end_offset: int, earliest_horizon: int) -> None:
        """Checkpoint ``end_offset`` (unless aborted meanwhile) and release the log."""
        tp = (log.topic, log.partition)
        with self._lock:
            try:
                if tp not in self._aborted and not log.closed:
                    self._update_checkpoint_locked(log, end_offset)
                    if earliest_horizon >= 0:
                        self._horizons[tp] = earliest_horizon
                    else:
                        self._horizons.pop(tp, None)
            finally:
                self._release_locked(tp)

    def done_aborted(self, log: PartitionLog) -> None:
        with self._lock:
            self._release_locked((log.topic, log.partition))

    def mark_uncleanable(self, log: PartitionLog) -> None:
        with self._lock:
            tp = (log.topic, log.partition)
            self._uncleanable.add(tp)
            self._release_locked(tp)

    def _release_locked(self, tp: TopicPartition) -> None:
        self._in_progress.discard(tp)
        if tp in self._aborted:
            self._aborted.discard(tp)
            self._paused[tp] = self._paused.get(tp, 0) + 1
        self._done.notify_all()

    # -- pausing (deletion, truncation) ---------------------------------------------------------
    def is_aborted(self, log: PartitionLog) -> bool:
        with self._lock:
            return (log.topic, log.partition) in self._aborted

    def abort_and_pause_cleaning(self, topic: str, partition: int) -> None:
        """Stop a pass on the partition (waiting for it) and keep it from being cleaned."""
        tp = (topic, partition)
        with self._lock:
            if tp in self._in_progress:
                self._aborted.add(tp)
                while tp in self._in_progress:
                    self._done.wait(0.1)
            else:
                self._paused[tp] = self._paused.get(tp, 0) + 1

    def abort_cleaning(self, topic: str, partition: int) -> None:
        """Stop a pass on the partition (waiting for it) and forget it: it is being deleted."""
        tp = (topic, partition)
        self.abort_and_pause_cleaning(topic, partition)
        with self._lock:
            self._paused.pop(tp, None)
            self._uncleanable.discard(tp)
            self._horizons.pop(tp, None)

    def uncleanable_partitions(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._uncleanable)
