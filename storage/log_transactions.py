"""What a partition log does for transactions: markers, Fetch's one call, ``.txnindex`` rebuild.

Functions over a ``PartitionLog`` (its lock, segments and producer state), called by its thin
methods of the same names:

- ``append_end_txn_marker``: the coordinator's COMMIT/ABORT marker (``storage.control_records``)
  is checked (Kafka's appendEndTxnMarker: an epoch below the producer's is
  INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED; nothing is
  written then), appended, and completes the producer's open transaction
  (``storage.transaction_state``); an aborted one gets an ``AbortedTxn`` entry
  (``storage.transaction_index``) in the segment holding the marker, with the LSO as it is once
  the marker is written.
- ``read_for_fetch``: batches up to the HW (READ_COMMITTED: the LSO) and, for READ_COMMITTED,
  the aborted transactions overlapping the data (Kafka's collectAbortedTransactions over the
  segments from the one holding the fetch offset up to the end of the data returned).
- ``rebuild_txn_index``: during the producer-state replay at load, an aborted transaction's
  entry goes to the segment holding its marker (an entry the index has already is skipped).

Threading: as ``PartitionLog.append`` (markers: the event loop) and ``PartitionLog.read``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .batch import prepare_append, validate_records
from .control_records import ABORT, COMMIT, EndTxnMarker, encode_end_txn_marker
from .info import AppendInfo, FetchDataInfo
from .transaction_index import AbortedTxn
from .transaction_state import CompletedTxn

if TYPE_CHECKING:
    from .log import PartitionLog
    from .producer_state import ProducerStateManager

__all__ = ["append_end_txn_marker", "read_for_fetch", "rebuild_txn_index"]


def aborted_entry(completed: CompletedTxn, state: ProducerStateManager) -> AbortedTxn:
    return AbortedTxn(
        completed.producer_id,
        completed.first_offset,
        completed.last_offset,
        state.transactions.stable_offset_after(completed),
    )


def append_end_txn_marker(
    log: PartitionLog,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    now_ms: int,
    leader_epoch: int | None = None,
) -> AppendInfo:
    records = encode_end_txn_marker(
        commit=commit,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp_ms=now_ms,
    )
    config = log.config
    batches = validate_records(
        records,
        max_message_bytes=max(config.max_message_bytes, len(records)),
        segment_bytes=config.segment_bytes,
        allow_control=True,
    )
    with log._lock:
        log._check_open()
        state = log.producer_state
        state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        prepared = prepare_append(
            records,
            batches,
            base_offset=log._log_end_offset,
            log_append_time_ms=None,
            leader_epoch=leader_epoch,
        )
        segment = log._write_locked(prepared, now_ms)
        completed = state.update_marker(
            prepared.headers[0], EndTxnMarker(COMMIT if commit else ABORT, coordinator_epoch)
        )
        if completed.is_aborted:
            segment.txn_index.append(aborted_entry(completed, state))
        state.transactions.first_unstable_offset(log._high_watermark)  # forget visible ones
        log_start = log._log_start_offset
    return AppendInfo(
        first_offset=prepared.first_offset,
        last_offset=prepared.last_offset,
        max_timestamp=prepared.max_timestamp,
        log_append_time_ms=-1,
        log_start_offset=log_start,
        batches=prepared.headers,
        size_in_bytes=prepared.size_in_bytes,
    )


def read_for_fetch(
    log: PartitionLog,
    start_offset: int,
    max_bytes: int,
    read_committed: bool,
    min_one_message: bool,
    verify_limit: int | None = None,
    last_stable_offset: int | None = None,
) -> FetchDataInfo:
    lso = log.last_stable_offset if last_stable_offset is None else last_stable_offset
    info = log.read(
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
    with log._lock:
        segments = log._segments.from_offset(start_offset)
    upper = info.last_offset + 1
    aborted: list[AbortedTxn] = []
    for segment in segments:
        if segment.base_offset >= upper:
            break
        aborted.extend(segment.txn_index.collect(start_offset, upper))
    return FetchDataInfo(info, lso, tuple(aborted))


def rebuild_txn_index(log: PartitionLog, completed: CompletedTxn) -> None:
    if not completed.is_aborted:
        return
    segments = log._segments
    segments[segments.floor_index(completed.last_offset)].txn_index.append(
        aborted_entry(completed, log.producer_state)
    )
