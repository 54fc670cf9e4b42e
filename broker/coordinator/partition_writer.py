"""Kafka's ``CoordinatorPartitionWriter``: the one append-wake-wait of tidelog's writes.

Every coordinator write to a partition goes through ``PartitionWriter``: the group
coordinator's ``__consumer_offsets`` (offsets, group metadata, transactional offsets and the
transaction markers it writes there), the transaction coordinator's ``__transaction_state``
and markers, the share coordinator's ``__share_group_state`` and WriteTxnMarkers. A write:

1. appends the batch to the partition's log now, on the loop (a page-cache write, in the order
   the coordinator made its records); a storage refusal raises ``CoordinatorLogError`` with
   Kafka's error code;
2. wakes the partition's HW waiters when the append moved the HW, and starts a flush when the
   topic's flush policy asks for one (``LogFlusher.after_append``, broker/log_flusher.py);
3. returns an ``Appended`` whose ``durable`` awaitable resolves once the HW covers the batch,
   or raises ``CoordinatorLogError(REQUEST_TIMED_OUT)`` after the coordinator's write timeout
   (``timeout_ms``: each coordinator passes its own one setting, ``offsets.commit.timeout.ms``
   for groups, the request timeout for transactions, ``share.coordinator.write.timeout.ms``
   for share state). When the HW covers the batch at once (a topic without a flush policy)
   ``durable`` is an already-resolved awaitable: no coroutine, no loop turn.

``lazy``: no flush is started and nobody waits (``durable`` is resolved already): the next
append to the partition (whose wait covers this one) or the flush tick makes it durable.
``defer_flush``: the flush starts in the loop's next turn, after what the caller appends in
this one (Produce v12's records after their Ongoing record: the records' fsync, which the
Produce answer waits for, then gets the first flush thread; EndTxn's markers: its answer is
written first).

Produce appends its own way (in a worker thread for big batches) and then uses ``appended``
(the wake) and ``covered`` (the HW wait, the request's timeout): the wake and the wait are
written here once.

The writer gets the narrow interface it uses (``WriterHost``): the partition logs, the
after-append hook, the HW waiters and the clock - not the broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.appended import Appended, CoordinatorLogError
from tidelog.broker.topics import LEADER_EPOCH
from tidelog.protocol.errors import error_code_for
from tidelog.storage import StorageError

if TYPE_CHECKING:  # the partition log is imported by the first partition (storage/manager.py)
    from tidelog.storage import AppendInfo, PartitionLog

__all__ = ("DONE", "PartitionWriter", "WriterHost")

TopicPartition = tuple[str, int]


class _Resolved:
    """An awaitable that is done already: awaiting it returns None at once (no coroutine,
    no future, no loop turn)."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # noqa: V201 (vulture) makes this a generator that ends at once


DONE: Awaitable[None] = _Resolved()


@dataclass(frozen=True, slots=True)
class WriterHost:
    """What the writer needs from the broker."""

    #: (topic, partition) -> its log, None when it does not exist
    get_log: Callable[[str, int], PartitionLog | None]
    #: wakes HW waiters and starts a flush when the policy asks (``LogFlusher.after_append``)
    after_append: Callable[[PartitionLog, int], None]
    #: wakes the HW waiters of a partition (``HighWatermarkWaiters.notify``)
    notify: Callable[[str, int], None]
    #: ``HighWatermarkWaiters.wait_until``: (partition, condition, timeout s) -> held in time
    wait_until: Callable[[TopicPartition, Callable[[], bool], float], Awaitable[bool]]
    clock: Callable[[], int]


class PartitionWriter:
    """Appends batches and markers to coordinator partitions; see the module."""

    def __init__(self, host: WriterHost) -> None:
        self._host = host
        #: The loop of ``defer_flush``, kept from its first use (``get_running_loop`` costs a
        #: ``getpid`` system call).
        self._loop: asyncio.AbstractEventLoop | None = None

    def log_for(self, topic: str, partition: int) -> PartitionLog:
        partition_log = self._host.get_log(topic, partition)
        if partition_log is None:
            raise CoordinatorLogError(
                ErrorCode.unknown_topic_or_partition, f"{topic}-{partition} is missing"
            )
        return partition_log

    def append(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        *,
        timeout_ms: int,
        lazy: bool = False,
        from_coordinator: bool = False,
        defer_flush: bool = False,
    ) -> Appended:
        """Append ``batch`` (one or more v2 batches) now; see the module."""
        partition_log = self.log_for(topic, partition)
        hw_before = partition_log.high_watermark
        try:
            info = partition_log.append(
                batch,
                now_ms=self._host.clock(),
                leader_epoch=LEADER_EPOCH,
                from_coordinator=from_coordinator,
            )
        except StorageError as exc:
            raise CoordinatorLogError(error_code_for(exc.error_name), str(exc)) from exc
        return self._appended(
            topic, partition, partition_log, hw_before, info, timeout_ms, lazy, defer_flush
        )

    def append_marker(
        self,
        topic: str,
        partition: int,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        timeout_ms: int,
        defer_flush: bool = False,
    ) -> Appended:
        """Append a transaction's COMMIT/ABORT marker now."""
        partition_log = self.log_for(topic, partition)
        hw_before = partition_log.high_watermark
        try:
            info = partition_log.append_end_txn_marker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch,
                commit=commit,
                now_ms=self._host.clock(),
                leader_epoch=LEADER_EPOCH,  # as Kafka's leader stamps every batch it writes
            )
        except StorageError as exc:
            raise CoordinatorLogError(error_code_for(exc.error_name), str(exc)) from exc
        return self._appended(
            topic, partition, partition_log, hw_before, info, timeout_ms, False, defer_flush
        )

    def _appended(
        self,
        topic: str,
        partition: int,
        partition_log: PartitionLog,
        hw_before: int,
        info: AppendInfo,
        timeout_ms: int,
        lazy: bool,
        defer_flush: bool = False,
    ) -> Appended:
        end = info.last_offset + 1
        if lazy:
            if partition_log.high_watermark != hw_before:  # a topic without a flush policy
                self._host.notify(topic, partition)
            return Appended(info.first_offset, DONE)
        if defer_flush:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            loop.call_soon(self._host.after_append, partition_log, hw_before)
        else:
            self._host.after_append(partition_log, hw_before)
        if partition_log.high_watermark >= end:
            return Appended(info.first_offset, DONE)
        return Appended(
            info.first_offset, self._wait(topic, partition, partition_log, end, timeout_ms)
        )

    def appended(self, partition_log: PartitionLog, hw_before: int) -> None:
        """After an append made elsewhere (Produce's, possibly in a worker thread): wake the
        HW waiters when the HW moved, start a flush when the policy asks."""
        self._host.after_append(partition_log, hw_before)

    def covered(
        self,
        topic: str,
        partition: int,
        partition_log: PartitionLog | None,
        end: int,
        timeout_s: float,
    ) -> Awaitable[bool]:
        """Whether the partition's HW reached ``end`` within ``timeout_s`` (a partition deleted
        meanwhile, None, counts as covered)."""
        return self._host.wait_until(
            (topic, partition),
            lambda: partition_log is None or partition_log.high_watermark >= end,
            timeout_s,
        )

    async def _wait(
        self, topic: str, partition: int, partition_log: PartitionLog, end: int, timeout_ms: int
    ) -> None:
        if not await self.covered(topic, partition, partition_log, end, timeout_ms / 1000):
            raise CoordinatorLogError(
                ErrorCode.request_timed_out,
                f"{topic}-{partition}: the high watermark did not reach {end} "
                f"within {timeout_ms} ms",
            )
