"""The group coordinator on real storage: ``__consumer_offsets``.

``group_coordinator(...)`` creates the coordinator over an ``InternalTopicLog``
(``broker/coordinator/topic_log.py``); ``broker/coordinators.py`` sets it as ``broker.groups``
and adds it to ``broker.services`` (started after the topic registry is loaded, stopped before
storage shuts down). As in Kafka, the topic is created on the first group request
(FindCoordinator for a group, or the first write of the coordinator), not at start-up: a broker
nobody uses for groups never pays for its partitions. It is created through the topic registry
(so Metadata lists it as internal) with Kafka's settings: ``offsets.topic.num.partitions``
partitions, ``cleanup.policy=compact``, ``segment.bytes=offsets.topic.segment.bytes``,
``compression.type=producer``. An existing topic keeps its partition count (as in Kafka, the
count is fixed once the topic exists); until the topic exists there is nothing to load.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tidelog.broker.coordinator.topic_log import InternalTopicLog
from tidelog.broker.group.config import OFFSETS_TOPIC, GroupConfig
from tidelog.broker.group.coordinator import GroupCoordinator
from tidelog.broker.group.timer import LoopTimer
from tidelog.broker.txn.coordinator import COORDINATOR_EPOCH

if TYPE_CHECKING:
    from tidelog.broker.coordinator.partition_writer import PartitionWriter
    from tidelog.broker.topics import Topics
    from tidelog.config import BrokerConfig

__all__ = ("GROUP_KEY_TYPE", "group_coordinator")

#: FindCoordinator's key type for a group.
GROUP_KEY_TYPE = 0


def group_coordinator(
    broker_config: BrokerConfig,
    topics: Topics,
    writer: PartitionWriter,
    run_blocking: Callable[..., Awaitable[Any]],
    clock: Callable[[], int],
) -> tuple[GroupCoordinator, InternalTopicLog]:
    """The coordinator and its ``__consumer_offsets`` (made on first use: ``ensure_topic``,
    ``create_topic``)."""
    config = GroupConfig.from_lookup(broker_config.get)
    try:
        load_buffer = broker_config.get_int("offsets.load.buffer.size")
    except Exception:
        load_buffer = 5 * 1024 * 1024
    store = InternalTopicLog(
        OFFSETS_TOPIC,
        topics=topics,
        writer=writer,
        run_blocking=run_blocking,
        num_partitions=config.offsets_topic_num_partitions,
        topic_configs={
            "cleanup.policy": "compact",
            "segment.bytes": str(config.offsets_topic_segment_bytes),
            "compression.type": "producer",
        },
        load_buffer_bytes=load_buffer,
        coordinator_epoch=COORDINATOR_EPOCH,
    )

    def partition_exists(topic: str, partition: int) -> bool:
        info = topics.get(topic)
        return info is not None and 0 <= partition < info.partitions

    coordinator = GroupCoordinator(
        config, store, LoopTimer(clock=clock), partition_exists=partition_exists
    )
    return coordinator, store
