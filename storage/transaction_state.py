"""Transactions in a partition: ongoing transactions, completed ones, the last stable offset.

Kafka's ProducerStateManager keeps, besides each producer's sequence state, the transactions
that are open in the partition: a transactional data batch of a producer with no open
transaction opens one at the batch's base offset (``ProducerStateEntry
.current_txn_first_offset``, kept in producer snapshots); the producer's next COMMIT or ABORT
marker (``storage.control_records``) completes it as a ``CompletedTxn`` (first offset, marker
offset, aborted or not).

The last stable offset (LSO) is the smallest of: the high watermark, the first offset of every
open transaction, and the first offset of every completed transaction whose marker is not yet
below the high watermark (Kafka's unreplicated transactions: on one node, a marker the flush
policy has not yet made visible). Readers with isolation level READ_COMMITTED see data below
the LSO only.

An aborted transaction becomes an ``AbortedTxn`` entry (``storage.transaction_index``) in the
segment holding its marker, with the LSO as it is once the marker is written (Kafka's
``lastStableOffset(completedTxn)``: the first offset of the earliest *other* open transaction,
else the marker offset + 1; ``OngoingTransactions.aborted_entry``).

``collect_aborted_transactions`` is the one look-up of aborted transactions over ``.txnindex``
files (Kafka's LocalLog.collectAbortedTransactions): the partition log's (Fetch, the cleaner)
and the Spark file source's (``analytics.logdir``) go through it.

Threading: ``OngoingTransactions`` is owned by ProducerStateManager (the partition lock);
``collect_aborted_transactions`` reads indexes from any thread.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .batch import RecordBatchHeader
from .control_records import EndTxnMarker, read_end_txn_marker
from .transaction_index import AbortedTxn, TxnIndexSearchResult

__all__ = [
    "CompletedTxn",
    "OngoingTransactions",
    "collect_aborted_transactions",
    "segment_marker_reader",
]


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class OngoingTransactions:
    """Open transactions by producer id, and completed ones not yet below the HW."""

    def __init__(self) -> None:
        self._ongoing: dict[int, int] = {}  # producer id -> first offset
        self._unreplicated: list[CompletedTxn] = []

    def clear(self) -> None:
        self._ongoing.clear()
        self._unreplicated.clear()

    def begin(self, producer_id: int, first_offset: int) -> None:
        self._ongoing.setdefault(producer_id, first_offset)

    def complete(self, txn: CompletedTxn) -> None:
        self._ongoing.pop(txn.producer_id, None)
        self._unreplicated.append(txn)

    def forget(self, producer_id: int) -> None:
        self._ongoing.pop(producer_id, None)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the earliest open (or not yet visible) transaction."""
        if not self._ongoing and not self._unreplicated:
            return None  # the common case: no transaction on this partition
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]
        candidates = list(self._ongoing.values())
        candidates.extend(t.first_offset for t in self._unreplicated)
        return min(candidates) if candidates else None

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO recorded with an aborted transaction (Kafka's lastStableOffset(txn))."""
        others = [f for p, f in self._ongoing.items() if p != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def aborted_entry(self, txn: CompletedTxn) -> AbortedTxn:
        """The ``.txnindex`` entry of an aborted transaction just completed."""
        return AbortedTxn(
            txn.producer_id, txn.first_offset, txn.last_offset, self.stable_offset_after(txn)
        )


class _TxnIndex(Protocol):
    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult: ...


def collect_aborted_transactions(
    indexes: Iterable[_TxnIndex], start_offset: int, upper_bound: int
) -> list[AbortedTxn]:
    """The aborted transactions overlapping ``[start_offset, upper_bound)``.

    ``indexes``: the ``.txnindex`` of the segment holding ``start_offset`` and of every later
    segment, in order (a segment without a file may be left out). Each is read until one
    answers complete (an entry whose last stable offset reaches ``upper_bound``): not only the
    segments the range touches, as a transaction is indexed in the segment of its marker,
    which may be any later one.
    """
    aborted: list[AbortedTxn] = []
    for index in indexes:
        found = index.collect(start_offset, upper_bound)
        aborted.extend(found.aborted_transactions)
        if found.is_complete:
            break
    return aborted


class _Segment(Protocol):
    @property
    def base_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    def translate_offset(
        self, offset: int, end_position: int, start_position: int = 0
    ) -> tuple[int, RecordBatchHeader] | None: ...
    def pread(self, position: int, length: int) -> bytes: ...


def segment_marker_reader(
    segments: Sequence[_Segment],
) -> Callable[[RecordBatchHeader], EndTxnMarker]:
    """Reads the marker of a control batch found by a replay over ``segments``."""
    bases = [s.base_offset for s in segments]

    def read(header: RecordBatchHeader) -> EndTxnMarker:
        segment = segments[max(bisect_right(bases, header.base_offset) - 1, 0)]
        found = segment.translate_offset(header.base_offset, segment.size)
        if found is None:
            return EndTxnMarker(-1, -1)
        position, _ = found
        return read_end_txn_marker(segment.pread(position, header.size_in_bytes))

    return read
