"""Idempotent-producer state of one partition: validation, duplicates, snapshots, rebuild.

What is kept (Kafka's ProducerStateManager): for each producer id seen in the partition, a
``ProducerStateEntry`` (``storage.producer_state_entry``): its current epoch and the metadata of
its last five batches. Batches with ``producer_id < 0`` (plain producers) are ignored everywhere.

Transactions: a transactional batch opens the producer's transaction (its first offset is kept
in the entry and in snapshots); a marker written by the coordinator (``update_marker``, after
``check_marker``) completes it. Open transactions and the last stable offset are tracked in
``storage/transaction_state.py``; a non-transactional batch of a producer whose transaction is
open is INVALID_TXN_STATE, as in Kafka.

On disk: ``<offset>.snapshot`` files in the partition directory (format and crash behaviour in
``storage/producer_snapshot.py``). The file named ``N`` is the state after all batches below
``N``. Snapshots are taken when a segment rolls (named after the new segment's base offset;
written without fsync, fsynced by the next flush, as Kafka does), at clean shutdown (named after
the log end offset, fsynced) and after a load that replayed batches. No snapshot is ever
needed for correctness: without one the state is rebuilt from the log start.

The append path (the caller holds the partition lock):

1. ``check_append(headers)`` BEFORE anything is written. A batch whose producer, epoch and exact
   sequence range match one of the five cached batches is a retry: its ``BatchMetadata`` is
   returned and the caller writes nothing and answers success with the offsets of the cached
   batch. Otherwise every batch is validated in order (a later batch of the same producer is
   checked against the earlier one):

   - epoch below the producer's current epoch -> INVALID_PRODUCER_EPOCH;
   - a new (higher) epoch must start at sequence 0 -> else OUT_OF_ORDER_SEQUENCE_NUMBER;
   - same epoch: ``base_sequence`` must be ``last_sequence + 1`` (``Int.MAX`` wraps to 0)
     -> else OUT_OF_ORDER_SEQUENCE_NUMBER;
   - an unknown producer (no entry, e.g. expired or never seen) may start at any sequence
     (Kafka >= 2.5, KIP-360: the broker no longer answers UNKNOWN_PRODUCER_ID);
   - ``base_sequence < 0`` on a batch with a producer id -> INVALID_RECORD.

   Nothing changes in memory on failure.
2. ``update(headers)`` AFTER the write, with the headers as written (offsets assigned).

Loading (``load``): snapshots above the log end offset or below the log start offset are
deleted; the latest remaining snapshot is read (a corrupt one is deleted and the next older one
tried); entries already expired or whose last offset is below the log start are dropped; then
the batch headers from the snapshot offset to the log end are replayed (no records are decoded,
no validation: what is in the log was accepted once). After an unclean shutdown this yields the
state the broker had when it died, for every batch that survived log recovery; a retry of a
batch written just before a crash is still recognised. Kafka behaviour kept: a snapshot holds
only each producer's last batch, so after a load the cache holds that batch plus the (at most
five) batches replayed after the snapshot; an older in-flight retry then gets
OUT_OF_ORDER_SEQUENCE_NUMBER (never a duplicate write). ``truncate_and_reload`` does the same
after the log was truncated, without taking a snapshot.

Periodic work (``maintain``, from ``PartitionLog.apply_retention``): producers whose last
batch's max timestamp is ``producer.id.expiration.ms`` or more ago are forgotten (Kafka's rule),
and snapshots are deleted below Kafka's ``minSnapshotsOffsetToRetain``: the snapshots of the last
two segments and all from the segment holding the recovery point on are kept.
Kafka divergence: Kafka checks expiry every ``producer.id.expiration.check.interval.ms`` (10
min); tidelog at each retention check (``log.retention.check.interval.ms``, 5 min).

Log start (``on_log_start_offset_incremented``; retention, DeleteRecords): cached batches below
the new log start are dropped, producers left with none, and snapshots below it.
Kafka divergence: current Kafka keeps such producers in memory until they expire (it only
deletes the snapshots); tidelog drops them as older Kafka releases did (``truncateHead``), so
the live state and the state rebuilt after a restart agree. A retry of a batch whose data was
already deleted is then accepted as new data.

Threading: not thread-safe; the owning PartitionLog calls it under its partition lock (or
before the log is shared), except ``flush_snapshots``, which its flusher calls from a worker
thread. ``clock`` returns epoch milliseconds.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from .batch import (
    CONTROL_MASK,
    INT32_MAX,
    NO_SEQUENCE,
    TRANSACTIONAL_MASK,
    RecordBatchHeader,
    decrement_sequence,
    increment_sequence,
)
from .config import LogConfig
from .control_records import EndTxnMarker
from .errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from .info import AppendInfo
from .producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    delete_snapshot,
    encode_snapshot,
    fsync_file_and_directory,
    list_snapshots,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)
from .producer_state_entry import (
    NO_PRODUCER_EPOCH,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
    apply_batch,
)
from .transaction_state import CompletedTxn, OngoingTransactions, segment_marker_reader

__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "InvalidProducerEpochError",
    "OutOfOrderSequenceError",
    "ProducerStateEntry",
    "ProducerStateManager",
    "decrement_sequence",
    "duplicate_append_info",
    "increment_sequence",
    "segment_scanner",
]

logger = logging.getLogger("tidelog.storage")

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class ProducerStateManager:
    """The producer state of one partition and its snapshot files."""

    def __init__(
        self,
        directory: Path,
        clock: Callable[[], int],
        producer_id_expiration_ms: int | None = None,
    ) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = (
            DEFAULT_PRODUCER_ID_EXPIRATION_MS
            if producer_id_expiration_ms is None
            else producer_id_expiration_ms
        )
        self._clock = clock
        self._producers: dict[int, ProducerStateEntry] = {}
        self._unflushed: list[Path] = []
        #: Open transactions and the last stable offset (``storage/transaction_state.py``).
        self.transactions = OngoingTransactions()

    # -- reading -------------------------------------------------------------------------------
    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view of the active producers by id."""
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def last_data_offsets(self) -> dict[int, int]:
        """Producer id -> last data offset, for every producer known."""
        return {pid: entry.last_data_offset for pid, entry in self._producers.items()}

    # -- the append path -----------------------------------------------------------------------
    def check_append(self, headers: Iterable[RecordBatchHeader]) -> BatchMetadata | None:
        """Validate a client append before it is written (see the module docstring).

        Returns the cached ``BatchMetadata`` when the append is a retry of a written batch
        (the caller writes nothing and answers with its offsets), else None. Raises
        ``OutOfOrderSequenceError``, ``InvalidProducerEpochError`` or ``InvalidRecordError``.

        Kafka behaviour kept: a request whose records hold several batches is answered as a
        duplicate as soon as one of them is (clients send one batch per partition).
        """
        pending: dict[int, tuple[int, int]] | None = None  # producer id -> (epoch, last seq)
        producers = self._producers
        for header in headers:
            producer_id = header.producer_id
            if producer_id < 0:
                continue
            if pending is None:
                pending = {}
            current = producers.get(producer_id)
            earlier = pending.get(producer_id)
            if current is not None:
                first_sequence = header.base_sequence
                if (
                    earlier is None
                    and first_sequence > 0
                    and first_sequence == current.last_sequence + 1
                    and header.producer_epoch == current.producer_epoch
                    and (
                        current.current_txn_first_offset < 0
                        or header.attributes & TRANSACTIONAL_MASK
                    )
                ):
                    # the common case: the next batch in sequence (a retry cannot start above
                    # the last sequence written without 2**31 sequences in five batches)
                    last = increment_sequence(first_sequence, header.last_offset_delta)
                    pending[producer_id] = (header.producer_epoch, last)
                    continue
                duplicate = current.find_duplicate(header)
                if duplicate is not None:
                    return duplicate
            pending[producer_id] = self._check_batch(header, current, earlier)
        return None

    @staticmethod
    def _check_batch(
        header: RecordBatchHeader,
        current: ProducerStateEntry | None,
        pending: tuple[int, int] | None,
    ) -> tuple[int, int]:
        producer_id = header.producer_id
        epoch = header.producer_epoch
        first_sequence = header.base_sequence
        if first_sequence < 0:
            raise InvalidRecordError(
                f"batch of producer {producer_id} has no sequence number ({first_sequence})"
            )
        current_epoch = current.producer_epoch if current is not None else NO_PRODUCER_EPOCH
        updated_epoch = pending[0] if pending is not None else current_epoch
        if (
            current is not None
            and current.current_txn_first_offset >= 0
            and not header.attributes & TRANSACTIONAL_MASK
            and epoch == current_epoch
        ):
            raise InvalidTxnStateError(
                f"non-transactional batch of producer {producer_id} while its transaction "
                f"from offset {current.current_txn_first_offset} is open"
            )
        if epoch < updated_epoch:
            raise InvalidProducerEpochError(
                f"epoch {epoch} of producer {producer_id} is below its current epoch "
                f"{updated_epoch}"
            )
        if epoch != updated_epoch:
            if first_sequence != 0 and updated_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"new epoch {epoch} of producer {producer_id} starts at sequence "
                    f"{first_sequence}, not 0 (current epoch {updated_epoch})"
                )
        else:
            if pending is not None:
                last_sequence = pending[1]
            elif current is not None and epoch == current_epoch:
                last_sequence = current.last_sequence
            else:
                last_sequence = NO_SEQUENCE
            if current_epoch != NO_PRODUCER_EPOCH and not _in_sequence(
                last_sequence, first_sequence
            ):
                raise OutOfOrderSequenceError(
                    f"out of order sequence for producer {producer_id} (epoch {epoch}): "
                    f"got {first_sequence}, expected {increment_sequence(last_sequence, 1)}"
                )
        return epoch, increment_sequence(first_sequence, header.last_offset_delta)

    def update(self, headers: Iterable[RecordBatchHeader]) -> None:
        """Record data batches as written (offsets assigned); also used to replay the log.

        Control batches go through ``update_marker`` (their record says what they end)."""
        producers = self._producers
        for header in headers:
            producer_id = header.producer_id
            if producer_id >= 0:
                entry = producers[producer_id] = apply_batch(producers.get(producer_id), header)
                if entry.current_txn_first_offset >= 0:
                    self.transactions.begin(producer_id, entry.current_txn_first_offset)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Before a marker is written (Kafka's appendEndTxnMarker checks): raise
        ``InvalidProducerEpochError`` for an epoch below the producer's,
        ``TransactionCoordinatorFencedError`` for an older coordinator epoch."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"marker epoch {producer_epoch} of producer {producer_id} is below its current "
                f"epoch {entry.producer_epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"below {entry.coordinator_epoch}"
            )

    def update_marker(self, header: RecordBatchHeader, marker: EndTxnMarker) -> CompletedTxn:
        """Apply a written marker batch: its producer's open transaction is completed."""
        producer_id = header.producer_id
        entry = self._producers[producer_id] = apply_batch(self._producers.get(producer_id), header)
        first = entry.current_txn_first_offset
        completed = CompletedTxn(
            producer_id,
            first if first >= 0 else header.base_offset,
            header.base_offset,
            not marker.is_commit,
        )
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = marker.coordinator_epoch
        self.transactions.complete(completed)
        return completed

    # -- expiry and log start ------------------------------------------------------------------
    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; return how many."""
        now = self._clock() if now_ms is None else now_ms
        expired = [pid for pid, e in self._producers.items() if self._is_expired(e, now)]
        for pid in expired:
            del self._producers[pid]
            self.transactions.forget(pid)
        return len(expired)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Drop what lies below a new log start: cached batches, producers, snapshots."""
        for pid, entry in list(self._producers.items()):
            if entry.last_data_offset < log_start_offset:
                del self._producers[pid]
                self.transactions.forget(pid)
            elif entry.batches[0].last_offset < log_start_offset:
                kept = tuple(b for b in entry.batches if b.last_offset >= log_start_offset)
                entry.batches = kept
        self.delete_snapshots_before(log_start_offset)

    # -- snapshots -----------------------------------------------------------------------------
    def snapshot_offsets(self) -> list[int]:
        return sorted(list_snapshots(self.directory))

    def take_snapshot(self, offset: int, *, sync: bool = True) -> Path | None:
        """Write ``<offset>.snapshot`` with the current state, unless it exists already.

        ``offset`` must be the log end offset (all batches below it applied). With
        ``sync=False`` the file is renamed into place without fsync; ``flush_snapshots`` (the
        log's flusher, in a worker thread) fsyncs it later, as Kafka does for the snapshot of a
        roll. Until then a power loss may lose it: the loader then falls back (see
        ``storage/producer_snapshot.py``).

        A snapshot only saves replay time, so an OSError (disk full...) is logged, not raised:
        the append or close that asked for it goes on. ``sync=True`` also fsyncs the snapshots
        still waiting for ``flush_snapshots``.
        """
        path = snapshot_path(self.directory, offset)
        written: Path | None = None
        try:
            if not path.exists():
                written = write_snapshot(
                    self.directory, offset, self._snapshot_entries(), sync=sync
                )
                if not sync:
                    self._unflushed.append(written)
            if sync:
                self.flush_snapshots()
        except OSError as exc:
            logger.warning("could not write producer snapshot %s: %s", path, exc)
        return written

    def flush_snapshots(self) -> None:
        """fsync the snapshots written with ``sync=False`` since the last call (and the dir).

        May run in another thread than ``take_snapshot``: the list swap is safe under the GIL.
        """
        pending = self._unflushed
        self._unflushed = []
        for path in pending:
            fsync_file_and_directory(path)

    def maintain(self, now_ms: int, segment_bases: Sequence[int], recovery_point: int) -> None:
        """Periodic work: expire idle producers; keep only the snapshots Kafka keeps.

        Kafka's minSnapshotsOffsetToRetain: snapshots of the last two segments, and every
        snapshot from the segment holding the recovery point on (recovery replays from there).
        """
        self.remove_expired_producers(now_ms)
        if not segment_bases:
            return
        two_segments = segment_bases[-2] if len(segment_bases) > 1 else segment_bases[-1]
        below = bisect_left(segment_bases, recovery_point) - 1
        recovery_base = segment_bases[below] if below >= 0 else recovery_point
        self.delete_snapshots_before(min(two_segments, recovery_base))

    def delete_snapshots_before(self, offset: int) -> None:
        for snap_offset, path in list_snapshots(self.directory).items():
            if snap_offset < offset:
                delete_snapshot(path)

    # -- loading -------------------------------------------------------------------------------
    def load(
        self,
        *,
        log_start_offset: int,
        log_end_offset: int,
        scan: Callable[[int], Iterable[RecordBatchHeader]],
        take_snapshot: bool = True,
        read_marker: Callable[[RecordBatchHeader], EndTxnMarker] | None = None,
        on_completed: Callable[[CompletedTxn], None] | None = None,
        replay_from: int | None = None,
        names: Collection[str] | None = None,
    ) -> int:
        """Rebuild the state from the latest usable snapshot plus the log after it.

        ``scan(offset)`` yields, in offset order, the headers of the log's batches from the one
        holding ``offset`` to the end (a batch straddling ``offset`` is skipped here). Returns
        the number of batches replayed. Ends with a snapshot at ``log_end_offset`` (unless
        ``take_snapshot`` is False), so the next start need not replay them again.
        ``read_marker`` reads a control batch's marker (without it a marker counts as ABORT
        with coordinator epoch -1); ``on_completed`` sees every transaction the replay
        completes (the log rebuilds ``.txnindex`` files from them); snapshots above
        ``replay_from`` are not used, so that the replay covers every offset from there on; they
        are deleted, except one at ``log_end_offset`` holding exactly the replayed state, which
        is kept instead of being written again. ``names``: the directory's file names when the
        caller has just listed it (saves a listing per partition at start-up).
        """
        self._producers.clear()
        self.transactions.clear()
        now = self._clock()
        snapshots = list_snapshots(self.directory, names)
        at_end: Path | None = None  # a snapshot at the log end the replay may find still right
        for offset, path in list(snapshots.items()):
            if offset > log_end_offset or offset < log_start_offset:
                delete_snapshot(path)
                del snapshots[offset]
            elif replay_from is not None and offset > replay_from:
                del snapshots[offset]
                if offset == log_end_offset and take_snapshot:
                    at_end = path
                else:
                    delete_snapshot(path)
        start = log_start_offset
        while snapshots:
            offset = max(snapshots)
            path = snapshots.pop(offset)
            try:
                entries = read_snapshot(path)
            except CorruptSnapshotError as exc:
                logger.warning("deleting corrupt producer snapshot: %s", exc)
                delete_snapshot(path)
                continue
            for item in entries:
                entry = ProducerStateEntry.from_snapshot_entry(item)
                if not self._is_expired(entry, now) and entry.last_data_offset >= log_start_offset:
                    self._producers[entry.producer_id] = entry
                    if entry.current_txn_first_offset >= 0:
                        self.transactions.begin(entry.producer_id, entry.current_txn_first_offset)
            start = offset
            break
        replayed = 0
        if start < log_end_offset:
            for header in scan(start):
                if header.base_offset >= log_end_offset:
                    break
                if header.last_offset < start:
                    continue
                if header.attributes & CONTROL_MASK and header.producer_id >= 0:
                    marker = read_marker(header) if read_marker else EndTxnMarker(0, -1)
                    completed = self.update_marker(header, marker)
                    if on_completed is not None:
                        on_completed(completed)
                else:
                    self.update((header,))
                replayed += 1
            self.remove_expired_producers(now)
        if take_snapshot and log_end_offset > start:
            if at_end is not None and self._snapshot_matches(at_end):
                # Recovery replayed the log up to a snapshot that already says the same (a
                # SIGKILL after a clean start): no rewrite, only the fsync a new one would get.
                self._unflushed.append(at_end)
            else:
                if at_end is not None:
                    delete_snapshot(at_end)
                self.take_snapshot(log_end_offset, sync=False)
        elif at_end is not None:
            delete_snapshot(at_end)
        return replayed

    def _snapshot_entries(self) -> list[SnapshotEntry]:
        return [self._producers[p].to_snapshot_entry() for p in sorted(self._producers)]

    def _snapshot_matches(self, path: Path) -> bool:
        """True when ``path`` holds exactly the bytes a snapshot of the state now would."""
        try:
            with open(path, "rb") as f:
                found = f.read()
        except OSError:
            return False
        return found == encode_snapshot(self._snapshot_entries())

    def load_from_segments(
        self,
        segments: Sequence[_Segment],
        log_start_offset: int,
        *,
        on_completed: Callable[[CompletedTxn], None] | None = None,
        replay_from: int | None = None,
        names: Collection[str] | None = None,
        take_snapshot: bool = True,
    ) -> int:
        """``load`` over a log's segments (up to the last one's next offset)."""
        return self.load(
            log_start_offset=log_start_offset,
            log_end_offset=segments[-1].next_offset,
            scan=segment_scanner(segments),
            take_snapshot=take_snapshot,
            read_marker=segment_marker_reader(segments),
            on_completed=on_completed,
            replay_from=replay_from,
            names=names,
        )

    def truncate_and_reload(self, segments: Sequence[_Segment], log_start_offset: int) -> int:
        """After the log was truncated: the state as of its new end (Kafka's truncateAndReload):
        snapshots above the new end are deleted, the rest replayed; no new snapshot."""
        return self.load_from_segments(segments, log_start_offset, take_snapshot=False)


class _Segment(Protocol):
    @property
    def base_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    def read_headers(
        self, start_position: int, end_position: int
    ) -> Iterator[tuple[int, RecordBatchHeader]]: ...
    def translate_offset(
        self, offset: int, end_position: int, start_position: int = 0
    ) -> tuple[int, RecordBatchHeader] | None: ...
    def pread(self, position: int, length: int) -> bytes: ...


def segment_scanner(
    segments: Sequence[_Segment],
) -> Callable[[int], Iterator[RecordBatchHeader]]:
    """A ``scan`` for ``ProducerStateManager.load`` over a log's segments (headers only)."""

    def scan(offset: int) -> Iterator[RecordBatchHeader]:
        bases = [s.base_offset for s in segments]
        first = max(bisect_right(bases, offset) - 1, 0)
        for segment in segments[first:]:
            size = segment.size
            found = segment.translate_offset(offset, size)
            if found is None:
                continue
            for _, header in segment.read_headers(found[0], size):
                yield header

    return scan


def duplicate_append_info(
    duplicate: BatchMetadata, log_start_offset: int, config: LogConfig
) -> AppendInfo:
    """The answer to a retried batch: its original offsets; nothing was written.

    Kafka divergence: Kafka reports the cached batch's max timestamp as ``log_append_time`` even
    on CreateTime topics; tidelog reports it only on LogAppendTime topics (-1 otherwise), as for
    a first write.
    """
    return AppendInfo(
        first_offset=duplicate.first_offset,
        last_offset=duplicate.last_offset,
        max_timestamp=duplicate.timestamp,
        log_append_time_ms=duplicate.timestamp if config.log_append_time else -1,
        log_start_offset=log_start_offset,
        batches=(),
    )
