"""KIP-1071 streams groups (``group.protocol=streams`` of Kafka Streams) beside the classic and
consumer group coordinators.

``topology``: the topology a client declares and what the coordinator makes of it (task counts,
internal topics to create, status); ``assignor``: the sticky task assignor; ``model``: groups,
members and the reconciliation of a member; ``records``: the StreamsGroup* record layouts;
``state_records``: a group's changes as those records and their replay; ``coordinator``: the
heartbeat, fencing and the offset-commit rules of streams groups (what it shares with the
consumer groups' is ``broker/group/modern.py``).

``install(classic, ...)`` creates ``StreamsGroups`` over the classic coordinator:
it uses its timer and its offsets (the offset manager asks it about the groups it owns).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tidelog.broker.coordinator.log import KeyValue
from tidelog.broker.group.modern import GroupRuntime
from tidelog.broker.group.streams.coordinator import Host, StreamsGroups

if TYPE_CHECKING:
    from tidelog.broker.group.coordinator import GroupCoordinator
    from tidelog.broker.topics import Topics
    from tidelog.config import BrokerConfig

__all__ = ["StreamsGroups", "install"]

log = logging.getLogger("tidelog.group.streams")


def install(
    classic: GroupCoordinator,
    topic_registry: Topics,
    config: BrokerConfig,
    run_blocking: Callable[..., Awaitable[Any]],
) -> StreamsGroups:
    from tidelog.broker.topics import TopicError

    def other_group(group_id: str) -> bool:
        group = classic.groups.get(group_id)
        consumer = classic.consumer_groups
        if consumer is not None and consumer.owns(group_id):
            return True
        return group is not None and not group.is_empty

    def partitions() -> dict[str, int]:
        return {name: n for name, (_tid, n) in topic_registry.user_topic_ids().items()}

    async def create_topics(topics: Mapping[str, tuple[int, Mapping[str, str]]]) -> None:
        for name, (count, configs) in sorted(topics.items()):
            if topic_registry.get(name) is not None:
                continue
            try:
                await topic_registry.create_topic_async(name, count, dict(configs), run_blocking)
                log.info("created internal topic %s (%d partitions)", name, count)
            except TopicError as exc:
                log.warning("could not create internal topic %s: %s", name, exc.message)

    def settings(group_id: str) -> tuple[int, int, int]:
        return (
            config.get_int("group.streams.session.timeout.ms"),
            config.get_int("group.streams.heartbeat.interval.ms"),
            config.get_int("group.streams.num.standby.replicas"),
        )

    def write(group_id: str, records: Sequence[KeyValue]) -> Awaitable[None]:
        waiter: Awaitable[None] = classic.metadata_log.write(group_id, records)
        return waiter

    host = Host(
        runtime=GroupRuntime(
            write=write,
            schedule=classic.timer.schedule,
            cancel=classic.timer.cancel,
            inactive_error=classic.metadata_log.inactive_error,
        ),
        other_group=other_group,
        partitions=partitions,
        create_topics=create_topics,
        settings=settings,
        max_size=config.get_int("group.streams.max.size"),
    )
    groups = StreamsGroups(host)
    classic.offset_manager.streams_groups = groups
    classic.streams_groups = groups
    return groups
