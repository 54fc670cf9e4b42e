"""Look-ups by timestamp over a snapshot of segments (ListOffsets by time and -3).

``find_offset_for_timestamp`` follows Kafka's fetchOffsetByTimestamp: the first segment whose
max timestamp is >= the target; in it the time index's floor entry gives an offset, the offset
index a position to scan from; the first batch whose ``max_timestamp`` reaches the target is
decoded (``storage.record_scan``) to return the first record with timestamp >= target and offset
>= the log start offset. If that segment has no such record (all of it below the log start)
the search continues with the next segment.

``find_max_timestamp`` follows Kafka >= 3.8 for ListOffsets -3: the segment with the largest
max timestamp (the first one on ties), the batch in it holding that timestamp, and in it the
first record carrying it.

Threading: reads segment files below the sizes in the snapshot; safe next to appends.
"""

from __future__ import annotations

from .record_scan import record_timestamps
from .segment import LogSegment

__all__ = ["find_max_timestamp", "find_offset_for_timestamp"]

Snapshot = list[tuple[LogSegment, int]]


def find_offset_for_timestamp(
    snapshot: Snapshot, timestamp_ms: int, log_start_offset: int
) -> tuple[int, int] | None:
    for segment, end_position in snapshot:
        if segment.max_timestamp_so_far < timestamp_ms or end_position == 0:
            continue
        _, indexed_offset = segment.time_index.lookup(timestamp_ms)
        _, position = segment.offset_index.lookup(max(indexed_offset, log_start_offset))
        for pos, header in segment.read_headers(position, end_position):
            if header.last_offset < log_start_offset or header.max_timestamp < timestamp_ms:
                continue
            batch = segment.pread(pos, header.size_in_bytes)
            for offset, ts in record_timestamps(header, batch):
                if ts >= timestamp_ms and offset >= log_start_offset:
                    return offset, ts
    return None


def find_max_timestamp(snapshot: Snapshot, log_start_offset: int) -> tuple[int, int] | None:
    best: tuple[LogSegment, int] | None = None
    for segment, end_position in snapshot:
        if end_position == 0:
            continue
        if best is None or segment.max_timestamp_so_far > best[0].max_timestamp_so_far:
            best = (segment, end_position)
    if best is None:
        return None
    segment, end_position = best
    target = segment.max_timestamp_so_far
    if target < 0:
        return None
    _, position = segment.offset_index.lookup(segment.offset_of_max_timestamp_so_far)
    for start in (position, 0):
        for pos, header in segment.read_headers(start, end_position):
            if header.max_timestamp != target:
                continue
            batch = segment.pread(pos, header.size_in_bytes)
            for offset, ts in record_timestamps(header, batch):
                if ts == target:
                    return max(offset, log_start_offset), ts
            return header.last_offset, target
    return None
