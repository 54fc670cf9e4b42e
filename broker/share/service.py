"""The share coordinator on real storage (``broker.share_groups``).

``share_coordinator(...)`` builds the membership (``ShareGroups``, on the group coordinator's
timer and clock), the persister and the coordinator, in a service whose ``start`` loads
``__share_group_state`` (after the topic registry; before any request) and whose ``stop``
cancels the member timers (``broker/coordinators.py`` sets ``broker.share_groups`` and adds the
service to ``broker.services``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tidelog.broker.coordinator.topic_log import InternalTopicLog
from tidelog.broker.share.coordinator import ShareCoordinator, ShareHost
from tidelog.broker.share.groups import GroupHost, ShareGroups
from tidelog.broker.share.metrics import share_families
from tidelog.broker.share.persister import SHARE_STATE_TOPIC, SharePersister, state_batches

if TYPE_CHECKING:
    from tidelog.broker.coordinator.partition_writer import PartitionWriter
    from tidelog.broker.group.coordinator import GroupCoordinator
    from tidelog.broker.topics import Topics

__all__ = ("ShareService", "share_coordinator")

log = logging.getLogger("tidelog.share")


class ShareService:
    def __init__(
        self, topics: Topics, coordinator: ShareCoordinator, persister: SharePersister
    ) -> None:
        self.topics = topics
        self.coordinator = coordinator
        self.persister = persister

    @property
    def families(self) -> Callable[[], Iterator[Any]]:
        """The share coordinator's metric families (for ``Metrics.extra_families``)."""
        return share_families(self.coordinator.metric_totals)

    async def start(self) -> None:
        loaded = await self.persister.load()
        # share partitions of topics deleted while the tombstone was not yet written go now
        gone = [key for key in loaded if self.topics.by_id(key[1]) is None]
        if gone:
            await self.persister.write([(key, None) for key in gone])
            log.info("dropped the state of %d share partitions of deleted topics", len(gone))
        for (group_id, topic_id, partition), value in loaded.items():
            if self.topics.by_id(topic_id) is None:
                continue
            sp = self.coordinator.new_share_partition(
                group_id, value.start_offset, value.state_epoch
            )
            sp.restore(value.start_offset, state_batches(value))
            self.coordinator.partitions[(group_id, topic_id, partition)] = sp
        if loaded:
            log.info("loaded the state of %d share partitions", len(loaded))

    async def stop(self) -> None:
        groups = self.coordinator.groups
        for group in groups.groups.values():
            for member_id in group.members:
                groups.host.cancel(f"share-heartbeat:{group.group_id}:{member_id}")
        for key in list(self.coordinator.lock_timers):
            self.coordinator.cancel_lock_timer(key)
        await self.persister.runtime.stop()


def share_coordinator(
    broker: ShareHost, classic: GroupCoordinator, writer: PartitionWriter
) -> ShareService:
    # Share-group membership (groups, members, epochs, assignments) is written to
    # __consumer_offsets as Kafka's share-group records and replayed by the group
    # coordinator's load (broker/share/records.py); the share-partition state is durable in
    # __share_group_state.
    timer = classic.timer
    persister = SharePersister(
        InternalTopicLog(
            SHARE_STATE_TOPIC,
            topics=broker.topics,
            writer=writer,
            run_blocking=broker.run_blocking,
            num_partitions=broker.config.get_int("share.coordinator.state.topic.num.partitions"),
            topic_configs={
                "cleanup.policy": "compact",
                "segment.bytes": str(
                    broker.config.get_int("share.coordinator.state.topic.segment.bytes")
                ),
                "min.insync.replicas": "1",
            },
            load_buffer_bytes=1024 * 1024,
        ),
        timer.now_ms,
    )
    holder: list[ShareCoordinator] = []

    def timeouts(group_id: str) -> tuple[int, int]:
        config = broker.dynamic_configs.group_config(group_id)
        return (
            int(config["share.session.timeout.ms"]),
            int(config["share.heartbeat.interval.ms"]),
        )

    def other_group_type(group_id: str) -> str | None:
        if group_id in classic.groups:
            return "classic"
        consumer = classic.consumer_groups
        if consumer is not None and group_id in consumer.groups:
            return "consumer"
        return None

    host = GroupHost(
        now_ms=timer.now_ms,
        schedule=timer.schedule,
        cancel=timer.cancel,
        topics=lambda: broker.topics.user_topic_ids(),
        timeouts=timeouts,
        max_size=broker.config.get_int("group.share.max.size"),
        other_group_type=other_group_type,
        on_assigned=lambda g, t, p: holder[0].on_assigned(g, t, p),
        on_member_gone=lambda g, m: holder[0].on_member_gone(g, m),
        initialized=lambda g, t, p: holder[0].initialized(g, t, p),
        # replayed into the share groups as appended (their one mutation path)
        write=lambda g, records: classic.metadata_log.write(
            g, records, replay=True, at_append=True
        ),
    )
    share_groups = ShareGroups(host)
    classic.share_groups = share_groups  # the group coordinator's load replays their records
    coordinator = ShareCoordinator(
        broker,
        share_groups,
        timer.now_ms,
        persister.write,
        schedule=timer.schedule,
        cancel=timer.cancel,
    )
    holder.append(coordinator)
    return ShareService(broker.topics, coordinator, persister)
