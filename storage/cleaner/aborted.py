"""Aborted transactional data for the cleaner (Kafka's Cleaner transaction handling).

The cleaner asks ``is_aborted(header)`` for every data batch: a transactional batch whose
producer had the transaction holding it aborted (an entry of the log's ``.txnindex`` files,
``storage.transaction_index``: same producer id, ``first_offset <= base_offset <= last_offset``)
is neither put in the offset map (an aborted value must never shadow a committed one of the
same key) nor kept in the cleaned segment (its records are dropped; the batch is kept empty
only when it is an active producer's last batch, as Kafka's RETAIN_EMPTY).

Markers are handled by ``batch_filter._filter_marker``.

Threading: built by a cleaner thread from a snapshot of the index entries; immutable after.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

from ..batch import CONTROL_MASK, TRANSACTIONAL_MASK, RecordBatchHeader
from ..transaction_index import AbortedTxn

__all__ = ["AbortedTransactions"]


class AbortedTransactions:
    """Aborted offset ranges by producer id."""

    def __init__(self, entries: Iterable[AbortedTxn]) -> None:
        ranges: dict[int, list[tuple[int, int]]] = {}
        for txn in entries:
            ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
        self._ranges = {pid: sorted(r) for pid, r in ranges.items()}
        self._firsts = {pid: [f for f, _ in r] for pid, r in self._ranges.items()}

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def is_aborted(self, header: RecordBatchHeader) -> bool:
        attributes = header.attributes
        if not attributes & TRANSACTIONAL_MASK or attributes & CONTROL_MASK:
            return False
        firsts = self._firsts.get(header.producer_id)
        if not firsts:
            return False
        i = bisect_right(firsts, header.base_offset) - 1
        if i < 0:
            return False
        return header.base_offset <= self._ranges[header.producer_id][i][1]
