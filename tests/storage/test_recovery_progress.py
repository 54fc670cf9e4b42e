"""Recovery after a crash starts at the segment holding the recovery point and logs progress."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.storage.batches import batch_with_size
from tidelog.storage import LogConfig, PartitionLog
from tidelog.storage import recovery as recovery_module
from tidelog.storage.recovery import RecoveryProgress

CONFIG = LogConfig(segment_bytes=64 * 1024)


def _crashed_log(directory: Path, batches: int) -> int:
    """Append ``batches`` 8 KiB batches and leave without a clean close; the LEO."""
    log = PartitionLog(directory, CONFIG)
    for _ in range(batches):
        log.append(batch_with_size(8 * 1024))
    log.flush()
    leo = log.log_end_offset
    for segment in log.segments():  # drop the descriptors only: no seal, no marker
        segment.close()
    return leo


class _Clock:
    """Monotonic seconds that move 4 s at every reading (past the 3 s progress interval)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 4.0
        return self.now


def test_only_segments_from_the_recovery_point_on_are_recovered(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    leo = _crashed_log(log_dir, 40)  # 8 batches a segment: 5 segments
    seen: list[RecoveryProgress] = []
    real = RecoveryProgress

    def spy(*args: object, **kwargs: object) -> RecoveryProgress:
        progress = real(*args, **kwargs)  # type: ignore[arg-type]
        seen.append(progress)
        return progress

    monkeypatch.setattr(recovery_module, "RecoveryProgress", spy)
    recovery_point = 33  # inside the fifth segment (offsets 32-39)
    with caplog.at_level(logging.INFO, logger="tidelog.storage"):
        log = PartitionLog(log_dir, CONFIG, recovery_point=recovery_point)
    assert log.log_end_offset == leo == 40
    assert len(log.segments()) == 5
    (progress,) = seen
    assert progress.total == 1 and progress.number == 1  # the active segment only
    assert progress.recovery_point == recovery_point
    log.close()


def test_a_long_recovery_logs_where_it_stands(
    log_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    _crashed_log(log_dir, 40)
    clock = _Clock()
    monkeypatch.setattr(
        recovery_module,
        "RecoveryProgress",
        lambda *a, **k: RecoveryProgress(*a, **{**k, "clock": clock}),  # type: ignore[arg-type]
    )
    with caplog.at_level(logging.INFO, logger="tidelog.storage"):
        log = PartitionLog(log_dir, CONFIG, recovery_point=0)
    lines = [r.getMessage() for r in caplog.records if "Recover" in r.getMessage()]
    assert any(line.startswith("Recovering segment 1 of 5 of topic-0") for line in lines)
    assert any(line.startswith("Recovering segment 5 of 5 of topic-0") for line in lines)
    assert any("(80%)" in line for line in lines)
    assert any(
        line.startswith("Recovered topic-0 from recovery point 0: 5 segment(s)") for line in lines
    )
    assert log.log_end_offset == 40
    log.close()
