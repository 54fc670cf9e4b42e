"""Log compaction, piece by piece: batch rewriting, scheduling, checkpoints, threads, reads."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.storage.storage_helpers import FakeClock
from tidelog.storage import InvalidRecordError, LogConfig, LogManager, PartitionLog, StorageError
from tidelog.storage.batch import parse_batch_header, validate_records
from tidelog.storage.checkpoint import read_checkpoint
from tidelog.storage.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    CleanerConfig,
    CompactionConfig,
    LogCleaner,
    OffsetMap,
    compaction_config_from,
    group_segments_by_size,
    require_record_keys,
)
from tidelog.storage.cleaner.batch_filter import FilterContext, filter_batch
from tidelog.storage.cleaner.throttler import Throttler
from tidelog.storage.record_codec import decode_batch, encode_batch, iter_batches, iter_records
from tidelog.storage.record_types import DecodedBatch, NewRecord


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


COMPACT = LogConfig(segment_bytes=400, cleanup_policy="compact")


def batch(*pairs: tuple[bytes | None, bytes | None], ts: int = 1_000, **kw: object) -> bytes:
    return encode_batch([NewRecord(k, v, timestamp=ts + i) for i, (k, v) in enumerate(pairs)], **kw)  # type: ignore[arg-type]


def make(
    tmp_path: Path, clock: FakeClock, config: LogConfig = COMPACT, **compaction: int | float
) -> tuple[LogManager, PartitionLog, LogCleaner]:
    manager = LogManager([tmp_path], default_config=config, clock=clock)
    manager.startup()
    log = manager.create_log("t", 0, config, uuid.uuid4())
    cleaner = LogCleaner(
        manager,
        compaction_config=lambda _l: CompactionConfig(**compaction),  # type: ignore[arg-type]
        clock=clock,
    )
    return manager, log, cleaner


def everything(log: PartitionLog) -> bytes:
    return log.read(log.log_start_offset, 1 << 30, upper_bound=log.log_end_offset).read_bytes()


def decoded(log: PartitionLog) -> list[DecodedBatch]:
    out = []
    for b in iter_batches(everything(log)):
        assert isinstance(b, DecodedBatch)
        out.append(b)
    return out


# -- the produce-path key check --------------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd", "snappy"])
def test_require_record_keys(codec: str) -> None:
    good = batch((b"k", b"v"), (b"k2", None), compression=codec)
    bad = batch((b"k", b"v"), (None, b"v"), compression=codec)
    require_record_keys(
        good, validate_records(good, max_message_bytes=1 << 20, segment_bytes=1 << 30)
    )
    with pytest.raises(InvalidRecordError, match="without key"):
        require_record_keys(
            good + bad,
            validate_records(good + bad, max_message_bytes=1 << 20, segment_bytes=1 << 30),
        )


def test_append_to_a_compacted_log_refuses_keyless_records(
    tmp_path: Path, clock: FakeClock
) -> None:
    manager, log, _ = make(tmp_path, clock)
    with pytest.raises(InvalidRecordError):
        log.append(batch((b"k", b"v"), (None, b"no key"), compression="zstd"))
    assert log.log_end_offset == 0
    assert log.append(batch((b"k", b"v"))).first_offset == 0
    log.update_config(LogConfig(segment_bytes=400, cleanup_policy="delete"))
    assert log.append(batch((None, b"fine when not compacted"))).first_offset == 1
    manager.shutdown()


def test_keyless_records_are_dropped_by_cleaning(tmp_path: Path, clock: FakeClock) -> None:
    manager, log, cleaner = make(tmp_path, clock)
    log.update_config(LogConfig(segment_bytes=400))  # written before the topic was compacted
    log.append(batch((None, b"no key"), (b"k", b"v1")))
    log.update_config(COMPACT)
    log.roll()
    log.append(batch((b"k", b"v2")))
    log.roll()
    assert cleaner.clean_log(log) is not None
    assert [(r.key, r.value) for r in iter_records(everything(log))] == [(b"k", b"v2")]
    manager.shutdown()


# -- rewriting batches ----------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_rewritten_batch_keeps_offsets_codec_producer_fields(
    tmp_path: Path, clock: FakeClock, codec: str
) -> None:
    manager, log, cleaner = make(tmp_path, clock)
    log.append(
        batch(
            (b"a", b"1"),
            (b"b", b"1"),
            (b"c", b"1"),
            (b"a", b"2"),
            ts=5_000,
            compression=codec,
            producer_id=42,
            producer_epoch=3,
            base_sequence=0,
            partition_leader_epoch=9,
        ),
    )
    log.roll()
    log.append(batch((b"b", b"2")))
    log.roll()
    before = decoded(log)[0]
    assert cleaner.clean_log(log) is not None
    first, second, *_ = decoded(log)
    assert first.compression == before.compression
    assert (first.base_offset, first.last_offset_delta) == (0, 3)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (42, 3, 0)
    assert first.partition_leader_epoch == before.partition_leader_epoch
    assert [(r.offset, r.key, r.value, r.timestamp) for r in first.records] == [
        (2, b"c", b"1", 5_002),
        (3, b"a", b"2", 5_003),
    ]
    assert first.max_timestamp == 5_003 and first.records_count == 2
    assert [(r.offset, r.key) for r in second.records] == [(4, b"b")]
    manager.shutdown()


def test_tombstone_gets_a_delete_horizon_then_vanishes(tmp_path: Path, clock: FakeClock) -> None:
    manager, log, cleaner = make(tmp_path, clock, delete_retention_ms=1_000)
    log.append(batch((b"a", b"1"), (b"x", b"1"), ts=100))
    log.append(batch((b"a", None), (b"y", b"1"), ts=200))
    log.roll()
    log.append(batch((b"z", b"1")))
    log.roll()
    start = clock.now_ms
    assert cleaner.clean_log(log) is not None
    tomb = decoded(log)[1]
    assert tomb.has_delete_horizon and tomb.delete_horizon_ms == start + 1_000
    assert [(r.key, r.value, r.timestamp) for r in tomb.records] == [
        (b"a", None, 200),
        (b"y", b"1", 201),
    ]
    clock.advance(999)
    assert cleaner.clean_log(log) is not None
    assert (b"a", None) in [(r.key, r.value) for r in iter_records(everything(log))]
    clock.advance(1)
    assert cleaner.clean_log(log) is not None
    assert [(r.key, r.value) for r in iter_records(everything(log))] == [
        (b"x", b"1"),
        (b"y", b"1"),
        (b"z", b"1"),
    ]
    manager.shutdown()


def test_filter_keeps_an_empty_batch_for_an_active_producer() -> None:
    data = batch((b"a", b"1"), producer_id=5, producer_epoch=1, base_sequence=7)
    header = parse_batch_header(data)
    offsets = OffsetMap(1 << 20)
    offsets.put(b"a", 10)
    offsets.update_latest_offset(10)
    ctx = FilterContext(offsets, 0, 0, {5: 0})
    kept = filter_batch(data, header, ctx, last_in_group=False)
    assert kept.data is not None and kept.records_kept == 0
    empty = parse_batch_header(kept.data)
    assert (empty.records_count, empty.batch_length, empty.base_sequence) == (0, 49, 7)
    assert (empty.producer_id, empty.producer_epoch, empty.base_timestamp) == (5, 1, -1)
    assert decode_batch(kept.data).records == ()
    gone = filter_batch(data, header, FilterContext(offsets, 0, 0, {5: 3}), last_in_group=False)
    assert gone.data is None
    last = filter_batch(data, header, FilterContext(offsets, 0, 0, {}), last_in_group=True)
    assert last.data is not None and parse_batch_header(last.data).records_count == 0


def test_last_batch_of_a_producer_survives_empty_and_keeps_its_state(
    tmp_path: Path, clock: FakeClock
) -> None:
    manager, log, cleaner = make(tmp_path, clock)
    now = clock.now_ms  # producers expire 24 h after their last batch's timestamp
    log.append(
        batch((b"a", b"1"), (b"b", b"1"), ts=now, producer_id=7, producer_epoch=2, base_sequence=0)
    )
    log.append(batch((b"a", b"2"), ts=now, producer_id=7, producer_epoch=2, base_sequence=2))
    log.append(batch((b"a", b"3"), (b"b", b"3")))
    log.roll()
    log.append(batch((b"c", b"1")))
    log.roll()
    state = getattr(log, "producer_state", None)
    before = dict(state.producers) if state is not None else {}
    assert cleaner.clean_log(log) is not None
    batches = decoded(log)
    kept = [(b.base_offset, b.producer_id, b.base_sequence, b.records_count) for b in batches]
    if state is not None:  # the producer's last batch (offset 2) stays, empty
        assert (2, 7, 2, 0) in kept
    assert (0, 7, 0, 0) not in kept and not [b for b in batches if b.base_offset == 0]
    assert [(r.key, r.value) for r in iter_records(everything(log))] == [
        (b"a", b"3"),
        (b"b", b"3"),
        (b"c", b"1"),
    ]
    manager.shutdown()
    for snapshot in log.dir.glob("*.snapshot"):  # rebuild the state from the log alone
        snapshot.unlink()
    again = LogManager([tmp_path], default_config=COMPACT, clock=clock)
    again.startup()
    reopened = again.get_log("t", 0)
    assert reopened is not None
    if state is not None:
        after = reopened.producer_state.producers  # type: ignore[attr-defined]
        assert after[7].last_sequence == before[7].last_sequence == 2
        assert after[7].producer_epoch == 2
        with pytest.raises(StorageError):  # the sequence check still knows the producer
            reopened.append(batch((b"a", b"x"), producer_id=7, producer_epoch=2, base_sequence=9))
    again.shutdown()


def test_active_segment_is_never_touched(tmp_path: Path, clock: FakeClock) -> None:
    big = LogConfig(segment_bytes=1 << 20, cleanup_policy="compact")
    manager, log, cleaner = make(tmp_path, clock, big)
    for i in range(20):
        log.append(batch((b"same", str(i).encode())))
    before = everything(log)
    assert cleaner.clean_log(log) is not None
    assert everything(log) == before
    log.roll()
    log.append(batch((b"same", b"last")))
    active_bytes = log.segments()[-1].log_path.read_bytes()
    assert cleaner.clean_log(log) is not None
    assert log.segments()[-1].log_path.read_bytes() == active_bytes
    assert [r.value for r in iter_records(everything(log))] == [b"19", b"last"]
    manager.shutdown()


# -- scheduling -----------------------------------------------------------------------------


def test_dirtiest_log_first_and_ratio_threshold(tmp_path: Path, clock: FakeClock) -> None:
    manager = LogManager([tmp_path], default_config=COMPACT, clock=clock)
    manager.startup()
    logs = [manager.create_log("t", p, COMPACT, uuid.uuid4()) for p in range(3)]
    manager.create_log("plain", 0, LogConfig(segment_bytes=400), uuid.uuid4())
    for p, log in enumerate(logs):
        for i in range(5 * (p + 1)):
            log.append(batch((b"k", str(i).encode() * 20)))
    cleaner = LogCleaner(manager, clock=clock)
    order = []
    while (result := cleaner.run_once()) is not None:
        order.append(cleaner.last_result)
        assert result is cleaner.last_result
    checkpoint = read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert set(checkpoint) == {("t", 0), ("t", 1), ("t", 2)}
    assert all(checkpoint[("t", p)] == logs[p].segments()[-1].base_offset for p in range(3))
    assert len(order) == 3
    # nothing is dirty now: below min.cleanable.dirty.ratio
    assert cleaner.manager.grab_filthiest_compacted_log(clock.now_ms) is None
    manager.shutdown()


def test_min_compaction_lag_holds_young_segments(tmp_path: Path, clock: FakeClock) -> None:
    manager, log, cleaner = make(tmp_path, clock, min_compaction_lag_ms=60_000)
    for i in range(10):
        log.append(batch((b"k", str(i).encode() * 30), ts=clock.now_ms))
    log.roll()
    log.append(batch((b"k", b"x"), ts=clock.now_ms))
    assert cleaner.manager.grab_filthiest_compacted_log(clock.now_ms) is None
    clock.advance(61_000)
    to_clean = cleaner.manager.grab_filthiest_compacted_log(clock.now_ms)
    assert (
        to_clean is not None and to_clean.first_uncleanable_offset == log.segments()[-1].base_offset
    )
    manager.shutdown()


def test_max_compaction_lag_forces_a_pass(tmp_path: Path, clock: FakeClock) -> None:
    manager, log, cleaner = make(
        tmp_path, clock, max_compaction_lag_ms=10_000, min_cleanable_dirty_ratio=1.0
    )
    for i in range(10):
        log.append(batch((b"k", str(i).encode() * 30), ts=clock.now_ms))
    log.roll()
    assert cleaner.manager.grab_filthiest_compacted_log(clock.now_ms) is None
    clock.advance(20_000)
    to_clean = cleaner.manager.grab_filthiest_compacted_log(clock.now_ms)
    assert to_clean is not None and to_clean.need_compaction_now
    manager.shutdown()


def test_expired_tombstones_make_a_quiet_log_cleanable(tmp_path: Path, clock: FakeClock) -> None:
    manager, log, cleaner = make(tmp_path, clock, delete_retention_ms=5_000)
    log.append(batch((b"a", b"1"), (b"b", b"1")))
    log.append(batch((b"a", None)))
    log.roll()
    assert cleaner.run_once() is not None
    assert cleaner.run_once() is None  # clean, horizon not reached
    clock.advance(5_000)
    assert cleaner.run_once() is not None
    assert [(r.key, r.value) for r in iter_records(everything(log))] == [(b"b", b"1")]
    assert cleaner.run_once() is None
    manager.shutdown()


def test_checkpoint_below_log_start_is_reset(tmp_path: Path, clock: FakeClock) -> None:
    manager, log, cleaner = make(tmp_path, clock)
    for i in range(12):
        log.append(batch((str(i % 3).encode(), str(i).encode() * 20)))
    log.roll()
    cleaner.manager.update_checkpoint(log, 0)
    log.delete_records(5)
    to_clean = cleaner.manager.grab_filthiest_compacted_log(clock.now_ms)
    assert to_clean is not None and to_clean.first_dirty_offset == 5
    assert read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)[("t", 0)] == 5
    manager.shutdown()


def test_full_offset_map_cleans_in_several_passes(tmp_path: Path, clock: FakeClock) -> None:
    config = LogConfig(segment_bytes=300, cleanup_policy="compact")
    manager = LogManager([tmp_path], default_config=config, clock=clock)
    manager.startup()
    log = manager.create_log("t", 0, config, uuid.uuid4())
    for i in range(60):
        log.append(batch((f"key{i % 20}".encode(), str(i).encode())))
    log.roll()
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=2048), clock=clock)
    ends = []
    while (result := cleaner.clean_log(log)) is not None and result.end_offset < 60:
        ends.append(result.end_offset)
        assert len(ends) < 40
    assert ends and ends == sorted(ends) and ends[0] < 60
    final = {r.key: r.value for r in iter_records(everything(log))}
    assert final == {f"key{i % 20}".encode(): str(i).encode() for i in range(40, 60)}
    assert len(list(iter_records(everything(log)))) == 20
    manager.shutdown()


def test_grouping_respects_size_index_and_offset_limits(tmp_path: Path, clock: FakeClock) -> None:
    manager, log, _ = make(
        tmp_path,
        clock,
    )
    for i in range(30):
        log.append(batch((b"k%d" % i, b"v" * 40)))
    segments = log.segments()[:-1]
    sizes = {id(s): s.size for s in segments}
    assert all(len(g) == 1 for g in group_segments_by_size(segments, sizes, 400, 1 << 20, 10**6))
    big = group_segments_by_size(segments, sizes, 1 << 20, 1 << 20, 10**6)
    assert big == [segments]
    tiny_index = group_segments_by_size(segments, sizes, 1 << 20, 0, 10**6)
    assert [len(g) for g in tiny_index] == [1] * len(segments) or all(
        s.offset_index.size_in_bytes == 0 for s in segments
    )
    manager.shutdown()


def test_compaction_config_from_topic_names() -> None:
    config = compaction_config_from(
        {
            "min.cleanable.dirty.ratio": 0.01,
            "min.compaction.lag.ms": 5,
            "delete.retention.ms": 7,
            "max.compaction.lag.ms": 9,
        }
    )
    assert config == CompactionConfig(0.01, 5, 9, 7)
    assert compaction_config_from({}) == CompactionConfig()
    settings = {
        "log.cleaner.threads": 2,
        "log.cleaner.enable": False,
        "log.cleaner.io.max.bytes.per.second": 1e6,
        "log.cleaner.backoff.ms": 10,
    }
    cleaner = CleanerConfig.from_lookup(lambda name: settings[name])
    assert (cleaner.threads, cleaner.enable, cleaner.backoff_ms) == (2, False, 10)
    assert cleaner.io_max_bytes_per_second == 1e6


# -- threads, throttle, readers ----------------------------------------------------------------


def test_background_threads_clean_and_stop(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2000, cleanup_policy="compact", file_delete_delay_ms=0)
    manager = LogManager([tmp_path], default_config=config)
    manager.startup()
    log = manager.create_log("t", 0, config, uuid.uuid4())
    cleaner = LogCleaner(
        manager,
        CleanerConfig(threads=2, backoff_ms=20),
        compaction_config=lambda _l: CompactionConfig(min_cleanable_dirty_ratio=0.01),
    )
    cleaner.startup()
    try:
        stop = threading.Event()

        def produce() -> None:
            i = 0
            while not stop.is_set():
                log.append(batch((f"k{i % 5}".encode(), str(i).encode() * 10)))
                i += 1
                if i % 50 == 0:
                    time.sleep(0.005)
                    log.delete_expired_files(time.time_ns() // 1_000_000)

        writer = threading.Thread(target=produce)
        writer.start()
        deadline = time.monotonic() + 60
        while cleaner.passes < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
            data = everything(log)  # reads never fail while the cleaner swaps
            offsets = [r.offset for r in iter_records(data)]
            assert offsets == sorted(set(offsets))
        stop.set()
        writer.join()
        assert cleaner.passes >= 5
    finally:
        cleaner.shutdown()
    assert not cleaner.running
    manager.shutdown()


def test_disabled_cleaner_starts_no_thread(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], default_config=COMPACT)
    manager.startup()
    for config in (CleanerConfig(enable=False), CleanerConfig(threads=0)):
        cleaner = LogCleaner(manager, config)
        cleaner.startup()
        assert not cleaner.running
        cleaner.shutdown()
    manager.shutdown()


def test_throttler_sleeps_to_the_desired_rate() -> None:
    now = [0]
    slept: list[float] = []

    class Stop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            slept.append(timeout or 0.0)
            now[0] += int((timeout or 0) * 1e9)
            return False

    throttler = Throttler(1000.0, check_interval_ms=100, monotonic_ns=lambda: now[0], stop=Stop())
    now[0] += 200_000_000
    throttler.maybe_throttle(1000)  # 1000 bytes in 0.2 s -> should take 1 s
    assert slept == [pytest.approx(0.8)]
    Throttler(float("inf")).maybe_throttle(1 << 30)


def test_a_read_that_races_a_swap_still_gets_the_old_bytes(
    tmp_path: Path, clock: FakeClock
) -> None:
    manager, log, cleaner = make(tmp_path, clock)
    for i in range(20):
        log.append(batch((b"k", str(i).encode() * 20)))
    log.roll()
    before = log.read(0, 1 << 20)
    expected = before.read_bytes()
    assert cleaner.clean_log(log) is not None
    assert everything(log) != expected
    assert before.read_bytes() == expected
    manager.shutdown()


# -- transactions ----------------------------------------------------------------------------


def test_aborted_transactions_are_removed_and_never_shadow_committed(
    tmp_path: Path, clock: FakeClock
) -> None:
    manager, log, cleaner = make(tmp_path, clock, delete_retention_ms=1_000)
    txn = {"producer_id": 5, "producer_epoch": 0, "is_transactional": True}
    log.append(batch((b"k", b"committed"), (b"j", b"j1"), base_sequence=0, **txn))
    log.append_end_txn_marker(producer_id=5, producer_epoch=0, coordinator_epoch=0, commit=True)
    log.append(batch((b"k", b"aborted"), base_sequence=2, **txn))
    log.append_end_txn_marker(producer_id=5, producer_epoch=0, coordinator_epoch=0, commit=False)
    log.roll()
    log.append(batch((b"x", b"1")))
    log.roll()
    aborted_before = log.aborted_transactions(0, log.log_end_offset)
    assert len(aborted_before) == 1
    assert cleaner.clean_log(log) is not None
    values = [(r.key, r.value) for r in iter_records(everything(log))]
    assert (b"k", b"committed") in values and (b"k", b"aborted") not in values
    kinds = [
        (b.is_control, b.records[0].control_type if b.is_control else -1) for b in decoded(log)
    ]
    assert (True, 1) in kinds and (True, 0) in kinds  # markers are kept for now
    assert log.aborted_transactions(0, log.log_end_offset) == aborted_before  # index kept
    abort_marker = next(b for b in decoded(log) if b.is_control and b.records[0].control_type == 0)
    assert abort_marker.has_delete_horizon  # its transaction kept no data
    clock.advance(1_000)
    assert cleaner.clean_log(log) is not None
    kinds = [
        (b.is_control, b.records[0].control_type if b.is_control else -1) for b in decoded(log)
    ]
    assert (True, 1) in kinds and (True, 0) not in kinds  # the empty transaction's marker went
    values = [(r.key, r.value) for r in iter_records(everything(log))]
    assert (b"k", b"committed") in values and (b"k", b"aborted") not in values
    manager.shutdown()
