"""Kafka 4's ``CoordinatorRuntime``: records written, then replayed into state once durable.

A coordinator shard (Kafka's ``CoordinatorShard``) turns a request into records and an answer;
the runtime appends the records to the shard's partition through its ``CoordinatorLog`` (the
one ``PartitionWriter`` on real storage) and, once they are durable, hands each to the shard's
``replay`` - the same function that ``load`` applies to every record of the partitions at
start-up. Live state and loaded state are therefore built by one function and cannot disagree.

Order: the records of a partition are replayed in the order they were appended, whatever order
their durability waits finish in (one group-commit fsync wakes them all): each write takes a
place in the partition's queue when it is appended, and a finished write replays the queue's
head up to the first write still waiting. A write whose wait failed (REQUEST_TIMED_OUT) is in
the log anyway and is replayed in its place, as a restart would.

Transaction markers (``write_marker``, and the COMMIT/ABORT control records read at load) are
replayed like data records: ``LogRecord.marker`` tells the shard's replay, which calls its
``replay_end_transaction_marker`` (Kafka's name).

The runtime also holds the shard's load status: "loading" until ``load`` finished, "active",
"stopped" after shutdown (``inactive_error``: COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE).

Membership (consumer-protocol and share groups) replays its records as they are appended
(``at_append``): its next request must see them, as Kafka's timeline shows uncommitted state
to the next write.

Kafka divergence: Kafka replays at once into a timeline (snapshot per offset) and reads at
the last committed offset, reverting the uncommitted part when a write fails; tidelog replays
offsets once durable (the state never holds what the log may lose) and membership at append
(not reverted). The classic group's rebalance state is kept in memory and its GroupMetadata
record (``write(..., replay=False)``) replayed at load only, as Kafka keeps a classic
rebalance in flight in memory (docs/kafka-differences.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import (
    NO_PRODUCER_ID,
    Appended,
    CoordinatorLog,
    KeyValue,
    LogRecord,
)

__all__ = ("CoordinatorRuntime",)

log = logging.getLogger("tidelog.coordinator")


class _Write:
    """A write's place in its partition's replay queue."""

    __slots__ = ("finished", "records")

    def __init__(self, records: list[LogRecord]) -> None:
        self.records = records
        self.finished = False


class CoordinatorRuntime:
    """One coordinator's partitions: writes, replay once durable, load (see the module)."""

    def __init__(
        self,
        log_: CoordinatorLog,
        replay: Callable[[LogRecord], None],
        *,
        write_timeout_ms: int,
        clock: Callable[[], int],
        name: str,
    ) -> None:
        self.log = log_
        self._replay = replay
        #: How long a write waits to be durable (Kafka's offsets.commit.timeout.ms for groups).
        self.write_timeout_ms = write_timeout_ms
        self._clock = clock
        self._name = name
        self._queues: dict[int, deque[_Write]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        #: "loading" until the replay finished, then "active"; "stopped" after shutdown.
        self.status = "loading"

    @property
    def num_partitions(self) -> int:
        return self.log.num_partitions

    def inactive_error(self) -> ErrorCode | None:
        if self.status == "active":
            return None
        if self.status == "loading":
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.coordinator_not_available

    # ------------------------------------------------------------ load

    async def load(self) -> int:
        """Replay every partition from its log start to its HW; returns the records read."""
        await self.log.prepare()
        count = 0
        for partition in range(self.log.num_partitions):
            for record in await self.log.read_partition(partition):
                count += 1
                self._apply(record)
        return count

    # ------------------------------------------------------------ writes

    def write(
        self,
        partition: int,
        records: Sequence[KeyValue],
        *,
        replay: bool = True,
        at_append: bool = False,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> Awaitable[None]:
        """Append ``records`` now (raises ``CoordinatorLogError``); the awaitable resolves
        once they are durable and replayed (``replay``), or raises. ``at_append``: they are
        replayed now, as appended (membership, whose next request must see them), not once
        durable."""
        appended = self.log.append(
            partition,
            records,
            self._clock(),
            timeout_ms=self.write_timeout_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
        entries = (
            [
                LogRecord(appended.first_offset + i, k, v, producer_id)
                for i, (k, v) in enumerate(records)
            ]
            if replay
            else []
        )
        if at_append:
            for record in entries:
                self._apply(record)
            entries = []
        return self._queue(partition, entries, appended)

    def write_marker(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool
    ) -> Awaitable[None]:
        """Append a transaction's marker now; replayed once durable (Kafka's
        ``replayEndTransactionMarker``)."""
        appended = self.log.append_marker(
            partition, producer_id, producer_epoch, commit, timeout_ms=self.write_timeout_ms
        )
        marker = LogRecord(appended.first_offset, None, None, producer_id, commit)
        return self._queue(partition, [marker], appended)

    def _queue(
        self, partition: int, entries: list[LogRecord], appended: Appended
    ) -> Awaitable[None]:
        write = _Write(entries)
        self._queues.setdefault(partition, deque()).append(write)
        task = asyncio.ensure_future(self._settle(partition, write, appended.durable))
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved here too: a write nobody awaits logs no warning

    async def _settle(self, partition: int, write: _Write, durable: Awaitable[None]) -> None:
        try:
            await durable
        finally:
            write.finished = True
            self._drain(partition)

    def _drain(self, partition: int) -> None:
        queue = self._queues.get(partition)
        while queue and queue[0].finished:
            for record in queue.popleft().records:
                self._apply(record)

    def _apply(self, record: LogRecord) -> None:
        try:
            self._replay(record)
        except Exception:
            log.exception("%s: replaying the record at offset %d failed", self._name, record.offset)

    async def stop(self) -> None:
        """Stop answering; forget writes still waiting (they are appended: storage shutdown
        flushes them, and the next load replays them)."""
        self.status = "stopped"
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
