"""LogSegments: the ordered segment list between PartitionLog and LogSegment."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.storage.batches import simple_batch
from tidelog.storage import LogConfig, PartitionLog
from tidelog.storage.log_segments import LogSegments
from tidelog.storage.segment import LogSegment

CONFIG = LogConfig(segment_bytes=2000)


def _segment(directory: Path, base: int) -> LogSegment:
    return LogSegment(directory, base, CONFIG, now_ms=0)


def test_order_floor_and_changes(tmp_path: Path) -> None:
    segments = LogSegments([_segment(tmp_path, 0), _segment(tmp_path, 10)])
    segments.add(_segment(tmp_path, 20))
    with pytest.raises(ValueError, match="not above"):
        segments.add(_segment(tmp_path, 15))
    assert segments.base_offsets() == [0, 10, 20]
    assert segments.active.base_offset == 20
    assert [s.base_offset for s in segments.from_offset(12)] == [10, 20]
    assert segments.floor_index(-5) == 0 and segments.floor_index(25) == 2
    assert segments.remove_last().base_offset == 20
    assert [s.base_offset for s in segments.remove_first(1)] == [0]
    assert segments.base_offsets() == [10]
    assert [s.base_offset for s in segments.clear()] == [10]
    assert len(segments) == 0


def test_find_run_and_replace(tmp_path: Path) -> None:
    old = [_segment(tmp_path, 0), _segment(tmp_path, 10), _segment(tmp_path, 20)]
    segments = LogSegments(old)
    assert segments.find_run(old[:2], [0, 0]) == 0
    assert segments.find_run(old[1:], [0, 0]) is None  # would take the active segment
    assert segments.find_run(old[:2], [0, 7]) is None  # a size changed since it was read
    new = _segment(tmp_path, 5)
    segments.replace(0, 2, new)
    assert list(segments) == [new, old[2]]
    assert segments.base_offsets() == [5, 20]


def test_partition_log_replaces_only_a_live_run(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", CONFIG)
    for i in range(3):
        log.append(simple_batch(2, seed=i))
        log.roll()
    old = log.segments()[:2]
    sizes = [s.size for s in old]
    called: list[int] = []

    def make_new() -> LogSegment:
        called.append(1)
        return old[0]  # stands for the cleaned segment (same base offset)

    assert log.replace_segments(old, [sizes[0], sizes[1] + 1], make_new, 0) is None
    assert called == []  # the log changed: nothing renamed, nothing built
    log.close()
