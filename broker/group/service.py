"""Wiring the group coordinator into the broker: ``__consumer_offsets`` on real storage.

``install(broker)`` creates the coordinator, sets ``broker.groups`` and adds it to
``broker.services`` (started after the topic registry is loaded, stopped before storage shuts
down). As in Kafka, the topic is created on the first group request (FindCoordinator for a
group, or the first write of the coordinator), not at start-up: a broker nobody uses for groups
never pays for its partitions. It is created through the topic registry (so Metadata lists it as
internal) with Kafka's settings: ``offsets.topic.num.partitions`` partitions,
``cleanup.policy=compact``, ``segment.bytes=offsets.topic.segment.bytes``,
``compression.type=producer``. An existing topic keeps its partition count (as in Kafka, the
count is fixed once the topic exists); until the topic exists there is nothing to load.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from tidelog.broker.coordinator.log import (
    NO_PRODUCER_ID,
    Appended,
    KeyValue,
    LogRecord,
    encode_records,
    log_records,
)
from tidelog.broker.coordinator.partition_writer import PartitionWriter
from tidelog.broker.group.config import OFFSETS_TOPIC, GroupConfig
from tidelog.broker.group.coordinator import GroupCoordinator
from tidelog.broker.group.timer import LoopTimer
from tidelog.broker.txn.coordinator import COORDINATOR_EPOCH

if TYPE_CHECKING:
    from tidelog.broker.app import Broker
    from tidelog.broker.topics import Topics
    from tidelog.storage import PartitionLog

log = logging.getLogger("tidelog.group")

__all__ = ("BrokerCoordinatorLog", "install")

#: FindCoordinator's key type for a group.
GROUP_KEY_TYPE = 0


class BrokerCoordinatorLog:
    """``CoordinatorLog`` over the topic registry and the broker's one ``PartitionWriter``."""

    def __init__(
        self,
        topics: Topics,
        writer: PartitionWriter,
        run_blocking: Callable[..., Awaitable[Any]],
        config: GroupConfig,
        load_buffer_bytes: int,
    ) -> None:
        self._topics = topics
        self._writer = writer
        self._run_blocking = run_blocking
        self._config = config
        self._n = config.offsets_topic_num_partitions
        self._load_buffer = max(load_buffer_bytes, 64 * 1024)

    @property
    def num_partitions(self) -> int:
        return self._n

    async def prepare(self) -> None:
        info = self._topics.get(OFFSETS_TOPIC)
        if info is not None:
            self._n = info.partitions

    def _topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self._config.offsets_topic_segment_bytes),
            "compression.type": "producer",
        }

    def ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` if it does not exist yet, on the loop (a write that
        finds it missing; FindCoordinator uses ``create_topic`` first)."""
        info = self._topics.get(OFFSETS_TOPIC)
        if info is None:
            info = self._topics.create_topic(
                OFFSETS_TOPIC, self._config.offsets_topic_num_partitions, self._topic_configs()
            )
            log.info("created %s (%d partitions)", OFFSETS_TOPIC, info.partitions)
        self._n = info.partitions

    async def create_topic(self) -> None:
        """``__consumer_offsets`` on the first FindCoordinator for a group, as Kafka creates
        it: its partitions are made in a worker thread while the loop serves others."""
        info = await self._topics.ensure_internal_topic(
            OFFSETS_TOPIC,
            self._config.offsets_topic_num_partitions,
            self._topic_configs(),
            self._run_blocking,
        )
        self._n = info.partitions

    async def read_partition(self, partition: int) -> list[LogRecord]:
        if self._topics.get(OFFSETS_TOPIC) is None:
            return []  # not created yet: nothing to load
        self.ensure_topic()
        partition_log = self._writer.log_for(OFFSETS_TOPIC, partition)
        records: list[LogRecord] = await self._run_blocking(
            _read_all, partition_log, self._load_buffer
        )
        return records

    def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        *,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> Appended:
        self.ensure_topic()
        return self._writer.append(
            OFFSETS_TOPIC,
            partition,
            encode_records(records, timestamp_ms, producer_id, producer_epoch),
            timeout_ms=timeout_ms,
            from_coordinator=producer_id != NO_PRODUCER_ID,
        )

    def append_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        timeout_ms: int,
    ) -> Appended:
        self.ensure_topic()
        return self._writer.append_marker(
            OFFSETS_TOPIC,
            partition,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=COORDINATOR_EPOCH,
            commit=commit,
            timeout_ms=timeout_ms,
        )


def _read_all(partition_log: PartitionLog, max_bytes: int) -> list[LogRecord]:
    """Every record from the log start to the HW, markers included (runs in a worker
    thread)."""
    out: list[LogRecord] = []
    offset = partition_log.log_start_offset
    while True:
        info = partition_log.read(offset, max_bytes)
        if info.first_offset is None or info.last_offset is None:
            return out
        out.extend(log_records(info.read_bytes(), offset))
        offset = info.last_offset + 1


def install(broker: Broker) -> GroupCoordinator:
    """Create the coordinator for ``broker`` and register it to start and stop with it."""
    config = GroupConfig.from_lookup(broker.config.get)
    try:
        load_buffer = broker.config.get_int("offsets.load.buffer.size")
    except Exception:
        load_buffer = 5 * 1024 * 1024
    store = BrokerCoordinatorLog(
        broker.topics, broker.partition_writer, broker.run_blocking, config, load_buffer
    )

    def partition_exists(topic: str, partition: int) -> bool:
        info = broker.topics.get(topic)
        return info is not None and 0 <= partition < info.partitions

    coordinator = GroupCoordinator(
        config, store, LoopTimer(clock=broker.clock), partition_exists=partition_exists
    )
    broker.groups = coordinator
    broker.services.append(coordinator)
    broker.ensure_offsets_topic = store.ensure_topic
    broker.coordinator_topics[GROUP_KEY_TYPE] = store.create_topic
    return coordinator
