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
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tidelog.broker.group.config import OFFSETS_TOPIC, GroupConfig
from tidelog.broker.group.coordinator import GroupCoordinator
from tidelog.broker.group.log import CoordinatorLogError, KeyValue, LogRecord, encode_records
from tidelog.broker.group.timer import LoopTimer
from tidelog.broker.group.txn_offsets import resolve_transactional
from tidelog.broker.topics import LEADER_EPOCH
from tidelog.protocol.errors import error_code_for
from tidelog.storage import StorageError

if TYPE_CHECKING:
    from tidelog.broker.app import Broker
    from tidelog.storage import PartitionLog

log = logging.getLogger("tidelog.group")

__all__ = ("BrokerCoordinatorLog", "install")

#: A HW wait has no deadline of its own: the coordinator bounds it (offsets.commit.timeout.ms).
_FOREVER_S = 365 * 24 * 3600.0
#: FindCoordinator's key type for a group.
GROUP_KEY_TYPE = 0


class BrokerCoordinatorLog:
    """``CoordinatorLog`` over the broker's topic registry, storage and HW waiters."""

    def __init__(self, broker: Broker, config: GroupConfig, load_buffer_bytes: int) -> None:
        self._broker = broker
        self._config = config
        self._n = config.offsets_topic_num_partitions
        self._load_buffer = max(load_buffer_bytes, 64 * 1024)
        #: Records of transactions with no marker yet, by producer id, found by the replay
        #: (``broker/group/txn_offsets.py`` makes them pending TxnOffsetCommits again).
        self.pending_transactional: dict[int, list[LogRecord]] = {}

    @property
    def num_partitions(self) -> int:
        return self._n

    async def prepare(self) -> None:
        info = self._broker.topics.get(OFFSETS_TOPIC)
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
        topics = self._broker.topics
        info = topics.get(OFFSETS_TOPIC)
        if info is None:
            info = topics.create_topic(
                OFFSETS_TOPIC, self._config.offsets_topic_num_partitions, self._topic_configs()
            )
            log.info("created %s (%d partitions)", OFFSETS_TOPIC, info.partitions)
        self._n = info.partitions

    async def create_topic(self) -> None:
        """``__consumer_offsets`` on the first FindCoordinator for a group, as Kafka creates
        it: its partitions are made in a worker thread while the loop serves others."""
        info = await self._broker.topics.ensure_internal_topic(
            OFFSETS_TOPIC,
            self._config.offsets_topic_num_partitions,
            self._topic_configs(),
            self._broker.run_blocking,
        )
        self._n = info.partitions

    def _log(self, partition: int) -> PartitionLog:
        self.ensure_topic()
        partition_log = self._broker.topics.get_log(OFFSETS_TOPIC, partition)
        if partition_log is None:
            raise CoordinatorLogError(
                ErrorCode.unknown_topic_or_partition, f"{OFFSETS_TOPIC}-{partition} is missing"
            )
        return partition_log

    async def read_partition(self, partition: int) -> list[LogRecord]:
        if self._broker.topics.get(OFFSETS_TOPIC) is None:
            return []  # not created yet: nothing to load
        partition_log = self._log(partition)
        return await self._broker.run_blocking(
            _read_all, partition_log, self._load_buffer, self.pending_transactional
        )

    def append(
        self, partition: int, records: Sequence[KeyValue], timestamp_ms: int
    ) -> Awaitable[None]:
        partition_log = self._log(partition)
        hw_before = partition_log.high_watermark
        try:
            info = partition_log.append(
                encode_records(records, timestamp_ms),
                now_ms=self._broker.clock(),
                leader_epoch=LEADER_EPOCH,
            )
        except StorageError as exc:
            raise CoordinatorLogError(error_code_for(exc.error_name), str(exc)) from exc
        self._broker.after_append(partition_log, hw_before)
        return self._wait(partition, partition_log, info.last_offset + 1)

    async def _wait(self, partition: int, partition_log: PartitionLog, target: int) -> None:
        if partition_log.high_watermark >= target:
            return
        await self._broker.partitions.wait_until(
            (OFFSETS_TOPIC, partition),
            lambda: partition_log.high_watermark >= target,
            _FOREVER_S,
        )


def _read_all(
    partition_log: PartitionLog, max_bytes: int, held: dict[int, list[LogRecord]]
) -> list[LogRecord]:
    """Every record from the log start to the HW (runs in a worker thread); transactional
    records only once their COMMIT marker is read (``txn_offsets.resolve_transactional``)."""
    out: list[LogRecord] = []
    offset = partition_log.log_start_offset
    while True:
        info = partition_log.read(offset, max_bytes)
        if info.first_offset is None or info.last_offset is None:
            return out
        resolve_transactional(info.read_bytes(), offset, held, out)
        offset = info.last_offset + 1


def install(broker: Broker) -> GroupCoordinator:
    """Create the coordinator for ``broker`` and register it to start and stop with it."""
    config = GroupConfig.from_lookup(broker.config.get)
    try:
        load_buffer = broker.config.get_int("offsets.load.buffer.size")
    except Exception:
        load_buffer = 5 * 1024 * 1024
    store = BrokerCoordinatorLog(broker, config, load_buffer)

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
