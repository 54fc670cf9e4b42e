"""The transaction part of a partition log: markers, ``.txnindex`` entries, LSO, aborted look-up.

``LogTransactions`` is owned by one ``PartitionLog`` and called by it (Kafka keeps this in
UnifiedLog/LocalLog); it never sees the log's fields: the log hands it the producer state
once, and the segment, header or segments each call needs.

- A COMMIT/ABORT marker (``storage.control_records``) is built and validated
  (``marker_batch``), checked against its producer under the log's lock before the log's one
  append writes it (``check_marker``: Kafka's appendEndTxnMarker, an epoch below the
  producer's is INVALID_PRODUCER_EPOCH, an older coordinator epoch
  TRANSACTION_COORDINATOR_FENCED), and completes the producer's open transaction once written
  (``complete``); an aborted one gets its ``AbortedTxn`` entry in the ``.txnindex`` of the
  segment holding the marker, with the LSO as it is once the marker is written.
- During the producer-state replay at load, the same entries are rebuilt (``rebuild_index``).
- ``aborted_transactions``: the one look-up (``storage.transaction_state
  .collect_aborted_transactions``) over the log's segments from the one holding the start.

Threading: every method but ``marker_batch`` and ``aborted_transactions`` runs under the
partition lock (the log's caller holds it); ``aborted_transactions`` reads a snapshot of the
segment list from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from .batch import RecordBatchHeader, validate_records
from .config import LogConfig
from .control_records import ABORT, COMMIT, EndTxnMarker, encode_end_txn_marker
from .log_segments import LogSegments
from .producer_state import ProducerStateManager
from .segment import LogSegment
from .transaction_index import AbortedTxn
from .transaction_state import CompletedTxn, collect_aborted_transactions

__all__ = ["LogTransactions", "MarkerBatch"]

MarkerBatch = tuple[bytes, list[tuple[int, RecordBatchHeader]], EndTxnMarker]


class LogTransactions:
    """Transactions of one partition log (its producer state's open and completed ones)."""

    __slots__ = ("_state",)

    def __init__(self, producer_state: ProducerStateManager) -> None:
        self._state = producer_state

    def last_stable_offset(self, high_watermark: int) -> int:
        return self._state.transactions.last_stable_offset(high_watermark)

    @staticmethod
    def marker_batch(
        config: LogConfig,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        now_ms: int,
    ) -> MarkerBatch:
        """The marker's records, validated as an append's, and the marker they hold."""
        records = encode_end_txn_marker(
            commit=commit,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp_ms=now_ms,
        )
        batches = validate_records(
            records,
            max_message_bytes=max(config.max_message_bytes, len(records)),
            segment_bytes=config.segment_bytes,
            allow_control=True,
        )
        return records, batches, EndTxnMarker(COMMIT if commit else ABORT, coordinator_epoch)

    def check_marker(self, header: RecordBatchHeader, marker: EndTxnMarker) -> None:
        """Raise before anything is written when the producer or coordinator is fenced."""
        self._state.check_marker(
            header.producer_id, header.producer_epoch, marker.coordinator_epoch
        )

    def complete(
        self,
        segment: LogSegment,
        header: RecordBatchHeader,
        marker: EndTxnMarker,
        high_watermark: int,
    ) -> None:
        """The marker batch ``header`` was written to ``segment``."""
        transactions = self._state.transactions
        completed = self._state.update_marker(header, marker)
        if completed.is_aborted:
            segment.txn_index.append(transactions.aborted_entry(completed))
        transactions.first_unstable_offset(high_watermark)  # forget visible ones

    def rebuild_index(self, segments: LogSegments, completed: CompletedTxn) -> None:
        """A transaction the replay completed: an aborted one's entry goes to the segment
        holding its marker (an entry the index has already is skipped)."""
        if completed.is_aborted:
            segment = segments[segments.floor_index(completed.last_offset)]
            segment.txn_index.append(self._state.transactions.aborted_entry(completed))

    @staticmethod
    def aborted_transactions(
        segments: Sequence[LogSegment], start_offset: int, upper_bound: int
    ) -> list[AbortedTxn]:
        """``segments``: from the one holding ``start_offset`` on (``LogSegments
        .from_offset``). Empty indexes (most segments) are left out before the look-up: a
        catching-up read_committed fetch passes every later segment."""
        indexes = [index for s in segments if (index := s.txn_index).entries]
        if not indexes:
            return []
        return collect_aborted_transactions(indexes, start_offset, upper_bound)
