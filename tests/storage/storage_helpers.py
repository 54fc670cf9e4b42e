"""Storage test helpers (clock, Kafka's index rule written independently of storage)."""

from __future__ import annotations

import struct
from pathlib import Path

from tests.support.clock import FakeClock

__all__ = ["FakeClock", "expected_indexes"]


def expected_indexes(
    log_bytes: bytes, base_offset: int, interval: int, *, sealed: bool = True
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Kafka's index rule, written independently of storage: (offset entries, time entries)."""
    offset_entries: list[tuple[int, int]] = []
    time_entries: list[tuple[int, int]] = []
    position = 0
    last_entry = 0
    max_ts, offset_of_max = -1, base_offset
    while position < len(log_bytes):
        base, length = struct.unpack_from(">qi", log_bytes, position)
        (last_delta,) = struct.unpack_from(">i", log_bytes, position + 23)
        (batch_max_ts,) = struct.unpack_from(">q", log_bytes, position + 35)
        last = base + last_delta
        if batch_max_ts > max_ts:
            max_ts, offset_of_max = batch_max_ts, last
        if position - last_entry > interval:
            offset_entries.append((last, position))
            if max_ts > (time_entries[-1][0] if time_entries else -1):
                time_entries.append((max_ts, offset_of_max))
            last_entry = position
        position += length + 12
    if sealed and max_ts > (time_entries[-1][0] if time_entries else -1):
        time_entries.append((max_ts, offset_of_max))
    return offset_entries, time_entries


def index_file_entries(path: Path, entry_format: str) -> list[tuple[int, int]]:
    data = path.read_bytes()
    size = struct.calcsize(entry_format)
    assert len(data) % size == 0
    # the active segment's file is preallocated: drop the zero tail
    used = len(data.rstrip(b"\x00"))
    used = -(-used // size) * size
    return [(int(a), int(b)) for a, b in struct.iter_unpack(entry_format, data[:used])]
