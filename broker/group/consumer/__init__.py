"""KIP-848 consumer groups (``group.protocol=consumer``) beside the classic group coordinator.

``records``: Kafka 4's ``__consumer_offsets`` record types of consumer groups, byte for byte;
``state_records``: a group's state as those records and their replay; ``heartbeat``: the
request and result values of a heartbeat and the ``Host`` the coordinator uses;
``assignors``: the server-side ``uniform`` and ``range`` assignors; ``model``: groups, members
and the reconciliation of a member (revocation before reassignment); ``coordinator``: the
heartbeat, fencing, replay and the offset-commit rules of consumer groups (what it shares with
the streams groups' is ``broker/group/modern.py``).

``install(classic, ...)`` creates ``ConsumerGroups`` over the classic coordinator:
it shares its ``__consumer_offsets`` partitions, timer, offsets and start-up replay, through the
few hooks ``GroupCoordinator.consumer_groups`` offers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import KeyValue
from tidelog.broker.group.consumer.assignors import names as assignor_names
from tidelog.broker.group.consumer.coordinator import ConsumerGroups
from tidelog.broker.group.consumer.heartbeat import Host
from tidelog.broker.group.modern import GroupRuntime

if TYPE_CHECKING:
    from tidelog.broker.dynamic_configs import DynamicConfigs
    from tidelog.broker.group.coordinator import GroupCoordinator
    from tidelog.broker.topics import Topics
    from tidelog.config import BrokerConfig

__all__ = ["ConsumerGroups", "install"]


def install(
    classic: GroupCoordinator,
    topics: Topics,
    config: BrokerConfig,
    dynamic_configs: DynamicConfigs,
) -> ConsumerGroups:
    def write(group_id: str, records: Sequence[KeyValue]) -> Awaitable[None]:
        # replayed into the consumer groups as appended (their one mutation path)
        waiter: Awaitable[None] = classic.metadata_log.write(
            group_id, records, replay=True, at_append=True
        )
        return waiter

    def inactive_error() -> ErrorCode | None:
        error: ErrorCode | None = classic.metadata_log.inactive_error()
        return error

    def classic_group_busy(group_id: str) -> bool | None:
        streams = classic.streams_groups
        if streams is not None and streams.owns(group_id):
            return True  # a streams group's id: "Group X is not a consumer group."
        group = classic.groups.get(group_id)
        return None if group is None else not group.is_empty

    def drop_classic_group(group_id: str) -> None:
        classic.groups.pop(group_id, None)

    def timeouts(group_id: str) -> tuple[int, int]:
        settings = dynamic_configs.group_config(group_id)
        return (
            int(settings["consumer.session.timeout.ms"]),
            int(settings["consumer.heartbeat.interval.ms"]),
        )

    host = Host(
        runtime=GroupRuntime(
            write=write,
            schedule=classic.timer.schedule,
            cancel=classic.timer.cancel,
            inactive_error=inactive_error,
        ),
        classic_group_busy=classic_group_busy,
        drop_classic_group=drop_classic_group,
        topics=lambda: topics.user_topic_ids(),
        timeouts=timeouts,
        assignors=tuple(assignor_names(config.get("group.consumer.assignors"))),
        max_size=config.get_int("group.consumer.max.size"),
    )
    groups = ConsumerGroups(host)
    classic.consumer_groups = groups
    return groups
