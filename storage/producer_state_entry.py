"""A producer's entry in a partition's producer state (Kafka's ProducerStateEntry, BatchMetadata).

``ProducerStateEntry`` is what ``storage.producer_state.ProducerStateManager`` keeps for one
producer id: its epoch, the metadata of its last five batches (``BatchMetadata``: last sequence,
last offset, offset delta, max timestamp; the first sequence and first offset follow from the
delta), the coordinator epoch of its last marker and the first offset of its open transaction.
``apply_batch`` moves an entry past an accepted batch; ``find_duplicate`` recognises a retry.
An entry round-trips through a snapshot file's ``SnapshotEntry`` (``storage.producer_snapshot``),
which keeps only the last batch.

Threading: entries are changed in place by the manager only, under the partition lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from .batch import (
    CONTROL_MASK,
    NO_SEQUENCE,
    TRANSACTIONAL_MASK,
    RecordBatchHeader,
    decrement_sequence,
    increment_sequence,
)
from .producer_snapshot import SnapshotEntry

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "ProducerStateEntry",
    "apply_batch",
]

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One cached batch of a producer (Kafka's BatchMetadata)."""

    last_sequence: int
    last_offset: int
    offset_delta: int  # last_offset - first_offset
    timestamp: int  # the batch's max timestamp

    @property
    def first_sequence(self) -> int:
        return decrement_sequence(self.last_sequence, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """A producer's epoch and its last batches, oldest first (at most five).

    Mutable state, as Kafka's ProducerStateEntry: only the manager changes it (in ``update``,
    after a write); readers of ``ProducerStateManager.producers`` must not. Updating in place
    keeps the append path cheap (a frozen dataclass costs a micro-second per construction).
    """

    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...] = ()
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """The cached batch with the same epoch and exact sequence range, if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        delta = header.last_offset_delta
        last = increment_sequence(header.base_sequence, delta)
        for batch in self.batches:  # same last sequence and delta: same first sequence
            if batch.last_sequence == last and batch.offset_delta == delta:
                return batch
        return None

    def to_snapshot_entry(self) -> SnapshotEntry:
        last = self.batches[-1] if self.batches else None
        return SnapshotEntry(
            producer_id=self.producer_id,
            epoch=self.producer_epoch,
            last_sequence=last.last_sequence if last else NO_SEQUENCE,
            last_offset=last.last_offset if last else -1,
            offset_delta=last.offset_delta if last else 0,
            timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=self.current_txn_first_offset,
        )

    @staticmethod
    def from_snapshot_entry(entry: SnapshotEntry) -> ProducerStateEntry:
        batches: tuple[BatchMetadata, ...] = ()
        if entry.last_offset >= 0:
            batches = (
                BatchMetadata(
                    entry.last_sequence, entry.last_offset, entry.offset_delta, entry.timestamp
                ),
            )
        return ProducerStateEntry(
            producer_id=entry.producer_id,
            producer_epoch=entry.epoch,
            batches=batches,
            last_timestamp=entry.timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_first_offset=entry.current_txn_first_offset,
        )


def apply_batch(entry: ProducerStateEntry | None, header: RecordBatchHeader) -> ProducerStateEntry:
    """``entry`` (updated in place, or a new one) after the accepted batch ``header``."""
    epoch = header.producer_epoch
    if entry is None:
        entry = ProducerStateEntry(header.producer_id, epoch)
    elif entry.producer_epoch != epoch:
        entry.producer_epoch = epoch
        entry.batches = ()
    # A control batch (transaction marker) only moves the epoch here; the transaction it ends
    # is completed by ``ProducerStateManager.update_marker``, which reads its record.
    if not header.attributes & CONTROL_MASK:
        delta = header.last_offset_delta
        batch = BatchMetadata(
            increment_sequence(header.base_sequence, delta),
            header.base_offset + delta,
            delta,
            header.max_timestamp,
        )
        kept = entry.batches
        if len(kept) >= NUM_BATCHES_TO_RETAIN:
            kept = kept[1 - NUM_BATCHES_TO_RETAIN :]
        entry.batches = (*kept, batch)
        if not header.attributes & TRANSACTIONAL_MASK:
            entry.current_txn_first_offset = -1
        elif entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset
    entry.last_timestamp = header.max_timestamp
    return entry
