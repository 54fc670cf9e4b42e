"""A coordinator's internal topic on the broker's storage: the ``CoordinatorLog`` of a runtime.

``InternalTopicLog`` serves one internal topic (``__consumer_offsets`` for the group
coordinator, ``__share_group_state`` for the share coordinator): it creates the topic on first
use, as Kafka does (``create_topic`` in a worker thread for FindCoordinator, ``ensure_topic`` on
the loop for a write that finds it missing), with the coordinator's settings; an existing topic
keeps its partition count. Appends and markers go through the broker's one ``PartitionWriter``;
``read_partition`` reads a partition from its log start to its HW in a worker thread (markers
included, for the replay).

It gets the narrow interface it uses: the topic registry (``TopicView``), the writer and the
worker-thread runner - not the broker.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from tidelog.broker.coordinator.log import (
    NO_PRODUCER_ID,
    Appended,
    KeyValue,
    LogRecord,
    encode_records,
    log_records,
)
from tidelog.broker.coordinator.partition_writer import PartitionWriter
from tidelog.storage import PartitionLog
from tidelog.storage.reading import read_from_start

__all__ = ("InternalTopicLog", "TopicView")

log = logging.getLogger("tidelog.coordinator")


class TopicView(Protocol):
    """What an internal topic needs from the topic registry (``broker.topics.Topics``)."""

    def get(self, name: str) -> Any: ...

    def create_topic(
        self, name: str, num_partitions: int, configs: Mapping[str, str | None] | None = None
    ) -> Any: ...

    async def ensure_internal_topic(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str],
        run_blocking: Callable[..., Awaitable[Any]],
    ) -> Any: ...


class InternalTopicLog:
    """``CoordinatorLog`` over one internal topic (see the module)."""

    def __init__(
        self,
        topic: str,
        *,
        topics: TopicView,
        writer: PartitionWriter,
        run_blocking: Callable[..., Awaitable[Any]],
        num_partitions: int,
        topic_configs: Mapping[str, str],
        load_buffer_bytes: int,
        coordinator_epoch: int = 0,
    ) -> None:
        self.topic = topic
        self._topics = topics
        self._writer = writer
        self._run_blocking = run_blocking
        self._n = num_partitions
        self._configs = dict(topic_configs)
        self._load_buffer = max(load_buffer_bytes, 64 * 1024)
        self._coordinator_epoch = coordinator_epoch

    @property
    def num_partitions(self) -> int:
        return self._n

    async def prepare(self) -> None:
        info = self._topics.get(self.topic)
        if info is not None:
            self._n = info.partitions

    def exists(self) -> bool:
        return self._topics.get(self.topic) is not None

    def ensure_topic(self) -> None:
        """Create the topic if it does not exist yet, on the loop (a write that finds it
        missing; FindCoordinator uses ``create_topic`` first)."""
        info = self._topics.get(self.topic)
        if info is None:
            info = self._topics.create_topic(self.topic, self._n, self._configs)
            log.info("created %s (%d partitions)", self.topic, info.partitions)
        self._n = info.partitions

    async def create_topic(self) -> None:
        """The topic on first use, as Kafka creates it: its partitions are made in a worker
        thread while the loop serves others."""
        info = await self._topics.ensure_internal_topic(
            self.topic, self._n, self._configs, self._run_blocking
        )
        self._n = info.partitions

    async def read_partition(self, partition: int) -> list[LogRecord]:
        if self._topics.get(self.topic) is None:
            return []  # not created yet: nothing to load
        partition_log = self._writer.log_for(self.topic, partition)
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
            self.topic,
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
            self.topic,
            partition,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=self._coordinator_epoch,
            commit=commit,
            timeout_ms=timeout_ms,
        )


def _read_all(partition_log: PartitionLog, max_bytes: int) -> list[LogRecord]:
    """Every record from the log start to the HW, markers included (a worker thread)."""
    out: list[LogRecord] = []
    for offset, data in read_from_start(partition_log, max_bytes):
        out.extend(log_records(data, offset))
    return out
