"""Produce's append and its wait: Kafka's ``ReplicaManager.appendRecords`` and ``DelayedProduce``.

``append_partition`` appends one partition's records and gives the outcome as data
(``ProducePartitionResult``): refused before storage (unknown partition, internal topic, a
transactional batch its transaction does not hold, see
``broker/txn/add_partitions_to_txn_manager.py``), refused by storage (a ``StorageError``: its
error name becomes the error code, KIP-467's ``record_errors`` ride along), or appended (offsets,
log append time, log start offset). The records are never decoded here: storage validates each
batch header and CRC, checks producer sequences, assigns the offsets and writes.

Off the event loop: a batch for a compacted topic that is compressed or at least
``KEY_CHECK_ON_LOOP_BYTES`` (its key check decompresses it and reads every record), and any batch
of ``BIG_APPEND_BYTES`` or more, is appended in a worker thread through ``broker.append_queue``
(``broker/partition_appends.py``), which keeps the appends of each partition in arrival order;
``append_partition`` then returns a future of the outcome, and queues behind such an append any
later append of the same partition.

``await_high_watermark`` (acks=1 and -1): waits until each appended partition's HW covers its
batch, at once when the HW follows the LEO, after the group-commit fsync when
``flush.messages=1`` holds it back; a partition the HW did not reach in time answers
REQUEST_TIMED_OUT.

Threading: event loop only (the worker runs just the append).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tidelog.broker.topics import INTERNAL_TOPICS, LEADER_EPOCH
from tidelog.broker.txn.add_partitions_to_txn_manager import (
    AddPartitionsToTxnManager,
    transactional_producer,
)
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.storage.batch import ATTRIBUTES_LOW_OFFSET, BATCH_HEADER_SIZE
from tidelog.storage.errors import StorageError

if TYPE_CHECKING:
    from tidelog.broker.coordinator.partition_writer import PartitionWriter
    from tidelog.broker.metrics import Metrics
    from tidelog.broker.partition_appends import PartitionAppends
    from tidelog.broker.topics import Topics
    from tidelog.storage import PartitionLog
    from tidelog.storage.info import AppendInfo

__all__ = [
    "BIG_APPEND_BYTES",
    "KEY_CHECK_ON_LOOP_BYTES",
    "ProducePartitionResult",
    "ReplicaAppends",
    "append_on_loop",
    "append_partition",
    "await_high_watermark",
    "covered",
    "needs_worker",
]

log = logging.getLogger("tidelog.produce")

#: A compacted topic's key check of an uncompressed batch at least this large runs in a worker.
KEY_CHECK_ON_LOOP_BYTES = 64 * 1024
#: Any batch at least this large is appended in a worker (CRC and write of megabytes).
BIG_APPEND_BYTES = 4 * 1024 * 1024
_COMPRESSION_MASK = 0x07
_BATCH_LENGTH_OFFSET = 8


class _TransactionVerification(Protocol):
    """What an append asks the transaction coordinator: whether a transaction holds the
    partition (KIP-890's verification)."""

    @property
    def add_partitions_manager(self) -> AddPartitionsToTxnManager: ...


class ReplicaAppends(Protocol):
    """What Produce's append and its wait use of the broker (the part of Kafka's ReplicaManager
    an append goes through: the logs, the append workers, the partition writer's HW waits, the
    transaction verification, the clock and the metrics)."""

    @property
    def topics(self) -> Topics: ...
    @property
    def append_queue(self) -> PartitionAppends: ...
    @property
    def partition_writer(self) -> PartitionWriter: ...
    @property
    def transactions(self) -> _TransactionVerification: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def clock(self) -> Callable[[], int]: ...


@dataclass(slots=True)
class ProducePartitionResult:
    """One partition's outcome (mutable while acks=-1 waits)."""

    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    base_offset: int = -1
    next_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    #: KIP-467: the records of the batch that were refused, ``(batch index, message)``.
    record_errors: tuple[tuple[int, str], ...] = ()


def _verify_transaction(
    broker: ReplicaAppends, topic: str, partition: int, records: bytes | memoryview
) -> tuple[ErrorCode, str] | None:
    """Transactional batches must belong to an open transaction holding this partition; None
    means "append"."""
    producer = transactional_producer(records)
    if producer is None:
        return None
    manager = broker.transactions.add_partitions_manager
    return manager.verify(producer[0], producer[1], topic, partition)


def _any_compressed(records: bytes | memoryview) -> bool:
    """Whether a batch of ``records`` is compressed (headers only; a damaged length stops the
    walk, validation reports it)."""
    position = 0
    end = len(records) - BATCH_HEADER_SIZE
    while 0 <= position <= end:
        if records[position + ATTRIBUTES_LOW_OFFSET] & _COMPRESSION_MASK:
            return True
        length = int.from_bytes(records[position + _BATCH_LENGTH_OFFSET : position + 12], "big")
        if length <= 0:
            return False
        position += 12 + length
    return False


def needs_worker(partition_log: PartitionLog, records: bytes | memoryview) -> bool:
    """Whether appending ``records`` is too much work for the event loop (see the module)."""
    size = len(records)
    if size >= BIG_APPEND_BYTES:
        return True
    if not partition_log.config.compact_enabled:
        return False
    return size >= KEY_CHECK_ON_LOOP_BYTES or _any_compressed(records)


def append_partition(
    broker: ReplicaAppends,
    topic: str,
    partition: int,
    records: bytes | memoryview | None,
    partition_log: PartitionLog | None = None,
) -> ProducePartitionResult | asyncio.Future[ProducePartitionResult]:
    """Append ``records`` to one partition (the core of Produce): the outcome as data, or a
    future of it when the append was queued for a worker thread (``broker.append_queue``).
    ``partition_log``: the partition's log when the caller looked it up already."""
    if partition_log is None:
        partition_log = broker.topics.get_log(topic, partition)
        if partition_log is None:
            return ProducePartitionResult(topic, partition, ErrorCode.unknown_topic_or_partition)
    if topic in INTERNAL_TOPICS:
        return ProducePartitionResult(
            topic,
            partition,
            ErrorCode.invalid_topic_exception,
            f"Cannot append to internal topic {topic}",
        )
    data = records if records is not None else b""
    refused = _verify_transaction(broker, topic, partition, data)
    if refused is not None:
        return ProducePartitionResult(topic, partition, refused[0], refused[1])
    queue = broker.append_queue
    key = (topic, partition)
    in_worker = needs_worker(partition_log, data)
    if in_worker or queue.busy(key):
        hw = [0]

        def work() -> AppendInfo:
            hw[0] = partition_log.high_watermark
            return partition_log.append(data, now_ms=broker.clock(), leader_epoch=LEADER_EPOCH)

        def finish(outcome: AppendInfo | BaseException) -> ProducePartitionResult:
            return _appended(broker, partition_log, topic, partition, len(data), hw[0], outcome)

        return queue.submit(key, work, finish, in_worker=in_worker)
    hw_before = partition_log.high_watermark
    try:
        info: AppendInfo | BaseException = partition_log.append(
            data, now_ms=broker.clock(), leader_epoch=LEADER_EPOCH
        )
    except StorageError as exc:
        info = exc
    return _appended(broker, partition_log, topic, partition, len(data), hw_before, info)


def append_on_loop(
    broker: ReplicaAppends,
    topic: str,
    partition: int,
    records: bytes | memoryview,
    partition_log: PartitionLog,
) -> AppendInfo | ProducePartitionResult:
    """``append_partition`` on the event loop, for a caller that checked already that the
    batch needs no worker and no append of the partition is queued (``needs_worker``,
    ``PartitionAppends.busy``): the ``AppendInfo`` of a success as storage returned it (no
    result object: the common Produce's answer is encoded from it), else the refusal."""
    if topic in INTERNAL_TOPICS or transactional_producer(records) is not None:
        result = append_partition(broker, topic, partition, records, partition_log)
        assert not isinstance(result, asyncio.Future)  # the caller checked it is not queued
        return result
    hw_before = partition_log.high_watermark
    try:
        info = partition_log.append(records, now_ms=broker.clock(), leader_epoch=LEADER_EPOCH)
    except StorageError as exc:
        return _appended(broker, partition_log, topic, partition, len(records), hw_before, exc)
    broker.metrics.topic_in(topic, info.last_offset - info.first_offset + 1, len(records))
    broker.partition_writer.appended(partition_log, hw_before)
    return info


# As Kafka's ReplicaManager.appendToLocalLog: a refused append reports the partition's log start
# offset, except for these errors (answered with -1).
_NO_LOG_START_OFFSET = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_leader_or_follower,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.corrupt_message,
        ErrorCode.kafka_storage_error,
        ErrorCode.duplicate_sequence_number,
        ErrorCode.unknown_topic_id,
    }
)


def _appended(
    broker: ReplicaAppends,
    partition_log: PartitionLog,
    topic: str,
    partition: int,
    size: int,
    hw_before: int,
    info: AppendInfo | BaseException,
) -> ProducePartitionResult:
    """One append's outcome (an ``AppendInfo`` or the exception it raised) as a result; wakes
    HW waiters and schedules the flush (``PartitionWriter.appended``) after a success."""
    if isinstance(info, BaseException):
        if not isinstance(info, StorageError):
            raise info
        log.info("produce to %s-%d refused: %s %s", topic, partition, info.error_name, info)
        code = error_code_for(info.error_name)
        return ProducePartitionResult(
            topic,
            partition,
            code,
            str(info) or None,
            log_start_offset=(
                -1 if code in _NO_LOG_START_OFFSET else int(partition_log.log_start_offset)
            ),
            record_errors=getattr(info, "record_errors", ()),
        )
    broker.metrics.topic_in(topic, info.last_offset - info.first_offset + 1, size)
    broker.partition_writer.appended(partition_log, hw_before)
    return ProducePartitionResult(
        topic,
        partition,
        ErrorCode.none,
        None,
        info.first_offset,
        info.last_offset + 1,
        info.log_append_time_ms,
        info.log_start_offset,
    )


def covered(broker: ReplicaAppends, r: ProducePartitionResult) -> bool:
    """acks=-1: whether the partition's HW covers the appended batch already."""
    partition_log = broker.topics.get_log(r.topic, r.partition)
    return partition_log is None or partition_log.high_watermark >= r.next_offset


async def await_high_watermark(
    broker: ReplicaAppends, results: list[ProducePartitionResult], timeout_s: float
) -> None:
    """acks=1 and -1: wait until each appended partition's HW covers its batch."""
    waits = []
    pending = []
    for r in results:
        if r.error != ErrorCode.none or covered(broker, r):
            continue
        partition_log = broker.topics.get_log(r.topic, r.partition)
        pending.append(r)
        waits.append(
            broker.partition_writer.covered(
                r.topic, r.partition, partition_log, r.next_offset, timeout_s
            )
        )
    if not waits:
        return
    done = await asyncio.gather(*waits)
    for r, ok in zip(pending, done, strict=True):
        if not ok:
            r.error = ErrorCode.request_timed_out
            r.message = "the high watermark did not reach the batch before the request timeout"
