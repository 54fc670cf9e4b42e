"""Per-partition log settings, named after Kafka's topic configs in snake_case.

Values are Kafka's defaults. Topic configs are not persisted by storage: the broker owns them and
hands a ``LogConfig`` to ``LogManager.create_log`` / ``PartitionLog.update_config``.

Threading: ``LogConfig`` is an immutable value; swapping a partition's config is one attribute
assignment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LogConfig"]

_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP_POLICIES = ("delete", "compact", "compact,delete", "delete,compact")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Kafka topic-level log configuration (defaults as in Kafka)."""

    segment_bytes: int = 1024**3
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1 = unlimited
    retention_bytes: int = -1  # -1 = unlimited
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    flush_messages: int | None = None  # None = never forced (Kafka's Long.MAX_VALUE)
    flush_ms: int | None = None  # None = never forced
    file_delete_delay_ms: int = 60000
    cleanup_policy: str = "delete"  # "delete", "compact", "compact,delete"
    segment_jitter_ms: int = 0

    # Derived flags, computed once (the append path reads them per request).
    #: True when the broker stamps batches (``message.timestamp.type=LogAppendTime``).
    log_append_time: bool = field(init=False, repr=False, compare=False)
    #: True when time/size retention applies (cleanup.policy contains ``delete``).
    delete_enabled: bool = field(init=False, repr=False, compare=False)
    compact_enabled: bool = field(init=False, repr=False, compare=False)
    #: True when the HW may cover only fsynced data (``flush.messages=1``).
    #:
    #: Kafka divergence: Kafka's HW never waits for fsync (replication gives durability); a
    #: single-node broker with ``flush.messages=1`` instead acknowledges and exposes a batch
    #: only once the fsync covering it has returned. Larger ``flush.messages`` values or
    #: ``flush.ms`` only schedule fsyncs; the HW follows the LEO at once.
    holds_high_watermark: bool = field(init=False, repr=False, compare=False)
    #: True when ``flush.messages`` or ``flush.ms`` is set (an append may have to start an fsync).
    has_flush_policy: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:  # Kafka: at least LOG_OVERHEAD + 2
            raise ValueError(f"segment_bytes must be >= 14, got {self.segment_bytes}")
        if self.segment_bytes > 2**31 - 1:
            raise ValueError("segment_bytes must fit in an int32 (index positions are 4 bytes)")
        if self.segment_ms < 1:
            raise ValueError(f"segment_ms must be >= 1, got {self.segment_ms}")
        if self.segment_index_bytes < 12:
            raise ValueError(f"segment_index_bytes must be >= 12, got {self.segment_index_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError("index_interval_bytes must be >= 0")
        if self.max_message_bytes < 0:
            raise ValueError("max_message_bytes must be >= 0")
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            raise ValueError(f"message_timestamp_type must be one of {_TIMESTAMP_TYPES}")
        if self.flush_messages is not None and self.flush_messages < 1:
            raise ValueError("flush_messages must be >= 1 or None")
        if self.flush_ms is not None and self.flush_ms < 0:
            raise ValueError("flush_ms must be >= 0 or None")
        if self.cleanup_policy.replace(" ", "") not in _CLEANUP_POLICIES:
            raise ValueError(f"cleanup_policy must be one of {_CLEANUP_POLICIES}")
        if self.segment_jitter_ms < 0:
            raise ValueError("segment_jitter_ms must be >= 0")
        policy = self.cleanup_policy
        flags = (
            ("log_append_time", self.message_timestamp_type == "LogAppendTime"),
            ("delete_enabled", "delete" in policy),
            ("compact_enabled", "compact" in policy),
            ("holds_high_watermark", self.flush_messages is not None and self.flush_messages <= 1),
            ("has_flush_policy", self.flush_messages is not None or self.flush_ms is not None),
        )
        for name, value in flags:
            object.__setattr__(self, name, value)
