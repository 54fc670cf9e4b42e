"""Crash recovery: damaged tails, bit flips, bad or missing indexes, stray files."""

from __future__ import annotations

import logging
import random
import shutil
import struct
from pathlib import Path

import pytest
from kafka.record import MemoryRecords

from tests.storage.batches import simple_batch
from tests.storage.storage_helpers import expected_indexes, index_file_entries
from tidelog.storage import CorruptRecordError, LogConfig, PartitionLog

CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=300)


def _write_log(directory: Path, count: int = 60) -> list[bytes]:
    log = PartitionLog(directory, CONFIG)
    written = []
    for i in range(count):
        batch = simple_batch(1 + i % 3, seed=i, value_size=40 + i % 50, timestamp=10_000 + i)
        log.append(batch)
        written.append(batch)
    log.close()
    return written


def _records(log: PartitionLog) -> list[tuple[int, bytes | None]]:
    data = log.read(log.log_start_offset, 1 << 24).read_bytes()
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        out.extend((r.offset, r.value) for r in batch)
    return out


def _check_indexes(log: PartitionLog, *, then_close: bool = False) -> None:
    """Indexes equal a fresh rebuild, in memory and on disk; then (``then_close``) the log is
    closed and the active segment's files (written when it stops being active) must too."""
    _check_index_files(log, active_on_disk=False)
    if then_close:
        log.close()
        _check_index_files(log, active_on_disk=True)


def _check_index_files(log: PartitionLog, *, active_on_disk: bool) -> None:
    segments = log.segments()
    for segment in segments:
        data = segment.log_path.read_bytes()
        offsets, times = expected_indexes(data, segment.base_offset, CONFIG.index_interval_bytes)
        assert segment.offset_index.all_entries() == offsets
        assert segment.time_index.all_entries() == times
        if segment is segments[-1] and not active_on_disk:
            continue  # the active segment's index files are written when it is sealed
        base = segment.base_offset
        on_disk = index_file_entries(segment.index_path, ">ii")
        assert [(base + o, p) for o, p in on_disk] == offsets
        on_disk_t = index_file_entries(segment.timeindex_path, ">qi")
        assert [(t, base + o) for t, o in on_disk_t] == times


def _open_unclean(directory: Path, recovery_point: int = 0) -> PartitionLog:
    return PartitionLog(directory, CONFIG, recovery_point=recovery_point)


def test_clean_reopen_keeps_everything(log_dir: Path) -> None:
    _write_log(log_dir)
    reference = _open_unclean(log_dir)
    want = _records(reference)
    reference.close()
    log = PartitionLog(log_dir, CONFIG, clean_shutdown=True)
    assert _records(log) == want
    _check_indexes(log)
    log.close()


@pytest.mark.parametrize("seed", range(8))
def test_cut_random_bytes_off_active_segment(log_dir: Path, seed: int) -> None:
    _write_log(log_dir)
    full = _open_unclean(log_dir)
    want = _records(full)
    full.close()
    active = sorted(log_dir.glob("*.log"))[-1]
    size = active.stat().st_size
    rng = random.Random(seed)
    with open(active, "r+b") as f:
        f.truncate(size - rng.randrange(1, size))
    log = _open_unclean(log_dir)
    got = _records(log)
    assert got == want[: len(got)]
    assert log.log_end_offset == (got[-1][0] + 1 if got else 0)
    _check_indexes(log)
    # the log keeps working after recovery
    info = log.append(simple_batch(2))
    assert info.first_offset == log.log_end_offset - 2
    log.close()
    _check_index_files(log, active_on_disk=True)


@pytest.mark.parametrize("seed", range(6))
def test_bit_flip_in_last_batch(log_dir: Path, seed: int, caplog: pytest.LogCaptureFixture) -> None:
    written = _write_log(log_dir)
    active = sorted(log_dir.glob("*.log"))[-1]
    data = bytearray(active.read_bytes())
    last = len(written[-1])
    rng = random.Random(seed)
    position = len(data) - last + rng.randrange(last)
    data[position] ^= 1 << rng.randrange(8)
    active.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="tidelog.storage"):
        log = _open_unclean(log_dir)
    assert any("cut" in r.getMessage() for r in caplog.records)
    assert active.stat().st_size == len(data) - last
    _check_indexes(log, then_close=True)


def test_garbage_after_last_batch(log_dir: Path) -> None:
    _write_log(log_dir)
    active = sorted(log_dir.glob("*.log"))[-1]
    size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(b"\x00" * 100 + bytes(range(256)))
    log = _open_unclean(log_dir)
    assert active.stat().st_size == size
    log.close()


def test_damage_in_middle_segment_deletes_later_segments(log_dir: Path) -> None:
    _write_log(log_dir)
    segments = sorted(log_dir.glob("*.log"))
    assert len(segments) >= 3
    middle = segments[1]
    data = bytearray(middle.read_bytes())
    data[200] ^= 0xFF
    middle.write_bytes(bytes(data))
    log = _open_unclean(log_dir)
    assert len(log.segments()) == 2
    assert not segments[2].exists()
    got = _records(log)
    assert [o for o, _ in got] == list(range(len(got)))
    _check_indexes(log)
    log.close()


@pytest.mark.parametrize(
    "damage", ["missing", "garbage", "odd_size", "zeros", "beyond_file", "not_monotonic"]
)
def test_bad_index_rebuilt_on_clean_start(log_dir: Path, damage: str) -> None:
    _write_log(log_dir)
    segment_index = sorted(log_dir.glob("*.index"))[0]
    entries = segment_index.read_bytes()
    assert len(entries) >= 16
    if damage == "missing":
        segment_index.unlink()
        sorted(log_dir.glob("*.timeindex"))[0].unlink()
    elif damage == "garbage":
        segment_index.write_bytes(bytes(random.Random(1).randrange(256) for _ in range(64)))
    elif damage == "odd_size":
        segment_index.write_bytes(entries + b"\x01\x02\x03")
    elif damage == "zeros":
        segment_index.write_bytes(entries + bytes(800))
    elif damage == "beyond_file":
        segment_index.write_bytes(entries + struct.pack(">ii", 10_000, 1_000_000))
    else:
        segment_index.write_bytes(entries[8:16] + entries[0:8] + entries[16:])
    log = PartitionLog(log_dir, CONFIG, clean_shutdown=True)
    _check_indexes(log)
    got = _records(log)
    assert [o for o, _ in got] == list(range(len(got)))
    log.close()


def test_lost_checkpoints_recover_everything(tmp_path: Path) -> None:
    from tidelog.storage import LogManager

    manager = LogManager([tmp_path], default_config=CONFIG)
    manager.startup()
    log = manager.create_log("t", 0, CONFIG, __import__("uuid").uuid4())
    for i in range(40):
        log.append(simple_batch(2, seed=i, value_size=70))
    want = _records(log)
    manager.shutdown()
    for name in (
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
        ".kafka_cleanshutdown",
    ):
        (tmp_path / name).unlink()
    manager = LogManager([tmp_path], default_config=CONFIG)
    manager.startup()
    log2 = manager.get_log("t", 0)
    assert log2 is not None
    assert _records(log2) == want
    assert log2.high_watermark == log2.log_end_offset == 80
    _check_indexes(log2)
    manager.shutdown()


def test_damage_below_recovery_point_raises_on_read(log_dir: Path) -> None:
    _write_log(log_dir)
    first = sorted(log_dir.glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    # break the length of the second batch (past any index entry)
    (length,) = struct.unpack_from(">i", data, 8)
    second = length + 12
    struct.pack_into(">i", data, second + 8, 10**8)
    first.write_bytes(bytes(data))
    log = PartitionLog(log_dir, CONFIG, recovery_point=10**6)
    assert first.stat().st_size == len(data)
    before = log.read(0, 1 << 20)  # the batch before the damage is still served, alone
    assert before.size_in_bytes == second and before.last_offset is not None
    with pytest.raises(CorruptRecordError) as info:
        log.read(before.last_offset + 1, 1 << 20)
    assert info.value.error_name == "CORRUPT_MESSAGE"
    log.close()


def test_stray_files(log_dir: Path) -> None:
    _write_log(log_dir)
    segments = sorted(log_dir.glob("*.log"))
    (log_dir / "00000000000000000007.log.deleted").write_bytes(b"old")
    (log_dir / "00000000000000000007.index.deleted").write_bytes(b"old")
    (log_dir / "00000000000000000000.log.cleaned").write_bytes(b"x")
    (log_dir / "00000000000000099999.index").write_bytes(b"")
    log = PartitionLog(log_dir, CONFIG, clean_shutdown=True)
    names = {p.name for p in log_dir.iterdir()}
    assert not any(n.endswith((".deleted", ".cleaned")) for n in names)
    assert "00000000000000099999.index" not in names
    assert len(log.segments()) == len(segments)
    log.close()


def test_swap_file_is_completed(log_dir: Path) -> None:
    _write_log(log_dir)
    segments = sorted(log_dir.glob("*.log"))
    base = segments[1]
    swap = base.with_name(base.name + ".swap")
    shutil.copy(base, swap)
    (log_dir / (base.name.replace(".log", ".index") + ".swap")).write_bytes(b"junk")
    log = PartitionLog(log_dir, CONFIG, clean_shutdown=True)
    names = {p.name for p in log_dir.iterdir()}
    assert not any(n.endswith(".swap") for n in names)
    got = _records(log)
    assert [o for o, _ in got] == list(range(len(got)))
    _check_indexes(log)
    log.close()
