"""The group coordinator's settings, read once from the broker configuration."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_retention_ms: int = 10080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    offsets_commit_timeout_ms: int = 5000
    offset_metadata_max_bytes: int = 4096
    #: How long a new member's parked JoinGroup may wait (Kafka: 5 minutes, not configurable).
    new_member_join_timeout_ms: int = 300_000

    @classmethod
    def from_lookup(cls, get: Callable[[str], object]) -> GroupConfig:
        """Build from a ``BrokerConfig.get``-like function; names it does not know keep defaults."""
        d = cls()

        def val(name: str, default: int, scale: int = 1) -> int:
            try:
                v = get(name)
            except Exception:  # unknown name in this build of the config package
                return default
            if isinstance(v, bool) or not isinstance(v, int):
                return default
            return v * scale

        return cls(
            initial_rebalance_delay_ms=val(
                "group.initial.rebalance.delay.ms", d.initial_rebalance_delay_ms
            ),
            min_session_timeout_ms=val("group.min.session.timeout.ms", d.min_session_timeout_ms),
            max_session_timeout_ms=val("group.max.session.timeout.ms", d.max_session_timeout_ms),
            max_size=val("group.max.size", d.max_size),
            offsets_topic_num_partitions=val(
                "offsets.topic.num.partitions", d.offsets_topic_num_partitions
            ),
            offsets_topic_segment_bytes=val(
                "offsets.topic.segment.bytes", d.offsets_topic_segment_bytes
            ),
            offsets_retention_ms=val(
                "offsets.retention.minutes", d.offsets_retention_ms // 60_000, 60_000
            ),
            offsets_retention_check_interval_ms=val(
                "offsets.retention.check.interval.ms", d.offsets_retention_check_interval_ms
            ),
            offsets_commit_timeout_ms=val("offsets.commit.timeout.ms", d.offsets_commit_timeout_ms),
            offset_metadata_max_bytes=val("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
        )
