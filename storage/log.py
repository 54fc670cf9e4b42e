"""A partition's log (Kafka's UnifiedLog): offsets, producer state, transactions, the append.

``PartitionLog`` owns a ``storage.local_log.LocalLog`` (the segment files, the log end offset
and the recovery point) and keeps what lies on top of the files: ``log_start_offset``, the high
watermark, the producer state (``storage.producer_state``) and the transactions
(``storage.log_transactions``). Offsets: ``log_start_offset <= high_watermark <=
log_end_offset``; readers never see past the HW; ``recovery_point`` is the offset below which
every byte has been fsynced. The HW follows the LEO at once unless the flush policy holds it
back (``flush.messages=1``, see ``LogConfig.holds_high_watermark``), in which case it advances
when the fsync covering a batch returns.

Durability: ``append`` writes to the page cache only. ``flush`` (from a worker thread when
``needs_flush`` says so) fsyncs what was written since the last flush, then advances the
recovery point; one fsync covers every batch appended before it (group commit: callers that
arrive while a flush runs wait for it and return at once if it covered them). After a crash,
everything from the segment holding the recovery point on is re-validated (``storage.recovery``).

Threading (the contract with the broker):
* ``append``, ``roll``, ``truncate_to`` are called by one thread at a time (the event loop; the
  broker appends a big or compacted-and-compressed batch from a worker thread, with the other
  appends of that partition queued behind it: ``broker/partition_appends.py``). Everything they
  change is changed under ``self._lock``; validation and the key check run before it.
* ``read``, ``flush``, ``apply_retention``, ``delete_expired_files``, timestamp look-ups and the
  offset properties may be called from worker threads at the same time.
* ``self._lock`` (a ``threading.Lock``) guards the local log (segment list, index changes, LEO,
  recovery point) and the offsets kept here; it is held only for in-memory work and page-cache
  writes, never across an fsync.
* ``self._flush_lock`` serializes flushers (group commit) and is never taken by ``append``.
* The log cleaner (``storage.cleaner.swap``) replaces sealed segments through
  ``replace_segments`` (Kafka's replaceSegments). The core log does not import the cleaner.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from .batch import RecordBatchHeader, prepare_append, validate_records
from .config import LogConfig
from .control_records import EndTxnMarker
from .errors import KafkaStorageError, OffsetOutOfRangeError
from .file_handles import UNBOUNDED, FileHandleCache
from .info import AppendInfo, FetchDataInfo, ReadInfo
from .local_log import LocalLog, parse_partition_dir_name, wall_clock_ms
from .log_transactions import LogTransactions
from .metadata import read_partition_metadata
from .producer_state import ProducerStateManager, duplicate_append_info
from .reading import collect_regions
from .record_scan import require_record_keys
from .recovery import load_segments
from .retention import log_start_breached, retention_ms_breached, retention_size_breached
from .segment import LogSegment
from .timestamps import find_max_timestamp, find_offset_for_timestamp
from .transaction_index import AbortedTxn

__all__ = ["PartitionLog", "parse_partition_dir_name", "wall_clock_ms"]

logger = logging.getLogger("tidelog.storage")


class PartitionLog:
    """The log of one topic-partition (Kafka's UnifiedLog, single replica)."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        topic_id: uuid.UUID | None = None,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        producer_id_expiration_ms: int | None = None,
        file_handles: FileHandleCache = UNBOUNDED,
        new: bool = False,
        found: bool = False,
    ) -> None:
        """Open (or recover) the log in ``directory``. ``file_handles``: the cache segment
        files are opened through (the log manager's, bounded by ``log.open.files.max``).
        ``new``: the directory was just created and holds nothing yet (the loader looks for no
        files). ``found``: the directory exists (the log manager listed it): no ``mkdir``."""
        parsed = parse_partition_dir_name(directory.name)
        if parsed is None:
            raise ValueError(f"{directory.name!r} is not a <topic>-<partition> directory name")
        self.topic, self.partition = parsed
        self.dir = directory
        #: The partition's settings; ``update_config`` changes them (here and in the local log).
        self.config = config
        self._clock = clock
        self.file_handles = file_handles
        if not new and not found:
            directory.mkdir(parents=True, exist_ok=True)
        self.topic_id = topic_id if topic_id is not None else read_partition_metadata(directory)
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        now = clock()
        self.producer_state = ProducerStateManager(directory, clock, producer_id_expiration_ms)
        loaded = load_segments(
            directory,
            config,
            now_ms=now,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
            handles=file_handles,
            new=new,
        )
        self._local = local = LocalLog(
            directory,
            config,
            loaded.segments,
            recovery_point=recovery_point,
            now_ms=now,
            file_handles=file_handles,
            # As Kafka's roll: the producer state as of the new segment's base offset, fsynced
            # by the next flush.
            on_roll=lambda base: self.producer_state.take_snapshot(base, sync=False),
        )
        self._closed = False
        leo = local.log_end_offset
        self._log_start_offset = min(max(log_start_offset, local.segments[0].base_offset), leo)
        self._high_watermark = leo
        self._transactions = LogTransactions(self.producer_state)
        self.producer_state.load_from_segments(
            local.segments,
            self._log_start_offset,
            on_completed=lambda txn: self._transactions.rebuild_index(local.segments, txn),
            replay_from=loaded.first_recovered_base,
            names=loaded.names,
        )
        if loaded.truncated_bytes or leo > recovery_point:
            # Recovered data is made durable before it counts as flushed.
            self.flush(now)
        elif loaded.recovered_segments:
            # Only the active segment was checked and every byte of it lies below the recovery
            # point, i.e. was fsynced before the crash: no fsync now (after a SIGKILL of a
            # broker with thousands of partitions, these fsyncs would be most of its start-up).
            local.segments[-1].mark_flushed()
        # Single replica: the leader's HW is the ISR's smallest LEO, i.e. its own LEO, and
        # everything on disk after loading has been validated (and fsynced if recovered).
        # Kafka divergence: the replication-offset-checkpoint is written but not needed to
        # restore the HW.
        local.recovery_point = leo

    # -- offsets -------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return self._local.size_in_bytes

    @property
    def active_segment(self) -> LogSegment:
        return self._local.segments[-1]

    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._local.segments)

    def __repr__(self) -> str:
        offsets = f"{self._log_start_offset}, hw={self._high_watermark}, leo={self.log_end_offset}"
        return f"PartitionLog({self.topic}-{self.partition}, start={offsets})"

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.topic}-{self.partition} is closed")

    # -- append --------------------------------------------------------------------------------
    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        now_ms: int | None = None,
        leader_epoch: int | None = None,
        allow_control: bool = False,
        from_coordinator: bool = False,
    ) -> AppendInfo:
        """Validate every batch, assign offsets from the LEO and write them (all or nothing).

        ``leader_epoch`` overwrites each batch's partition leader epoch when given.
        ``allow_control`` lets a coordinator write control batches (clients may not).
        ``from_coordinator``: a coordinator's own transactional batch (TxnOffsetCommit in
        ``__consumer_offsets``): no sequence checks (Kafka's AppendOrigin.COORDINATOR).
        Raises ``StorageError`` subclasses; nothing is written when one is raised.
        """
        config = self.config
        now = self._clock() if now_ms is None else now_ms
        batches = validate_records(
            records,
            max_message_bytes=config.max_message_bytes,
            segment_bytes=config.segment_bytes,
            allow_control=allow_control,
        )
        if config.compact_enabled:  # Kafka's LogValidator: keys only, compacted topics only
            require_record_keys(records, batches, f"{self.topic}-{self.partition}")
        append_time = now if config.log_append_time else None
        return self._append_validated(
            records, batches, now, append_time, leader_epoch, from_coordinator, None
        )

    def _append_validated(
        self,
        records: bytes | bytearray | memoryview,
        batches: list[tuple[int, RecordBatchHeader]],
        now: int,
        append_time: int | None,
        leader_epoch: int | None,
        from_coordinator: bool,
        marker: EndTxnMarker | None,
    ) -> AppendInfo:
        """The one locked append: data batches, or (``marker``) one COMMIT/ABORT marker batch,
        which is checked against its producer first and completes its transaction after."""
        # Producer state looks only at idempotent batches (producer id >= 0): skip it for the
        # common single non-idempotent batch (batches is never empty).
        idempotent = len(batches) > 1 or batches[0][1].producer_id >= 0
        local = self._local
        with self._lock:
            self._check_open()
            if marker is not None:
                self._transactions.check_marker(batches[0][1], marker)
            elif (
                idempotent
                and not from_coordinator
                and (duplicate := self.producer_state.check_append(h for _, h in batches))
                is not None
            ):
                return duplicate_append_info(duplicate, self._log_start_offset, local.config)
            prepared = prepare_append(
                records,
                batches,
                base_offset=local.log_end_offset,
                log_append_time_ms=append_time,
                leader_epoch=leader_epoch,
            )
            segment = local.append(prepared, now)
            if not local.config.holds_high_watermark:
                self._high_watermark = local.log_end_offset
            if marker is not None:
                self._transactions.complete(
                    segment, prepared.headers[0], marker, self._high_watermark
                )
            elif idempotent:
                self.producer_state.update(prepared.headers)
            log_start = self._log_start_offset
        return AppendInfo(
            first_offset=prepared.first_offset,
            last_offset=prepared.last_offset,
            max_timestamp=prepared.max_timestamp,
            log_append_time_ms=-1 if append_time is None else append_time,
            log_start_offset=log_start,
            batches=prepared.headers,
            size_in_bytes=prepared.size_in_bytes,
        )

    # -- transactions (storage/log_transactions.py) ---------------------------------------------
    @property
    def last_stable_offset(self) -> int:
        """The LSO: below it every transaction is decided (never above the HW)."""
        with self._lock:
            return self._transactions.last_stable_offset(self._high_watermark)

    def fetch_offsets(self) -> tuple[int, int, int, int]:
        """``(log start offset, HW, LSO, LEO)`` read together under the lock: what a fetch
        answers and checks its offset against, in one call."""
        with self._lock:
            hw = self._high_watermark
            lso = self._transactions.last_stable_offset(hw)
            return self._log_start_offset, hw, lso, self._local.log_end_offset

    def append_end_txn_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        now_ms: int | None = None,
        leader_epoch: int | None = None,
    ) -> AppendInfo:
        """Write the coordinator's COMMIT or ABORT marker (``storage.control_records``).

        As Kafka's appendEndTxnMarker: an epoch below the producer's raises
        ``InvalidProducerEpochError``, an older coordinator epoch
        ``TransactionCoordinatorFencedError`` (nothing is written then); the marker completes
        the producer's open transaction (``storage.log_transactions``). ``leader_epoch``
        stamps its partition leader epoch (as Kafka's leader does), else it stays -1."""
        now = self._clock() if now_ms is None else now_ms
        records, batches, marker = self._transactions.marker_batch(
            self.config,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            commit=commit,
            now_ms=now,
        )
        return self._append_validated(records, batches, now, None, leader_epoch, False, marker)

    def read_for_fetch(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        read_committed: bool,
        min_one_message: bool = True,
        verify_limit: int | None = None,
        last_stable_offset: int | None = None,
    ) -> FetchDataInfo:
        """Fetch's one call: batches up to the HW (READ_COMMITTED: the LSO) and, for
        READ_COMMITTED, the aborted transactions overlapping the data (``verify_limit`` as for
        ``read``; ``last_stable_offset``: the caller's value of it, read just before)."""
        lso = self.last_stable_offset if last_stable_offset is None else last_stable_offset
        info = self.read(
            start_offset,
            max_bytes,
            upper_bound=lso if read_committed else None,
            min_one_message=min_one_message,
            verify_limit=verify_limit,
        )
        if not read_committed:
            return FetchDataInfo(info, lso, None)
        if info.last_offset is None:
            return FetchDataInfo(info, lso, ())
        aborted = self.aborted_transactions(start_offset, info.last_offset + 1)
        return FetchDataInfo(info, lso, tuple(aborted))

    def aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound)`` (Kafka's
        collectAbortedTransactions, ``storage.transaction_state``): the indexes of the segment
        holding ``start_offset`` and of the later ones, until one answers complete."""
        with self._lock:
            segments = self._local.segments.from_offset(start_offset)
        return self._transactions.aborted_transactions(segments, start_offset, upper_bound)

    def roll(self, now_ms: int | None = None) -> None:
        """Start a new active segment at the LEO (no-op when the active segment is empty)."""
        with self._lock:
            self._check_open()
            self._local.roll(self._clock() if now_ms is None else now_ms)

    # -- read ----------------------------------------------------------------------------------
    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_message: bool = True,
        verify_limit: int | None = None,
    ) -> ReadInfo:
        """Whole batches from the one holding ``start_offset``, below ``upper_bound`` (the HW).

        At most ``max_bytes``, except that the first batch is returned whole even if larger when
        ``min_one_message``. ``start_offset`` outside ``[log_start_offset, log_end_offset]``
        raises ``OffsetOutOfRangeError``; at or past the bound the result is empty.
        Raises ``CorruptRecordError`` when a batch header on disk is damaged, and
        ``CheckDeferred`` when the batches hold more than ``verify_limit`` bytes nobody has
        CRC-checked since start-up (``storage.lazy_crc``: repeat the read in a worker thread).
        """
        with self._lock:
            self._check_open()
            log_start = self._log_start_offset
            leo = self._local.log_end_offset
            hw = self._high_watermark
            snapshot = self._local.snapshot(start_offset)
        if start_offset < log_start or start_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside [{log_start}, {leo}] of "
                f"{self.topic}-{self.partition}"
            )
        bound = hw if upper_bound is None else min(upper_bound, leo)
        regions, total, first_offset, last_offset = collect_regions(
            snapshot, start_offset, bound, max_bytes, min_one_message, verify_limit
        )
        return ReadInfo(
            regions=tuple(regions),
            size_in_bytes=total,
            high_watermark=hw,
            log_start_offset=log_start,
            log_end_offset=leo,
            first_offset=first_offset,
            last_offset=last_offset,
        )

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp_ms``
        (Kafka's fetchOffsetByTimestamp, ``storage.timestamps``), up to the LEO (the broker
        filters by HW/LSO as Kafka's Partition does); None when no record qualifies."""
        with self._lock:
            log_start = self._log_start_offset
            snapshot = self._local.snapshot()
        return find_offset_for_timestamp(snapshot, timestamp_ms, log_start)

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record holding the largest timestamp (-3, as
        Kafka >= 3.8, ``storage.timestamps``); None for an empty log."""
        with self._lock:
            log_start = self._log_start_offset
            snapshot = self._local.snapshot()
        return find_max_timestamp(snapshot, log_start)

    # -- flush ---------------------------------------------------------------------------------
    def needs_flush(self, now_ms: int) -> bool:
        """True when the flush policy (flush.messages / flush.ms) asks for an fsync now."""
        return self._local.needs_flush(now_ms)

    def flush(self, now_ms: int | None = None) -> int:
        """fsync everything appended so far; advance the recovery point (and held HW).

        Call from a worker thread. Concurrent callers share fsyncs (group commit). Returns the
        high watermark after the flush. Raises ``KafkaStorageError`` if an fsync fails.
        """
        local = self._local
        wanted = local.log_end_offset
        with self._flush_lock:
            if local.recovery_point >= wanted and not local.dir_dirty:
                return self._high_watermark
            with self._lock:
                target = local.log_end_offset
                work = local.take_dirty()
            try:
                local.sync(work)
                self.producer_state.flush_snapshots()
            except (KafkaStorageError, OSError) as exc:
                with self._lock:
                    local.restore_dirty(work)
                if isinstance(exc, KafkaStorageError):
                    raise
                raise KafkaStorageError(f"fsync of {self.dir} failed: {exc}") from exc
            with self._lock:
                leo = local.log_end_offset
                if target > local.recovery_point:
                    local.recovery_point = min(target, leo)
                local.last_flush_ms = self._clock() if now_ms is None else now_ms
                if self.config.holds_high_watermark:
                    self._high_watermark = max(self._high_watermark, min(target, leo))
                return self._high_watermark

    # -- configuration -------------------------------------------------------------------------
    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = self._local.config = config
            if not config.holds_high_watermark:
                self._high_watermark = self._local.log_end_offset

    # -- log start, truncation -----------------------------------------------------------------
    def delete_records(self, offset: int) -> int:
        """Raise the log start offset (DeleteRecords); -1 means the HW. Returns the new start.

        Segments wholly below it are deleted by the next ``apply_retention``.
        """
        with self._lock:
            target = self._high_watermark if offset == -1 else offset
            if target < 0 or target > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records of {self.topic}-{self.partition} up to {offset}: "
                    f"high watermark is {self._high_watermark}"
                )
            if target > self._log_start_offset:
                self._log_start_offset = target
                self.producer_state.on_log_start_offset_incremented(target)
            return self._log_start_offset

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding offsets >= ``offset`` (whole batches, as Kafka).

        Below the log start offset the log restarts empty at ``offset``.
        """
        local = self._local
        with self._lock:
            self._check_open()
            if offset >= local.log_end_offset:
                return
            if offset < self._log_start_offset or offset < local.segments[0].base_offset:
                self._truncate_fully_locked(max(offset, 0))
                return
            local.truncate_to(offset, self._clock())
            self._after_truncation_locked()

    def _truncate_fully_locked(self, new_offset: int) -> None:
        self._local.truncate_fully(new_offset, self._clock())
        self._log_start_offset = new_offset
        self._after_truncation_locked()

    def _after_truncation_locked(self) -> None:
        leo = self._local.log_end_offset
        self._high_watermark = min(self._high_watermark, leo)
        self._log_start_offset = min(self._log_start_offset, leo)
        self.producer_state.truncate_and_reload(self._local.segments, self._log_start_offset)

    # -- retention -----------------------------------------------------------------------------
    def apply_retention(self, now_ms: int) -> int:
        """Delete old segments (retention.ms, retention.bytes, below the log start offset).

        As Kafka's deleteOldSegments: only a prefix of segments wholly below the HW; an expired
        non-empty active segment is rolled first. Files are renamed ``.deleted`` and removed by
        ``delete_expired_files`` after ``file.delete.delay.ms``. Returns segments deleted.
        """
        deleted = 0
        config = self.config
        if config.delete_enabled:
            if config.retention_ms >= 0:
                deleted += self._delete_old_segments(retention_ms_breached(config, now_ms), now_ms)
            if config.retention_bytes >= 0:
                with self._lock:
                    total = self._local.size_in_bytes
                deleted += self._delete_old_segments(retention_size_breached(config, total), now_ms)
        deleted += self._delete_old_segments(log_start_breached(self._log_start_offset), now_ms)
        with self._lock:
            self.producer_state.maintain(
                now_ms, self._local.segments.base_offsets(), self._local.recovery_point
            )
        return deleted

    def _delete_old_segments(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], now_ms: int
    ) -> int:
        local = self._local
        with self._lock:
            if self._closed:
                return 0
            count = local.deletable_count(predicate, self._high_watermark)
            if not count:
                return 0
            local.delete_first(count, now_ms)
            self._log_start_offset = max(self._log_start_offset, local.segments[0].base_offset)
            self.producer_state.on_log_start_offset_incremented(self._log_start_offset)
        logger.info(
            "deleted %d segment(s) of %s-%s; log start offset is now %d",
            count,
            self.topic,
            self.partition,
            self._log_start_offset,
        )
        return count

    def replace_segments(
        self,
        old: list[LogSegment],
        sizes: list[int],
        make_new: Callable[[], LogSegment],
        now_ms: int,
    ) -> LogSegment | None:
        """Put the segment ``make_new()`` returns in place of ``old`` (Kafka's replaceSegments,
        ``LocalLog.replace``), under the partition lock; None when the log is closed or no
        longer holds ``old`` as it was."""
        with self._lock:
            if self._closed:
                return None
            return self._local.replace(old, sizes, make_new, now_ms)

    def producer_ids_by_last_offset(self) -> dict[int, int]:
        """Producer id -> last data offset, for every producer the log's state knows."""
        with self._lock:
            return self.producer_state.last_data_offsets()

    def delete_expired_files(self, now_ms: int) -> None:
        """Remove ``.deleted`` files older than ``file.delete.delay.ms``."""
        with self._lock:
            due = self._local.take_expired(now_ms)
        for segment in due:
            segment.delete_files()

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """Clean close: final time-index entry and trimmed indexes, fsync, close files."""
        local = self._local
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return
                segments = local.seal_active()
                self.producer_state.take_snapshot(local.log_end_offset)
            local.flush_all(segments)
            with self._lock:
                self._closed = True
                local.recovery_point = local.log_end_offset
                local.close()

    def close_without_flush(self) -> None:
        """Close every file without fsync (the partition is being deleted)."""
        with self._flush_lock, self._lock:
            self._closed = True
            self._local.close()

    @property
    def closed(self) -> bool:
        return self._closed
