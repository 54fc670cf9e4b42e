"""Retention: by time, by size, below the log start offset; delayed file deletion."""

from __future__ import annotations

from pathlib import Path

from tests.storage.batches import simple_batch
from tests.storage.storage_helpers import FakeClock
from tidelog.storage import LogConfig, PartitionLog

HOUR = 3600 * 1000


def _fill(log: PartitionLog, count: int, timestamp: int) -> None:
    for i in range(count):
        log.append(simple_batch(1, seed=i, value_size=100, timestamp=timestamp + i))


def test_retention_ms_deletes_old_segments_and_rolls_active(
    log_dir: Path, clock: FakeClock
) -> None:
    config = LogConfig(segment_bytes=600, retention_ms=HOUR, file_delete_delay_ms=1000)
    log = PartitionLog(log_dir, config, clock=clock)
    old = clock.now_ms - 2 * HOUR
    _fill(log, 10, old)
    log.roll()
    n_old = len(log.segments()) - 1
    _fill(log, 10, clock.now_ms)
    deleted = log.apply_retention(clock.now_ms)
    assert deleted == n_old
    assert log.log_start_offset == log.segments()[0].base_offset == 10
    assert all(s.max_timestamp_so_far >= clock.now_ms for s in log.segments())
    deleted_files = sorted(p.name for p in log_dir.glob("*.deleted"))
    assert len(deleted_files) == 3 * n_old
    log.delete_expired_files(clock.now_ms + 999)
    assert len(list(log_dir.glob("*.deleted"))) == 3 * n_old
    log.delete_expired_files(clock.now_ms + 1000)
    assert list(log_dir.glob("*.deleted")) == []
    # everything expires: the active segment is rolled first, then deleted
    later = clock.now_ms + 3 * HOUR
    log.apply_retention(later)
    assert log.log_start_offset == log.log_end_offset == 20
    assert len(log.segments()) == 1 and log.segments()[0].size == 0
    assert log.read(20, 100).regions == ()
    log.append(simple_batch(1))
    assert log.read(20, 1000).first_offset == 20
    log.close()


def test_retention_bytes(log_dir: Path, clock: FakeClock) -> None:
    config = LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    log = PartitionLog(log_dir, config, clock=clock)
    _fill(log, 40, clock.now_ms)
    assert log.size_in_bytes > 2500
    log.apply_retention(clock.now_ms)
    sizes = [s.size for s in log.segments()]
    assert sum(sizes) <= 2500 + sizes[0]
    assert sum(sizes) - sizes[0] < 2500 or len(sizes) == 1
    assert log.log_end_offset == 40
    log.close()


def test_compact_only_keeps_old_segments(log_dir: Path, clock: FakeClock) -> None:
    config = LogConfig(segment_bytes=600, retention_ms=1, cleanup_policy="compact")
    log = PartitionLog(log_dir, config, clock=clock)
    _fill(log, 10, 0)
    assert log.apply_retention(clock.now_ms) == 0
    log.close()


def test_never_past_high_watermark(log_dir: Path, clock: FakeClock) -> None:
    config = LogConfig(segment_bytes=600, retention_ms=1, flush_messages=1)
    log = PartitionLog(log_dir, config, clock=clock)
    _fill(log, 10, 0)
    assert log.high_watermark == 0
    assert log.apply_retention(clock.now_ms) == 0
    log.flush()
    assert log.apply_retention(clock.now_ms) > 0
    log.close()


def test_deleted_files_removed_at_startup(log_dir: Path, clock: FakeClock) -> None:
    config = LogConfig(segment_bytes=600, retention_ms=HOUR)
    log = PartitionLog(log_dir, config, clock=clock)
    _fill(log, 10, 0)
    _fill(log, 3, clock.now_ms)
    log.apply_retention(clock.now_ms)
    assert list(log_dir.glob("*.deleted"))
    log.close()
    reopened = PartitionLog(log_dir, config, clock=clock, clean_shutdown=True, log_start_offset=10)
    assert list(log_dir.glob("*.deleted")) == []
    assert reopened.log_start_offset == 10
    reopened.close()
