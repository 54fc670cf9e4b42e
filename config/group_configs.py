"""The settings of the group coordinators (Kafka's ``GroupCoordinatorConfig`` and
``ShareGroupConfig``): classic groups and committed offsets, the consumer groups of KIP-848
(``group.protocol=consumer``) and share groups (KIP-932), under Kafka 4's names and defaults.
"""

from __future__ import annotations

from tidelog.config.config_def import INT_MAX, ConfigDef, broker_def

__all__ = ("GROUP_CONFIGS",)

GROUP_CONFIGS: tuple[ConfigDef, ...] = (
    # Groups and offsets.
    broker_def(
        "offsets.topic.num.partitions",
        "int",
        50,
        "Partitions of __consumer_offsets (fixed once the topic exists).",
        min_value=1,
    ),
    broker_def(
        "offsets.topic.replication.factor",
        "short",
        1,
        "Replication factor of __consumer_offsets. Accepted for compatibility, not read (one "
        "node).",
        min_value=1,
    ),
    broker_def(
        "offsets.topic.segment.bytes",
        "int",
        104857600,
        "Segment size of __consumer_offsets.",
        min_value=1,
    ),
    broker_def(
        "offsets.retention.minutes",
        "int",
        10080,
        "Committed offsets of an empty group expire after this long.",
        min_value=1,
    ),
    broker_def(
        "offsets.retention.check.interval.ms",
        "long",
        600000,
        "How often expired offsets are removed.",
        min_value=1,
    ),
    broker_def(
        "offsets.commit.timeout.ms",
        "int",
        5000,
        "The longest an OffsetCommit answer waits for its __consumer_offsets append to be "
        "covered by the high watermark (with flush.messages=1, the default, that is its fsync); "
        "REQUEST_TIMED_OUT after that.",
        min_value=1,
    ),
    broker_def(
        "offsets.load.buffer.size",
        "int",
        5242880,
        "Read size when loading __consumer_offsets at start-up.",
        min_value=1,
    ),
    broker_def(
        "offset.metadata.max.bytes",
        "int",
        4096,
        "Longest metadata string stored with a committed offset.",
        min_value=0,
    ),
    broker_def(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        "Wait this long for more members before the first rebalance of an empty group.",
        min_value=0,
    ),
    broker_def(
        "group.min.session.timeout.ms",
        "int",
        6000,
        "Smallest session timeout a member may ask for.",
        min_value=0,
    ),
    broker_def(
        "group.max.session.timeout.ms",
        "int",
        1800000,
        "Largest session timeout a member may ask for.",
        min_value=0,
    ),
    broker_def("group.max.size", "int", INT_MAX, "Most members in one group.", min_value=1),
    # Consumer groups of KIP-848 (group.protocol=consumer); Kafka 4's names and defaults.
    # Streams groups of KIP-1071 (group.protocol=streams); Kafka 4's names and defaults.
    broker_def(
        "group.streams.session.timeout.ms",
        "int",
        45000,
        "A streams-group member that sends no heartbeat for this long is fenced.",
        min_value=1,
    ),
    broker_def(
        "group.streams.heartbeat.interval.ms",
        "int",
        5000,
        "How often streams-group members are told to heartbeat.",
        min_value=1,
    ),
    broker_def(
        "group.streams.num.standby.replicas",
        "int",
        0,
        "Standby copies of each task a streams group's assignment holds.",
        min_value=0,
    ),
    broker_def(
        "group.streams.max.size", "int", INT_MAX, "Most members in a streams group.", min_value=1
    ),
    broker_def(
        "group.consumer.session.timeout.ms",
        "int",
        45000,
        "A consumer-group member that sends no heartbeat for this long is fenced.",
        min_value=1,
    ),
    broker_def(
        "group.consumer.min.session.timeout.ms",
        "int",
        45000,
        "Smallest consumer.session.timeout.ms a group config may set.",
        min_value=1,
    ),
    broker_def(
        "group.consumer.max.session.timeout.ms",
        "int",
        60000,
        "Largest consumer.session.timeout.ms a group config may set.",
        min_value=1,
    ),
    broker_def(
        "group.consumer.heartbeat.interval.ms",
        "int",
        5000,
        "How often consumer-group members are told to heartbeat.",
        min_value=1,
    ),
    broker_def(
        "group.consumer.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest consumer.heartbeat.interval.ms a group config may set.",
        min_value=1,
    ),
    broker_def(
        "group.consumer.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest consumer.heartbeat.interval.ms a group config may set.",
        min_value=1,
    ),
    broker_def(
        "group.consumer.assignors",
        "list",
        "uniform,range",
        "Server-side assignors of consumer groups; the first is the default.",
    ),
    broker_def(
        "group.consumer.max.size",
        "int",
        INT_MAX,
        "Most members in one consumer group.",
        min_value=1,
    ),
    # Share groups (KIP-932).
    broker_def(
        "group.share.max.size",
        "int",
        200,
        "Most members in one share group.",
        min_value=1,
        max_value=1000,
    ),
    broker_def(
        "group.share.session.timeout.ms",
        "int",
        45000,
        "How long a share-group member may go without a heartbeat.",
        min_value=1,
    ),
    broker_def(
        "group.share.min.session.timeout.ms",
        "int",
        45000,
        "Smallest share.session.timeout.ms a group config may set.",
        min_value=1,
    ),
    broker_def(
        "group.share.max.session.timeout.ms",
        "int",
        60000,
        "Largest share.session.timeout.ms a group config may set.",
        min_value=1,
    ),
    broker_def(
        "group.share.heartbeat.interval.ms",
        "int",
        5000,
        "How often share-group members are told to heartbeat.",
        min_value=1,
    ),
    broker_def(
        "group.share.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest share.heartbeat.interval.ms a group config may set.",
        min_value=1,
    ),
    broker_def(
        "group.share.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest share.heartbeat.interval.ms a group config may set.",
        min_value=1,
    ),
    broker_def(
        "group.share.record.lock.duration.ms",
        "int",
        30000,
        "How long a share-group member holds the records it acquired.",
        min_value=1000,
        max_value=3600000,
    ),
    broker_def(
        "group.share.min.record.lock.duration.ms",
        "int",
        15000,
        "Smallest share.record.lock.duration.ms a group config may set.",
        min_value=1000,
        max_value=3600000,
    ),
    broker_def(
        "group.share.max.record.lock.duration.ms",
        "int",
        60000,
        "Largest share.record.lock.duration.ms a group config may set.",
        min_value=1000,
        max_value=3600000,
    ),
    broker_def(
        "group.share.delivery.count.limit",
        "int",
        5,
        "Deliveries of a record to share-group members before it is archived.",
        min_value=2,
        max_value=10,
    ),
    broker_def(
        "group.share.partition.max.record.locks",
        "int",
        2000,
        "Most in-flight records of one share partition.",
        min_value=100,
        max_value=10000,
    ),
    broker_def(
        "group.share.max.share.sessions",
        "int",
        2000,
        "Most share sessions the broker keeps.",
        min_value=1,
    ),
    broker_def(
        "share.coordinator.state.topic.num.partitions",
        "int",
        50,
        "Partitions of __share_group_state (fixed once the topic exists).",
        min_value=1,
    ),
    broker_def(
        "share.coordinator.state.topic.segment.bytes",
        "int",
        104857600,
        "Segment size of __share_group_state.",
        min_value=14,
    ),
)
