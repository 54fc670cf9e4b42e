"""The CRC check of old bytes on first read, with a budget for readers on the event loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.storage.batches import batch_with_size
from tidelog.storage import CorruptRecordError, LogConfig, PartitionLog
from tidelog.storage.lazy_crc import CheckDeferred


def _reopened(log_dir: Path, batches: int, size: int) -> PartitionLog:
    log = PartitionLog(log_dir, LogConfig())
    for _ in range(batches):
        log.append(batch_with_size(size))
    log.close()
    # after a clean shutdown nothing is scanned at start-up: every byte is unchecked
    return PartitionLog(log_dir, LogConfig(), clean_shutdown=True)


def test_a_read_over_the_budget_is_deferred_before_checking(log_dir: Path) -> None:
    log = _reopened(log_dir, 8, 64 * 1024)
    with pytest.raises(CheckDeferred):
        log.read(0, 1 << 20, verify_limit=100 * 1024)
    segment = log.segments()[0]
    assert segment.unchecked.low == 0  # nothing was checked by the refused read
    # within the budget (one batch) the read checks and returns it
    one = log.read(0, 1, verify_limit=100 * 1024)
    assert one.size_in_bytes == 64 * 1024
    # without a budget (a worker thread) everything is checked; later reads are free
    full = log.read(0, 1 << 20)
    assert full.size_in_bytes == 8 * 64 * 1024
    assert log.read(0, 1 << 20, verify_limit=0).size_in_bytes == full.size_in_bytes
    log.close()


def test_damage_is_still_found_by_the_read_in_the_worker(log_dir: Path) -> None:
    log = _reopened(log_dir, 4, 64 * 1024)
    path = log.segments()[0].log_path
    data = bytearray(path.read_bytes())
    data[64 * 1024 + 100] ^= 0xFF  # the second batch's records
    path.write_bytes(bytes(data))
    with pytest.raises(CheckDeferred):
        log.read(0, 1 << 20, verify_limit=1024)
    served = log.read(0, 1 << 20)  # stops before the damaged batch
    assert served.size_in_bytes == 64 * 1024
    with pytest.raises(CorruptRecordError):
        log.read(1, 1 << 20)
    log.close()
