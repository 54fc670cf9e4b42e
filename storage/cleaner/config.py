"""Settings of the log cleaner: broker-wide (``log.cleaner.*``) and per topic (compaction).

``CleanerConfig`` holds the broker settings (Kafka's names, snake_case): ``log.cleaner.enable``,
``log.cleaner.threads``, ``log.cleaner.io.max.bytes.per.second``, ``log.cleaner.backoff.ms``,
``log.cleaner.dedupe.buffer.size`` and ``log.cleaner.io.buffer.size``.

``CompactionConfig`` holds the topic settings that ``storage.LogConfig`` does not carry:
``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``, ``max.compaction.lag.ms`` and
``delete.retention.ms``. Whether a log is compacted at all is ``LogConfig.cleanup_policy``; its
``segment.bytes``, ``segment.index.bytes`` and ``index.interval.bytes`` bound the cleaned
segments. The broker hands the cleaner a function from a log to its ``CompactionConfig`` (built
from the topic's effective configuration by ``compaction_config_from``).

Threading: immutable values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["CleanerConfig", "CompactionConfig", "compaction_config_from"]

LONG_MAX = 2**63 - 1
DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """Per-topic compaction settings (Kafka's defaults)."""

    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = DAY_MS

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError("min_cleanable_dirty_ratio must be in [0, 1]")
        if self.min_compaction_lag_ms < 0 or self.delete_retention_ms < 0:
            raise ValueError("compaction lags and delete retention must be >= 0")
        if self.max_compaction_lag_ms < 1:
            raise ValueError("max_compaction_lag_ms must be >= 1")


def _number(value: object, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


def _whole(value: object, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def compaction_config_from(effective: Mapping[str, object]) -> CompactionConfig:
    """A topic's ``CompactionConfig`` from its effective config (Kafka topic config names)."""
    d = CompactionConfig()
    return CompactionConfig(
        min_cleanable_dirty_ratio=_number(
            effective.get("min.cleanable.dirty.ratio"), d.min_cleanable_dirty_ratio
        ),
        min_compaction_lag_ms=_whole(effective.get("min.compaction.lag.ms"), 0),
        max_compaction_lag_ms=_whole(effective.get("max.compaction.lag.ms"), LONG_MAX),
        delete_retention_ms=_whole(effective.get("delete.retention.ms"), DAY_MS),
    )


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Broker-wide cleaner settings (Kafka's defaults)."""

    enable: bool = True
    threads: int = 1
    io_max_bytes_per_second: float = float("inf")
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_size: int = 512 * 1024

    def __post_init__(self) -> None:
        if self.threads < 0:
            raise ValueError("threads must be >= 0")
        if self.io_max_bytes_per_second <= 0:
            raise ValueError("io_max_bytes_per_second must be > 0")
        if self.backoff_ms < 0:
            raise ValueError("backoff_ms must be >= 0")
        if self.dedupe_buffer_size < 1024 or self.io_buffer_size < 1024:
            raise ValueError("dedupe_buffer_size and io_buffer_size must be >= 1024")

    @classmethod
    def from_lookup(cls, get: Callable[[str], object]) -> CleanerConfig:
        """Build from a ``name -> value`` lookup over Kafka's broker setting names.

        Unknown names (a lookup that raises ``KeyError``/``ValueError`` or returns None) keep
        the default.
        """
        d = cls()

        def value(name: str) -> object:
            try:
                return get(name)
            except (KeyError, ValueError):
                return None

        enable = value("log.cleaner.enable")
        rate = _number(value("log.cleaner.io.max.bytes.per.second"), d.io_max_bytes_per_second)
        return cls(
            enable=enable if isinstance(enable, bool) else d.enable,
            threads=_whole(value("log.cleaner.threads"), d.threads),
            io_max_bytes_per_second=rate if rate > 0 else d.io_max_bytes_per_second,
            backoff_ms=_whole(value("log.cleaner.backoff.ms"), d.backoff_ms),
            dedupe_buffer_size=max(
                _whole(value("log.cleaner.dedupe.buffer.size"), d.dedupe_buffer_size), 1024
            ),
            io_buffer_size=max(_whole(value("log.cleaner.io.buffer.size"), d.io_buffer_size), 1024),
        )
