"""The cleaner leaves a clean compacted log alone, and a deleted log ends its pass quietly."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.support.clock import FakeClock
from tidelog.storage import LogConfig, LogManager
from tidelog.storage.cleaner import CleanerConfig, CompactionConfig, LogCleaner
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord

COMPACT = LogConfig(segment_bytes=400, cleanup_policy="compact", file_delete_delay_ms=0)


def keyed(i: int, ts: int) -> bytes:
    return encode_batch([NewRecord(f"k{i % 7}".encode(), str(i).encode() * 20, timestamp=ts)])


@pytest.mark.parametrize(
    "compaction",
    [
        CompactionConfig(max_compaction_lag_ms=1_000),
        CompactionConfig(min_cleanable_dirty_ratio=0.1),
        CompactionConfig(min_cleanable_dirty_ratio=0.0, max_compaction_lag_ms=1),
    ],
    ids=["max_compaction_lag", "low_dirty_ratio", "both"],
)
def test_an_idle_clean_compacted_log_costs_no_pass(
    tmp_path: Path, compaction: CompactionConfig
) -> None:
    clock = FakeClock()
    manager = LogManager([tmp_path], default_config=COMPACT, clock=clock)
    manager.startup()
    log = manager.create_log("t", 0, COMPACT, uuid.uuid4())
    for i in range(40):
        log.append(keyed(i, clock.now_ms))
    log.roll()
    cleaner = LogCleaner(manager, compaction_config=lambda _l: compaction, clock=clock)
    clock.now_ms += 60_000
    assert cleaner.run_once() is not None  # the dirty log is cleaned once
    active_base = log.segments()[-1].base_offset
    clock.now_ms += 60_000
    # Clean now: the dirty range [active base, active base) is empty, whatever the lag or ratio.
    to_clean, _ = cleaner.manager.log_to_clean(log, active_base, clock.now_ms)
    assert to_clean.first_dirty_offset == to_clean.first_uncleanable_offset == active_base
    assert to_clean.cleanable_bytes == 0 and not to_clean.need_compaction_now
    for _ in range(20):
        assert cleaner.run_once() is None
    assert cleaner.passes == 1
    manager.shutdown()


def test_idle_cleaner_thread_sleeps_through_its_backoff(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], default_config=COMPACT)
    manager.startup()
    log = manager.create_log("t", 0, COMPACT, uuid.uuid4())
    now = time.time_ns() // 1_000_000
    for i in range(40):
        log.append(keyed(i, now - 120_000))
    log.roll()
    compaction = CompactionConfig(min_cleanable_dirty_ratio=0.01, max_compaction_lag_ms=1)
    cleaner = LogCleaner(
        manager, CleanerConfig(backoff_ms=10), compaction_config=lambda _l: compaction
    )
    cleaner.startup()
    try:
        deadline = time.monotonic() + 30
        while cleaner.passes < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cleaner.passes == 1
        time.sleep(1.0)  # ~100 scheduling rounds at a 10 ms back-off
        assert cleaner.passes == 1
    finally:
        cleaner.shutdown()
    manager.shutdown()


def test_deleting_a_log_being_cleaned_stops_the_pass_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = LogManager([tmp_path], default_config=COMPACT)
    manager.startup()
    log = manager.create_log("t", 0, COMPACT, uuid.uuid4())
    for i in range(400):
        log.append(keyed(i, 1_000))
    log.roll()
    # A slow pass: 20 KB/s over ~40 KB of segments.
    cleaner = LogCleaner(manager, CleanerConfig(io_max_bytes_per_second=20_000))
    results: list[object] = []
    with caplog.at_level(logging.INFO, logger="tidelog.storage.cleaner"):
        worker = threading.Thread(target=lambda: results.append(cleaner.clean_log(log)))
        worker.start()
        deadline = time.monotonic() + 10
        while not cleaner.manager._in_progress and time.monotonic() < deadline:
            time.sleep(0.001)
        assert ("t", 0) in cleaner.manager._in_progress  # the pass is running now
        manager.delete_log("t", 0)  # waits for the pass to stop
        assert ("t", 0) not in cleaner.manager._in_progress
        worker.join(10)
    assert results == [None]
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert cleaner.manager.uncleanable_partitions() == set()
    assert cleaner.passes == 0
    manager.shutdown()
