"""PartitionLog: append, read, offsets, rolling, flush policy, truncation, look-ups."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest
from kafka.record import MemoryRecords

from tests.storage.batches import Rec, batch_with_size, build_batch, simple_batch
from tests.storage.storage_helpers import FakeClock, expected_indexes
from tidelog.storage import (
    CorruptRecordError,
    KafkaStorageError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordListTooLargeError,
    iter_batches,
    verify_crc,
)


def _offsets(data: bytes) -> list[int]:
    out: list[int] = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        out.extend(r.offset for r in batch)
    return out


def test_append_assigns_consecutive_offsets(log_dir: Path, clock: FakeClock) -> None:
    log = PartitionLog(log_dir, LogConfig(), clock=clock)
    info = log.append(simple_batch(3))
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert info.log_append_time_ms == -1
    info = log.append(simple_batch(2) + simple_batch(4, seed=1))
    assert (info.first_offset, info.last_offset) == (3, 8)
    assert [h.base_offset for h in info.batches] == [3, 5]
    assert log.log_end_offset == log.high_watermark == 9
    assert log.log_start_offset == 0
    data = log.read(0, 1 << 20).read_bytes()
    assert _offsets(data) == list(range(9))
    log.close()


def test_failed_validation_writes_nothing(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig(segment_bytes=2000))
    log.append(simple_batch(1))
    bad = bytearray(simple_batch(2))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(simple_batch(1) + bytes(bad))
    with pytest.raises(RecordListTooLargeError):
        log.append(b"".join(simple_batch(5, seed=i, value_size=100) for i in range(5)))
    assert log.log_end_offset == 1
    assert log.size_in_bytes == len(simple_batch(1))
    log.close()


def test_log_append_time(log_dir: Path, clock: FakeClock) -> None:
    log = PartitionLog(log_dir, LogConfig(message_timestamp_type="LogAppendTime"), clock=clock)
    info = log.append(simple_batch(2, timestamp=5), now_ms=123_456)
    assert info.log_append_time_ms == 123_456
    assert info.max_timestamp == 123_456
    data = log.read(0, 1 << 20).read_bytes()
    batch = MemoryRecords(data).next_batch()
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [123_456, 123_456]
    assert log.offset_for_timestamp(100_000) == (0, 123_456)
    log.close()


def test_read_bounds_and_sizes(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig(index_interval_bytes=100))
    batches = [simple_batch(2, seed=i, value_size=50) for i in range(20)]
    for b in batches:
        log.append(b)
    # every offset is served by the batch holding it
    for offset in range(40):
        info = log.read(offset, 1)
        assert info.first_offset == offset - offset % 2
        assert info.size_in_bytes == len(batches[offset // 2])  # min_one_message
    assert log.read(0, 1, min_one_message=False).regions == ()
    three = sum(len(b) for b in batches[1:4])
    assert log.read(3, three).size_in_bytes == three
    assert log.read(3, three + 5).size_in_bytes == three
    assert log.read(3, three - 1).size_in_bytes == three - len(batches[3])
    bounded = log.read(0, 1 << 20, upper_bound=10)
    assert (bounded.first_offset, bounded.last_offset) == (0, 9)
    assert log.read(40, 100).regions == ()
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(41, 100)
    assert info.value.error_name == "OFFSET_OUT_OF_RANGE"
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.close()


def test_read_across_segments(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig(segment_bytes=1000))
    for i in range(30):
        log.append(simple_batch(1, seed=i, value_size=150))
    assert len(log.segments()) > 3
    info = log.read(0, 1 << 20)
    assert len(info.regions) == len(log.segments())
    assert _offsets(info.read_bytes()) == list(range(30))
    for offset in range(30):
        assert log.read(offset, 1).first_offset == offset
    log.close()


def test_roll_conditions(log_dir: Path, clock: FakeClock) -> None:
    config = LogConfig(segment_ms=1000, segment_index_bytes=8 * 3, index_interval_bytes=0)
    log = PartitionLog(log_dir, config, clock=clock)
    log.append(simple_batch(1))
    clock.advance(500)
    log.append(simple_batch(1))
    assert len(log.segments()) == 1
    clock.advance(600)
    log.append(simple_batch(1))
    assert [s.base_offset for s in log.segments()] == [0, 2]
    # index full: 3 entries of 8 bytes; with interval 0 every batch after the first is indexed
    for i in range(6):
        log.append(simple_batch(1, seed=i))
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) >= 3
    for segment in log.segments()[:-1]:
        assert segment.offset_index.file_size == segment.offset_index.entries * 8
    log.roll()
    assert log.segments()[-1].base_offset == log.log_end_offset
    log.roll()  # empty active segment: no-op
    assert log.segments()[-1].base_offset == log.log_end_offset
    log.close()


def test_roll_when_relative_offset_would_overflow(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig())
    log.append(simple_batch(1))
    log.truncate_to(0)
    log._truncate_fully_locked(5)  # new empty log at offset 5
    assert log.log_end_offset == 5
    segment = log.segments()[-1]
    assert (
        segment.should_roll(log.config, messages_size=10, max_offset=5 + 2**31, now_ms=0) is False
        or segment.size == 0
    )
    log.append(simple_batch(1))
    assert segment.should_roll(log.config, messages_size=10, max_offset=5 + 2**31, now_ms=0)
    log.close()


def test_indexes_follow_kafka_rule(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=20_000, index_interval_bytes=500)
    log = PartitionLog(log_dir, config)
    for i in range(120):
        log.append(simple_batch(1 + i % 4, seed=i, value_size=30 + (i * 37) % 200, timestamp=i))
    log.close()
    for segment in log.segments():
        data = segment.log_path.read_bytes()
        offsets, times = expected_indexes(data, segment.base_offset, 500)
        assert segment.offset_index.all_entries() == offsets
        assert segment.time_index.all_entries() == times


def test_high_watermark_waits_for_fsync_with_flush_messages_1(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig(flush_messages=1))
    log.append(simple_batch(2))
    assert log.log_end_offset == 2
    assert log.high_watermark == 0
    assert log.needs_flush(0)
    assert log.read(0, 1000).regions == ()
    assert log.flush() == 2
    assert log.high_watermark == log.recovery_point == 2
    assert not log.needs_flush(0)
    assert log.read(0, 1000).first_offset == 0
    log.update_config(LogConfig())
    log.append(simple_batch(1))
    assert log.high_watermark == 3
    log.close()


def test_flush_ms_policy(log_dir: Path, clock: FakeClock) -> None:
    log = PartitionLog(log_dir, LogConfig(flush_ms=1000), clock=clock)
    log.append(simple_batch(1))
    assert log.high_watermark == 1
    assert not log.needs_flush(clock.now_ms + 10)
    assert log.needs_flush(clock.now_ms + 1000)
    log.flush(clock.now_ms + 1000)
    assert log.recovery_point == 1
    assert not log.needs_flush(clock.now_ms + 5000)
    log.close()


def test_group_commit_from_threads(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig(flush_messages=1))
    fsyncs = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=flusher) for _ in range(3)]
    os.fsync = counting_fsync  # type: ignore[assignment]
    try:
        for t in threads:
            t.start()
        for i in range(200):
            log.append(simple_batch(1, seed=i))
            assert log.high_watermark <= log.log_end_offset
            log.read(log.log_start_offset, 10_000)
        stop.set()
        for t in threads:
            t.join()
    finally:
        os.fsync = real_fsync  # type: ignore[assignment]
    assert not errors
    assert log.flush() == 200
    assert log.high_watermark == log.recovery_point == 200
    log.close()


def test_write_failure_leaves_no_partial_batch(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = PartitionLog(log_dir, LogConfig())
    log.append(simple_batch(1))
    size = log.size_in_bytes
    real = os.pwritev

    def enospc(fd: int, buffers: list[bytes], offset: int) -> int:
        real(fd, [bytes(buffers[0])[:7]], offset)  # a partial write, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwritev", enospc)
    with pytest.raises(KafkaStorageError) as info:
        log.append(simple_batch(3))
    assert info.value.error_name == "KAFKA_STORAGE_ERROR"
    monkeypatch.setattr(os, "pwritev", real)
    assert log.size_in_bytes == size == os.path.getsize(log.segments()[0].log_path)
    assert log.log_end_offset == 1
    log.append(simple_batch(2))
    assert _offsets(log.read(0, 10_000).read_bytes()) == [0, 1, 2]
    log.close()


def test_delete_records(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig(segment_bytes=500))
    for i in range(10):
        log.append(simple_batch(2, seed=i, value_size=60))
    assert log.delete_records(5) == 5
    assert log.delete_records(3) == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(21)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    assert log.read(5, 1).first_offset == 4
    assert log.delete_records(-1) == 20
    assert log.read(20, 100).regions == ()
    deleted = log.apply_retention(0)
    assert deleted >= 1
    assert log.log_start_offset == 20
    log.close()


def test_truncate_to(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig(segment_bytes=600, index_interval_bytes=50))
    for i in range(12):
        log.append(simple_batch(2, seed=i, value_size=60))
    nsegs = len(log.segments())
    log.truncate_to(9)  # mid-batch: the whole batch [8, 9] goes, as Kafka
    assert log.log_end_offset == 8
    assert log.high_watermark == 8
    assert len(log.segments()) < nsegs
    assert _offsets(log.read(0, 1 << 20).read_bytes()) == list(range(8))
    info = log.append(simple_batch(1))
    assert info.first_offset == 8
    log.truncate_to(0)
    assert log.log_end_offset == 0
    assert log.read(0, 100).regions == ()
    log.append(simple_batch(1))
    assert log.log_end_offset == 1
    log.close()


def test_offset_for_timestamp_and_max(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig(segment_bytes=1500, index_interval_bytes=100))
    ts = 1_000
    expected: list[tuple[int, int]] = []
    offset = 0
    for i in range(20):
        recs = [Rec(b"k", b"v" * 40, ts + j * 10) for j in range(3)]
        log.append(build_batch(recs, compression=1 if i % 3 == 0 else 0))
        expected.extend((offset + j, ts + j * 10) for j in range(3))
        offset += 3
        ts += 100
    for target in (0, 1000, 1001, 1010, 1015, 1500, 1525, ts - 80):
        want = next(((o, t) for o, t in expected if t >= target), None)
        assert log.offset_for_timestamp(target) == want, target
    assert log.offset_for_timestamp(10**12) is None
    assert log.offset_of_max_timestamp() == expected[-1]
    log.close()


def test_offset_of_max_timestamp_exact_record(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig())
    assert log.offset_of_max_timestamp() is None
    log.append(build_batch([Rec(None, b"a", 50), Rec(None, b"b", 900), Rec(None, b"c", 70)]))
    log.append(build_batch([Rec(None, b"d", 100)]))
    assert log.offset_of_max_timestamp() == (1, 900)
    assert log.offset_for_timestamp(60) == (1, 900)
    assert log.offset_for_timestamp(75) == (1, 900)
    log.close()


def test_written_batches_are_valid(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig())
    log.append(batch_with_size(5000) + simple_batch(4))
    data = log.read(0, 1 << 20).read_bytes()
    for pos, header in iter_batches(data):
        verify_crc(data, pos, header)
    log.close()


def test_concurrent_readers_flusher_and_retention(log_dir: Path, clock: FakeClock) -> None:
    """Appends on one thread; reads, flushes and retention on others never see torn data."""
    config = LogConfig(
        segment_bytes=3000, retention_bytes=6000, retention_ms=-1, file_delete_delay_ms=0
    )
    log = PartitionLog(log_dir, config, clock=clock)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                start = log.log_start_offset
                try:
                    info = log.read(start, 4000)
                except OffsetOutOfRangeError:
                    continue  # retention moved the log start meanwhile
                try:
                    data = info.read_bytes()
                except FileNotFoundError:
                    continue  # the segment was deleted (delay 0) between read and pread
                offsets = _offsets(data)
                if offsets:
                    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
                    assert offsets[-1] < info.high_watermark
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    def housekeeping() -> None:
        try:
            while not stop.is_set():
                log.flush()
                log.apply_retention(clock.now_ms)
                log.delete_expired_files(clock.now_ms)
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    threads.append(threading.Thread(target=housekeeping))
    for t in threads:
        t.start()
    try:
        for i in range(400):
            log.append(simple_batch(1 + i % 3, seed=i, value_size=40))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    log.apply_retention(clock.now_ms)
    assert log.size_in_bytes <= 6000 + 3000
    log.close()
    with pytest.raises(KafkaStorageError):
        log.read(log.log_end_offset, 100)


def test_index_files_preallocated_then_trimmed(log_dir: Path) -> None:
    config = LogConfig(index_interval_bytes=100, segment_index_bytes=1000)
    log = PartitionLog(log_dir, config)
    for i in range(10):
        log.append(simple_batch(2, seed=i, value_size=80))
    active = log.segments()[-1]
    assert os.path.getsize(active.index_path) == 1000 // 8 * 8
    assert os.path.getsize(active.timeindex_path) == 1000 // 12 * 12
    log.close()
    assert os.path.getsize(active.index_path) == 8 * active.offset_index.entries > 0
    assert os.path.getsize(active.timeindex_path) == 12 * active.time_index.entries > 0
    trimmed = (os.path.getsize(active.index_path), os.path.getsize(active.timeindex_path))
    reopened = PartitionLog(log_dir, config, clean_shutdown=True)
    # Kafka divergence: a loaded active segment's index files are not preallocated again
    # (entries stay in memory until it stops being active): nothing to write at start-up.
    assert (os.path.getsize(active.index_path), os.path.getsize(active.timeindex_path)) == trimmed
    assert reopened.read(0, 1 << 20).last_offset == 19
    for i in range(10):
        reopened.append(simple_batch(2, seed=i, value_size=80))
    reopened.roll()
    rolled = reopened.segments()[-1]
    assert os.path.getsize(rolled.index_path) == 1000 // 8 * 8  # a new active segment: yes
    reopened.close()
    offsets = reopened.segments()[0].offset_index.entries
    assert os.path.getsize(active.index_path) == 8 * offsets


def test_inactive_segments_hold_one_descriptor(log_dir: Path) -> None:
    def open_in_dir() -> list[str]:
        names = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith(str(log_dir)):
                names.append(os.path.basename(target))
        return names

    log = PartitionLog(log_dir, LogConfig(segment_bytes=400, index_interval_bytes=50))
    for i in range(60):
        log.append(simple_batch(2, seed=i, value_size=60))
    log.flush()
    segments = log.segments()
    assert len(segments) > 10
    names = open_in_dir()
    assert sorted(n for n in names if n.endswith(".log")) == sorted(
        s.log_path.name for s in segments
    )
    # indexes are opened only while read or written (issue 20): none stays open
    assert [n for n in names if not n.endswith(".log")] == []
    assert _offsets(log.read(0, 1 << 20).read_bytes()) == list(range(120))
    log.truncate_to(10)  # reactivates an older segment: its index files are rewritten
    log.append(simple_batch(1))
    log.close()
    assert open_in_dir() == []
    reopened = PartitionLog(log_dir, LogConfig(segment_bytes=400), clean_shutdown=True)
    assert [n for n in open_in_dir() if not n.endswith(".log")] == []
    reopened.close()


def test_reads_follow_hints_and_hints_die_with_truncation(log_dir: Path) -> None:
    """A reader starts from the append hint or where the last read stopped (no index look-up);
    after ``truncate_to`` and new appends of other sizes, those hints are never used: every
    read still starts at the batch holding its offset."""
    log = PartitionLog(log_dir, LogConfig(index_interval_bytes=1 << 20))
    for i in range(10):
        log.append(simple_batch(3, seed=i, value_size=20))  # offsets 3*i .. 3*i+2
    segment = log.active_segment
    assert segment.append_hint[0] == 27
    for offset in range(30):  # each read leaves a hint at the batch after it
        info = log.read(offset, 1)  # one batch (min_one_message)
        assert info.first_offset == offset - offset % 3
        _, hint_offset, hint_position = segment.read_hint
        assert hint_offset == info.first_offset + 3
        assert hint_position == info.regions[0].position + info.regions[0].length
    log.read(0, 1 << 20)  # the read hint now points past offset 29
    stale = segment.read_hint
    log.truncate_to(4)  # keeps offsets 0..2 (the batch [3, 5] goes whole)
    assert segment.read_hint == stale and segment.truncations > stale[0]
    for i in range(20):  # denser batches: offset 30 now sits well before the old position
        log.append(simple_batch(8 + i % 4, seed=100 + i, value_size=1))
    assert log.log_end_offset > stale[1] + 50
    expected = _offsets(log.read(0, 1 << 20).read_bytes())
    assert expected == list(range(log.log_end_offset))
    for offset in range(log.log_end_offset):
        # a stale read hint from before the cut, as a reader racing the truncation leaves it
        segment.read_hint = (segment.truncations - 1, *stale[1:])
        got = _offsets(log.read(offset, 1 << 20).read_bytes())
        assert got == expected[got[0] :] and got[0] <= offset
        segment.read_hint = (segment.truncations - 1, *stale[1:])
        one = log.read(offset, 1)
        assert one.first_offset is not None and one.first_offset <= offset
        assert offset in _offsets(one.read_bytes())
    log.close()
