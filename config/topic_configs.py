"""The topic settings (Kafka's ``TopicConfig`` / ``LogConfig``): set per topic at creation or by
AlterConfigs; a setting a topic does not set falls back to its broker synonyms, in order
(``ConfigDef.synonyms``), then to the first synonym's default.
"""

from __future__ import annotations

from tidelog.config.config_def import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    TIMESTAMP_TYPES,
    ConfigDef,
    topic_def,
)

__all__ = ("TOPIC_CONFIG_LIST",)

# Kafka divergence: Kafka 4 also has the topic configs of tiered storage (remote.*,
# local.retention.*), replication throttles, per-codec compression levels, the dead-letter queue
# switch, max.decompressed.message.bytes and message.timestamp.{before,after}.max.ms; tidelog
# does not implement them, so it neither lists nor accepts them (docs/kafka-differences.md).
TOPIC_CONFIG_LIST: tuple[ConfigDef, ...] = (
    topic_def(
        "cleanup.policy",
        "list",
        ["log.cleanup.policy"],
        "delete, compact or both.",
        choices=CLEANUP_POLICIES,
    ),
    topic_def(
        "compression.type",
        "string",
        ["compression.type"],
        "Codec of stored batches.",
        choices=COMPRESSION_TYPES,
    ),
    topic_def(
        "delete.retention.ms",
        "long",
        ["log.cleaner.delete.retention.ms"],
        "How long tombstones survive compaction.",
        min_value=0,
    ),
    topic_def(
        "file.delete.delay.ms",
        "long",
        ["log.segment.delete.delay.ms"],
        "Delay before a deleted segment's files are removed.",
        min_value=0,
    ),
    # Kafka divergence: the default (log.flush.interval.messages) is 1 here, Long.MAX in Kafka:
    # one node has no replicas, so an acknowledged record is on disk (docs/kafka-differences.md).
    topic_def(
        "flush.messages",
        "long",
        ["log.flush.interval.messages"],
        "fsync after this many messages; 1 means an ack (acks=all or 1) waits for the fsync.",
        min_value=1,
    ),
    topic_def(
        "flush.ms",
        "long",
        ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
        "fsync data older than this.",
        min_value=0,
    ),
    topic_def(
        "index.interval.bytes",
        "int",
        ["log.index.interval.bytes"],
        "Bytes between index entries.",
        min_value=0,
    ),
    topic_def(
        "max.compaction.lag.ms",
        "long",
        ["log.cleaner.max.compaction.lag.ms"],
        "Longest a record stays uncompacted.",
        min_value=1,
    ),
    topic_def(
        "max.message.bytes",
        "int",
        ["message.max.bytes"],
        "Largest record batch.",
        min_value=0,
    ),
    topic_def(
        "message.timestamp.type",
        "string",
        ["log.message.timestamp.type"],
        "CreateTime or LogAppendTime.",
        choices=TIMESTAMP_TYPES,
    ),
    topic_def(
        "min.cleanable.dirty.ratio",
        "double",
        ["log.cleaner.min.cleanable.ratio"],
        "Dirty share above which the log is compacted.",
        min_value=0,
        max_value=1,
    ),
    topic_def(
        "min.compaction.lag.ms",
        "long",
        ["log.cleaner.min.compaction.lag.ms"],
        "Shortest a record stays uncompacted.",
        min_value=0,
    ),
    topic_def(
        "min.insync.replicas",
        "int",
        ["min.insync.replicas"],
        "Accepted for compatibility, not read (one node).",
        min_value=1,
    ),
    topic_def(
        "preallocate", "boolean", ["log.preallocate"], "Accepted for compatibility, not read."
    ),
    topic_def(
        "retention.bytes",
        "long",
        ["log.retention.bytes"],
        "Largest partition size before old segments go (-1: none).",
    ),
    topic_def(
        "retention.ms",
        "long",
        ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
        "Age after which segments are deleted (-1: never).",
        min_value=-1,
    ),
    topic_def(
        "segment.bytes",
        "int",
        ["log.segment.bytes"],
        "Largest segment file.",
        min_value=14,
    ),
    topic_def(
        "segment.index.bytes",
        "int",
        ["log.index.size.max.bytes"],
        "Preallocated index size.",
        min_value=4,
    ),
    topic_def(
        "segment.jitter.ms",
        "long",
        ["log.roll.jitter.ms", "log.roll.jitter.hours"],
        "Jitter on segment.ms.",
        min_value=0,
    ),
    topic_def(
        "segment.ms",
        "long",
        ["log.roll.ms", "log.roll.hours"],
        "Roll the active segment after this long.",
        min_value=1,
    ),
    topic_def(
        "unclean.leader.election.enable",
        "boolean",
        ["unclean.leader.election.enable"],
        "Accepted for compatibility, not read (one node).",
    ),
)
