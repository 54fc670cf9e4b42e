"""Retention predicates, as Kafka's UnifiedLog.deleteOldSegments passes them.

Each predicate is asked about the oldest segments in turn (with the segment after it, or None
for the active segment); the log deletes the leading run for which it holds, never past the
high watermark. Deleting renames the three files ``*.deleted``; they are removed after
``file.delete.delay.ms`` (a crash in between leaves ``.deleted`` files, removed at start-up).

* ``retention.ms``: the segment's largest timestamp (max batch timestamp, else file mtime) is
  more than ``retention_ms`` before now.
* ``retention.bytes``: while the log is larger than ``retention_bytes`` by at least the
  segment's size.
* log start offset: the next segment starts at or below the log start offset (the segment holds
  only records below it).

Threading: predicates are built and called under the partition lock.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import LogConfig
from .segment import LogSegment

__all__ = ["log_start_breached", "retention_ms_breached", "retention_size_breached"]

Predicate = Callable[[LogSegment, LogSegment | None], bool]


def retention_ms_breached(config: LogConfig, now_ms: int) -> Predicate:
    def breached(segment: LogSegment, _next: LogSegment | None) -> bool:
        return now_ms - segment.largest_timestamp > config.retention_ms

    return breached


def retention_size_breached(config: LogConfig, total_size: int) -> Predicate:
    excess = [total_size - config.retention_bytes]

    def breached(segment: LogSegment, _next: LogSegment | None) -> bool:
        if config.retention_bytes < 0 or excess[0] - segment.size < 0:
            return False
        excess[0] -= segment.size
        return True

    return breached


def log_start_breached(log_start_offset: int) -> Predicate:
    def breached(_segment: LogSegment, next_segment: LogSegment | None) -> bool:
        return next_segment is not None and next_segment.base_offset <= log_start_offset

    return breached
