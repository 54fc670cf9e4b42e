"""The transaction coordinator on real storage: ``__transaction_state``, markers, timers.

``TransactionService`` holds the ``TransactionCoordinator`` (``broker/coordinators.py`` sets it as
``broker.transactions`` and adds the service to ``broker.services``); at start it
replays ``__transaction_state`` when it exists, completes prepared transactions, then runs
the timeout abort (``transaction.abort.timed.out.transaction.cleanup.interval.ms``) and the
id expiration (``transaction.remove.expired.transaction.cleanup.interval.ms``) periodically.
As in Kafka, the topic is created on the first FindCoordinator for a transactional id
(``transaction.state.log.num.partitions`` partitions, ``cleanup.policy=compact``,
``segment.bytes=transaction.state.log.segment.bytes``, ``compression.type=uncompressed``).

Records are appended through the broker's one ``PartitionWriter``
(``broker/coordinator/partition_writer.py``) at once and awaited until the HW covers them (the
flush policy of the topic decides when: by default after the fsync), at most
``WRITE_TIMEOUT_MS``. Markers are appended the same way to every partition of the transaction,
all of them before the first wait, so the partitions' group-commit fsyncs run side by side; a
partition whose topic was deleted meanwhile is skipped, as Kafka drops markers for unknown
partitions. A ``__consumer_offsets`` partition's marker is written by the group coordinator
(``complete_transaction``, Kafka's GroupCoordinator.completeTransaction), whose replay of it
commits or drops the transaction's pending offsets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from tidelog.broker.coordinator.log import Appended, CoordinatorLogError, encode_records
from tidelog.broker.coordinator.partition_writer import DONE
from tidelog.broker.group.config import OFFSETS_TOPIC
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
from tidelog.storage import PartitionLog
from tidelog.storage.reading import read_from_start
from tidelog.storage.record_codec import iter_records

if TYPE_CHECKING:
    from tidelog.broker.coordinator.partition_writer import PartitionWriter
    from tidelog.broker.topics import Topics
    from tidelog.config import BrokerConfig

__all__ = ["TRANSACTION_KEY_TYPE", "TRANSACTION_STATE_TOPIC", "TransactionService"]

log = logging.getLogger("tidelog.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"
#: FindCoordinator's key type for a transactional id.
TRANSACTION_KEY_TYPE = 1
#: How long a write waits for its HW before the coordinator gives up (and retries later):
#: Kafka's transaction state manager bounds its appends by request.timeout.ms (30 s).
WRITE_TIMEOUT_MS = 30_000


class TransactionService:
    """Start/stop of the coordinator and its storage adapter.

    ``complete_offsets_transaction``: the group coordinator's ``complete_transaction`` (a
    ``__consumer_offsets`` partition's marker is written by it)."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        topics: Topics,
        writer: PartitionWriter,
        run_blocking: Callable[..., Awaitable[Any]],
        clock: Callable[[], int],
        *,
        new_producer_id: Callable[[], Awaitable[int]],
        complete_offsets_transaction: Callable[[int, int, int, bool], Awaitable[None]],
    ) -> None:
        self.topics = topics
        self.writer = writer
        self.run_blocking = run_blocking
        self.clock = clock
        self.complete_offsets_transaction = complete_offsets_transaction
        get = broker_config.get_int
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
            new_producer_id=new_producer_id,
            clock=clock,
            abort_markers=self.abort_markers,
        )
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
        info = await self.topics.ensure_internal_topic(
            TRANSACTION_STATE_TOPIC,
            self.num_partitions,
            self._topic_configs(),
            self.run_blocking,
        )
        self.num_partitions = info.partitions

    def _ensure_topic_now(self) -> None:
        """The topic, made on the loop, for a write that finds it missing (a client that
        skipped FindCoordinator)."""
        topics = self.topics
        if topics.get(TRANSACTION_STATE_TOPIC) is None:
            topics.create_topic(TRANSACTION_STATE_TOPIC, self.num_partitions, self._topic_configs())

    async def start(self) -> None:
        topics = self.topics
        info = topics.get(TRANSACTION_STATE_TOPIC)
        # An existing topic keeps its partition count; a missing one is made on first use.
        partitions = 0 if info is None else info.partitions
        if info is not None:
            self.num_partitions = info.partitions
        records: list[tuple[str, TxnLogValue | None]] = []
        for partition in range(partitions):
            partition_log = topics.get_log(TRANSACTION_STATE_TOPIC, partition)
            if partition_log is not None:
                records.extend(await self.run_blocking(_read_all, partition_log, self.load_buffer))
        self.coordinator.load(records)
        # Before the prepared transactions are completed: their markers must not end a
        # hanging transaction of the same producer epoch. Kafka divergence: Kafka leaves a
        # hanging transaction to an operator (KIP-664); here Produce v12's records may be on
        # disk without their Ongoing record (add_partitions' ``early``), so the start aborts
        # what that window leaves.
        for (producer_id, epoch), open_in in self._hanging_transactions().items():
            self.coordinator.abort_hanging(
                producer_id,
                epoch,
                open_in,
                "records of a transaction whose partition __transaction_state does not hold "
                "(its Ongoing record was lost)",
            )
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

    def write_record(
        self,
        transactional_id: str,
        value: TxnLogValue | None,
        *,
        lazy: bool = False,
        defer_flush: bool = False,
    ) -> Awaitable[None]:
        """Append now (raises on failure); the awaitable resolves once the HW covers it.

        ``lazy``: no flush is started for this record and nobody waits for it (the awaitable
        is resolved already); the next append to the partition (whose wait covers this one)
        or the broker's flush tick (``FLUSH_TICK_S``, the flush policy) makes it durable."""
        partition = self.partition_for(transactional_id)
        self._ensure_topic_now()
        record = (
            encode_txn_key(transactional_id),
            None if value is None else encode_txn_value(value),
        )
        return self.writer.append(
            TRANSACTION_STATE_TOPIC,
            partition,
            encode_records([record], self.clock()),
            timeout_ms=WRITE_TIMEOUT_MS,
            lazy=lazy,
            defer_flush=defer_flush,
        ).durable

    def _hanging_transactions(self) -> dict[tuple[int, int], list[tuple[str, int]]]:
        """Per (producer id, epoch), the partitions where a transaction of a known producer is
        open that the loaded coordinator does not hold (``TransactionCoordinator.is_hanging``):
        the records of an early Ongoing record (``add_partitions``) that a crash lost.
        Partitions of internal topics are left out (their transactional writes wait for
        the Ongoing record)."""
        hanging: dict[tuple[int, int], list[tuple[str, int]]] = {}
        is_hanging = self.coordinator.is_hanging
        for info in self.topics:
            if info.is_internal:
                continue
            for partition in range(info.partitions):
                partition_log = self.topics.get_log(info.name, partition)
                if partition_log is None:
                    continue
                for producer_id, entry in partition_log.producer_state.producers.items():
                    if entry.current_txn_first_offset < 0:
                        continue
                    tp = (info.name, partition)
                    if is_hanging(producer_id, entry.producer_epoch, tp):
                        hanging.setdefault((producer_id, entry.producer_epoch), []).append(tp)
        return hanging

    def abort_markers(
        self, producer_id: int, producer_epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> None:
        """Append an ABORT marker of the producer to each partition now (a hanging
        transaction; ``TransactionCoordinator.abort_hanging``); the partitions' flush policy
        makes them durable."""
        for topic, partition in partitions:
            if self.topics.get_log(topic, partition) is not None:
                whose = f"producer id {producer_id}"
                self._append_marker(topic, partition, producer_id, producer_epoch, False, whose)

    def _append_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        whose: str,
        *,
        defer_flush: bool = False,
    ) -> Appended | None:
        """One marker, appended now; None (logged) when the partition refuses it."""
        try:
            return self.writer.append_marker(
                topic,
                partition,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                coordinator_epoch=COORDINATOR_EPOCH,
                commit=commit,
                timeout_ms=WRITE_TIMEOUT_MS,
                defer_flush=defer_flush,
            )
        except CoordinatorLogError as exc:
            log.warning("marker for %s-%d of %s refused: %s", topic, partition, whose, exc)
            return None

    def write_markers(self, md: TransactionMetadata, commit: bool) -> Awaitable[None]:
        """Append a marker to every partition of ``md`` now; the awaitable resolves once
        every one is durable (and the transaction's offsets, if any, are then applied)."""
        waits: list[Awaitable[None]] = []
        for topic, partition in sorted(md.partitions):
            if self.topics.get_log(topic, partition) is None:
                log.info("no marker for %s-%d: the partition is gone", topic, partition)
                continue
            if topic == OFFSETS_TOPIC:
                try:
                    waits.append(
                        self.complete_offsets_transaction(
                            partition, md.producer_id, md.producer_epoch, commit
                        )
                    )
                except CoordinatorLogError as exc:
                    log.warning(
                        "marker for %s-%d of %r refused: %s",
                        topic,
                        partition,
                        md.transactional_id,
                        exc,
                    )
                continue
            # EndTxn's answer leaves in this turn of the loop; the markers' fsync, which
            # nothing on the client's path waits for, starts after it
            appended = self._append_marker(
                topic,
                partition,
                md.producer_id,
                md.producer_epoch,
                commit,
                repr(md.transactional_id),
                defer_flush=True,
            )
            if appended is not None and appended.durable is not DONE:
                waits.append(appended.durable)
        return self._markers_durable(waits)

    async def _markers_durable(self, waits: list[Awaitable[None]]) -> None:
        if len(waits) == 1:  # the common case: no gather (a task per awaitable)
            await waits[0]
        elif waits:
            await asyncio.gather(*waits)


def _read_all(partition_log: PartitionLog, max_bytes: int) -> list[tuple[str, TxnLogValue | None]]:
    """Every ``__transaction_state`` record up to the HW (worker thread)."""
    out: list[tuple[str, TxnLogValue | None]] = []
    for offset, data in read_from_start(partition_log, max_bytes):
        for record in iter_records(data):
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
    return out
