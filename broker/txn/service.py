"""Wiring the transaction coordinator into the broker: ``__transaction_state``, markers, timers.

``install(broker)`` sets ``broker.transactions`` (the ``TransactionCoordinator``) and
``broker.txn_offsets`` (``broker/group/txn_offsets.py``) and adds a service that, at start,
replays ``__transaction_state`` when it exists, completes prepared transactions, then runs
the timeout abort (``transaction.abort.timed.out.transaction.cleanup.interval.ms``) and the
id expiration (``transaction.remove.expired.transaction.cleanup.interval.ms``) periodically.
As in Kafka, the topic is created on the first FindCoordinator for a transactional id
(``transaction.state.log.num.partitions`` partitions, ``cleanup.policy=compact``,
``segment.bytes=transaction.state.log.segment.bytes``, ``compression.type=uncompressed``).

Records are appended through storage at once and awaited until the HW covers them (the flush
policy of the topic decides when: by default after the fsync). Markers are appended the same
way to every partition of the transaction (``PartitionLog.append_end_txn_marker``), all of them
before the first wait, so the partitions' group-commit fsyncs run side by side; a partition
whose topic was deleted meanwhile is skipped, as Kafka drops markers for unknown partitions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Generator
from typing import TYPE_CHECKING, Any

from tidelog.broker.group.config import OFFSETS_TOPIC
from tidelog.broker.group.log import encode_records
from tidelog.broker.group.txn_offsets import TxnOffsets
from tidelog.broker.topics import LEADER_EPOCH
from tidelog.broker.txn.coordinator import COORDINATOR_EPOCH, TransactionCoordinator
from tidelog.broker.txn.metadata import TransactionMetadata
from tidelog.broker.txn.state_manager import TxnConfig
from tidelog.protocol.internal_topics.consumer_offsets import partition_for
from tidelog.protocol.internal_topics.transaction_state import (
    TxnLogValue,
    TxnSchemaError,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from tidelog.storage import PartitionLog, StorageError
from tidelog.storage.record_codec import iter_records

if TYPE_CHECKING:
    from tidelog.broker.app import Broker

__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionService", "install"]

log = logging.getLogger("tidelog.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"
#: FindCoordinator's key type for a transactional id.
TRANSACTION_KEY_TYPE = 1
#: How long a write waits for its HW before the coordinator gives up (and retries later).
WRITE_TIMEOUT_S = 30.0


class TxnWriteFailed(Exception):
    pass


class _Resolved:
    """An awaitable that is done already: awaiting it returns None at once (no coroutine,
    no future, no loop turn)."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # makes this a generator that ends at once


_DONE = _Resolved()


class TransactionService:
    """Start/stop of the coordinator and its storage adapter."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        get = broker.config.get_int
        self.num_partitions = get("transaction.state.log.num.partitions")
        self.segment_bytes = get("transaction.state.log.segment.bytes")
        self.load_buffer = max(get("transaction.state.log.load.buffer.size"), 64 * 1024)
        self.config = TxnConfig(
            max_timeout_ms=get("transaction.max.timeout.ms"),
            id_expiration_ms=get("transactional.id.expiration.ms"),
            abort_interval_ms=get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            expiration_interval_ms=get(
                "transaction.remove.expired.transaction.cleanup.interval.ms"
            ),
        )
        self.coordinator = TransactionCoordinator(
            self.config,
            write_record=self.write_record,
            write_markers=self.write_markers,
            new_producer_id=broker.producer_ids.generate_producer_id,
            clock=broker.clock,
        )
        self.txn_offsets = TxnOffsets(broker, broker.groups)
        self._periodic: list[asyncio.Task[None]] = []

    # -- life cycle ----------------------------------------------------------------------------
    def _topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.segment_bytes),
            "compression.type": "uncompressed",
        }

    async def create_topic(self) -> None:
        """``__transaction_state`` on the first FindCoordinator for a transactional id, as
        Kafka creates it (not at start-up: a broker nobody uses for transactions never pays
        for its partitions); made in a worker thread while the loop serves others."""
        info = await self.broker.topics.ensure_internal_topic(
            TRANSACTION_STATE_TOPIC,
            self.num_partitions,
            self._topic_configs(),
            self.broker.run_blocking,
        )
        self.num_partitions = info.partitions

    def _ensure_topic_now(self) -> None:
        """The topic, made on the loop, for a write that finds it missing (a client that
        skipped FindCoordinator)."""
        topics = self.broker.topics
        if topics.get(TRANSACTION_STATE_TOPIC) is None:
            topics.create_topic(TRANSACTION_STATE_TOPIC, self.num_partitions, self._topic_configs())

    async def start(self) -> None:
        topics = self.broker.topics
        info = topics.get(TRANSACTION_STATE_TOPIC)
        # An existing topic keeps its partition count; a missing one is made on first use.
        partitions = 0 if info is None else info.partitions
        if info is not None:
            self.num_partitions = info.partitions
        records: list[tuple[str, TxnLogValue | None]] = []
        for partition in range(partitions):
            partition_log = topics.get_log(TRANSACTION_STATE_TOPIC, partition)
            if partition_log is not None:
                records.extend(
                    await self.broker.run_blocking(_read_all, partition_log, self.load_buffer)
                )
        self.coordinator.load(records)
        store = getattr(self.broker.groups, "_log", None)
        held = getattr(store, "pending_transactional", None)
        if held:
            self.txn_offsets.stage_loaded(held)
        self.coordinator.activate()
        log.info(
            "transaction coordinator loaded %d records: %d transactional ids",
            len(records),
            len(self.coordinator.transactions),
        )
        self._periodic = [
            asyncio.ensure_future(self._every(self.config.abort_interval_ms, self._abort)),
            asyncio.ensure_future(self._every(self.config.expiration_interval_ms, self._expire)),
        ]

    async def stop(self) -> None:
        for task in self._periodic:
            task.cancel()
        await asyncio.gather(*self._periodic, return_exceptions=True)
        await self.coordinator.stop()

    async def _every(self, interval_ms: int, fn: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction coordinator task failed")

    async def _abort(self) -> None:
        self.coordinator.abort_timed_out()

    async def _expire(self) -> None:
        await self.coordinator.expire_transactional_ids()

    # -- storage -------------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def _covered(
        self, topic: str, partition: int, partition_log: PartitionLog, end: int
    ) -> Awaitable[None]:
        """An awaitable resolved once the HW of the partition reaches ``end``: an already
        resolved one when it does now (no coroutine, no wait), else ``_wait``."""
        if partition_log.high_watermark >= end:
            return _DONE
        return self._wait(topic, partition, partition_log, end)

    async def _wait(
        self, topic: str, partition: int, partition_log: PartitionLog, end: int
    ) -> None:
        covered = await self.broker.partitions.wait_until(
            (topic, partition), lambda: partition_log.high_watermark >= end, WRITE_TIMEOUT_S
        )
        if not covered:
            raise TxnWriteFailed(f"{topic}-{partition}: the HW did not reach {end} in time")

    def write_record(
        self, transactional_id: str, value: TxnLogValue | None, *, lazy: bool = False
    ) -> Awaitable[None]:
        """Append now (raises on failure); the awaitable resolves once the HW covers it.

        ``lazy``: no flush is started for this record and nobody waits for it (the awaitable
        is resolved already); the next append to the partition (whose wait covers this one)
        or the broker's flush tick (``FLUSH_TICK_S``, the flush policy) makes it durable."""
        partition = self.partition_for(transactional_id)
        self._ensure_topic_now()
        partition_log = self.broker.topics.get_log(TRANSACTION_STATE_TOPIC, partition)
        if partition_log is None:
            raise TxnWriteFailed(f"{TRANSACTION_STATE_TOPIC}-{partition} is missing")
        record = (
            encode_txn_key(transactional_id),
            None if value is None else encode_txn_value(value),
        )
        hw_before = partition_log.high_watermark
        info = partition_log.append(
            encode_records([record], self.broker.clock()), now_ms=self.broker.clock()
        )
        if not lazy:
            self.broker.after_append(partition_log, hw_before)
        elif partition_log.high_watermark != hw_before:  # a topic without a flush policy
            self.broker.partitions.notify(TRANSACTION_STATE_TOPIC, partition)
        if lazy:
            return _DONE
        end = info.last_offset + 1
        return self._covered(TRANSACTION_STATE_TOPIC, partition, partition_log, end)

    def write_markers(self, md: TransactionMetadata, commit: bool) -> Awaitable[None]:
        """Append a marker to every partition of ``md`` now; the awaitable resolves once
        every one is durable (and the transaction's offsets, if any, are then applied)."""
        broker = self.broker
        waits: list[Awaitable[None]] = []
        offsets_partitions = False
        for topic, partition in sorted(md.partitions):
            partition_log = broker.topics.get_log(topic, partition)
            if partition_log is None:
                log.info("no marker for %s-%d: the partition is gone", topic, partition)
                continue
            hw_before = partition_log.high_watermark
            try:
                info = partition_log.append_end_txn_marker(
                    producer_id=md.producer_id,
                    producer_epoch=md.producer_epoch,
                    coordinator_epoch=COORDINATOR_EPOCH,
                    commit=commit,
                    now_ms=broker.clock(),
                    leader_epoch=LEADER_EPOCH,  # as Kafka's leader stamps every batch it writes
                )
            except StorageError as exc:
                log.warning(
                    "marker for %s-%d of %r refused: %s", topic, partition, md.transactional_id, exc
                )
                continue
            broker.after_append(partition_log, hw_before)
            waits.append(self._covered(topic, partition, partition_log, info.last_offset + 1))
            offsets_partitions = offsets_partitions or topic == OFFSETS_TOPIC
        return self._markers_durable(waits, md.producer_id, commit, offsets_partitions)

    async def _markers_durable(
        self,
        waits: list[Awaitable[None]],
        producer_id: int,
        commit: bool,
        offsets_partitions: bool,
    ) -> None:
        if len(waits) == 1:  # the common case: no gather (a task per awaitable)
            await waits[0]
        elif waits:
            await asyncio.gather(*waits)
        if offsets_partitions:
            self.txn_offsets.complete(producer_id, commit)


def _read_all(partition_log: PartitionLog, max_bytes: int) -> list[tuple[str, TxnLogValue | None]]:
    """Every ``__transaction_state`` record up to the HW (worker thread)."""
    out: list[tuple[str, TxnLogValue | None]] = []
    offset = partition_log.log_start_offset
    while True:
        info = partition_log.read(offset, max_bytes)
        if info.first_offset is None or info.last_offset is None:
            return out
        for record in iter_records(info.read_bytes()):
            if record.offset < offset or record.key is None:
                continue
            try:
                transactional_id = decode_txn_key(record.key)
                if transactional_id is None:
                    continue
                value = None if record.value is None else decode_txn_value(record.value)
            except TxnSchemaError as exc:
                log.warning("skipping a %s record that does not parse: %s", partition_log, exc)
                continue
            out.append((transactional_id, value))
        offset = info.last_offset + 1


def install(broker: Broker) -> TransactionService:
    service = TransactionService(broker)
    broker.transactions = service.coordinator
    broker.txn_offsets = service.txn_offsets
    broker.services.append(service)
    broker.coordinator_topics[TRANSACTION_KEY_TYPE] = service.create_topic
    return service
