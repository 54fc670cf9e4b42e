"""Wiring the share coordinator into the broker (``broker.share_groups``).

``install(broker)`` builds the membership (``ShareGroups``, on the group coordinator's timer
and clock), the persister and the coordinator, and registers a service whose ``start`` loads
``__share_group_state`` (after the topic registry; before any request) and whose ``stop``
cancels the member timers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tidelog.broker.coordinator.topic_log import InternalTopicLog
from tidelog.broker.share.coordinator import ShareCoordinator
from tidelog.broker.share.groups import GroupHost, ShareGroups
from tidelog.broker.share.metrics import share_families
from tidelog.broker.share.persister import SHARE_STATE_TOPIC, SharePersister, state_batches

if TYPE_CHECKING:
    from tidelog.broker.app import Broker

__all__ = ("ShareService", "install")

log = logging.getLogger("tidelog.share")


class ShareService:
    def __init__(self, broker: Broker, coordinator: ShareCoordinator, persister: SharePersister):
        self.broker = broker
        self.coordinator = coordinator
        self.persister = persister

    async def start(self) -> None:
        loaded = await self.persister.load()
        # share partitions of topics deleted while the tombstone was not yet written go now
        gone = [key for key in loaded if self.broker.topics.by_id(key[1]) is None]
        if gone:
            await self.persister.write([(key, None) for key in gone])
            log.info("dropped the state of %d share partitions of deleted topics", len(gone))
        for (group_id, topic_id, partition), value in loaded.items():
            if self.broker.topics.by_id(topic_id) is None:
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


def install(broker: Broker) -> ShareCoordinator:
    # Share-group membership (groups, members, epochs, assignments) is written to
    # __consumer_offsets as Kafka's share-group records and replayed by the group
    # coordinator's load (broker/share/records.py); the share-partition state is durable in
    # __share_group_state.
    classic = broker.groups
    timer = classic.timer
    persister = SharePersister(
        InternalTopicLog(
            SHARE_STATE_TOPIC,
            topics=broker.topics,
            writer=broker.partition_writer,
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
        broker.clock,
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
    broker.share_groups = coordinator
    broker.metrics.extra_families.append(share_families(coordinator.metric_totals))
    broker.services.append(ShareService(broker, coordinator, persister))
    return coordinator
