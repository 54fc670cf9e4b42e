"""The group coordinator's settings, read once from the broker configuration; their defaults
are the definitions' (``config/group_configs.py``), never repeated here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tidelog.config.definitions import int_default

OFFSETS_TOPIC = "__consumer_offsets"

_MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = int_default("group.initial.rebalance.delay.ms")
    min_session_timeout_ms: int = int_default("group.min.session.timeout.ms")
    max_session_timeout_ms: int = int_default("group.max.session.timeout.ms")
    max_size: int = int_default("group.max.size")
    offsets_topic_num_partitions: int = int_default("offsets.topic.num.partitions")
    offsets_topic_segment_bytes: int = int_default("offsets.topic.segment.bytes")
    offsets_retention_ms: int = int_default("offsets.retention.minutes") * _MINUTE_MS
    offsets_retention_check_interval_ms: int = int_default("offsets.retention.check.interval.ms")
    offsets_commit_timeout_ms: int = int_default("offsets.commit.timeout.ms")
    offset_metadata_max_bytes: int = int_default("offset.metadata.max.bytes")
    #: How long a new member's parked JoinGroup may wait (Kafka: 5 minutes, not configurable).
    new_member_join_timeout_ms: int = 300_000

    @classmethod
    def from_lookup(cls, get: Callable[[str], object]) -> GroupConfig:
        """Build from a ``BrokerConfig.get``-like function."""

        def val(name: str) -> int:
            v = get(name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} is not an int: {v!r}")
            return v

        return cls(
            initial_rebalance_delay_ms=val("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=val("group.min.session.timeout.ms"),
            max_session_timeout_ms=val("group.max.session.timeout.ms"),
            max_size=val("group.max.size"),
            offsets_topic_num_partitions=val("offsets.topic.num.partitions"),
            offsets_topic_segment_bytes=val("offsets.topic.segment.bytes"),
            offsets_retention_ms=val("offsets.retention.minutes") * _MINUTE_MS,
            offsets_retention_check_interval_ms=val("offsets.retention.check.interval.ms"),
            offsets_commit_timeout_ms=val("offsets.commit.timeout.ms"),
            offset_metadata_max_bytes=val("offset.metadata.max.bytes"),
        )
