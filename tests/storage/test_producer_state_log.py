"""Producer state inside a real PartitionLog: duplicates, rolls, restarts, retention, truncation."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.storage.storage_helpers import FakeClock
from tidelog.storage import LogConfig, LogManager, PartitionLog
from tidelog.storage.producer_snapshot import read_snapshot
from tidelog.storage.producer_state import OutOfOrderSequenceError
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord

SMALL = LogConfig(segment_bytes=1000)


def batch(
    pid: int, seq: int, count: int = 1, epoch: int = 0, size: int = 10, ts: int | None = None
) -> bytes:
    return encode_batch(
        [NewRecord(key=None, value=b"x" * size, timestamp=ts) for _ in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def snapshots(log: PartitionLog) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in log.dir.glob("*.snapshot"))


def test_duplicate_is_answered_with_its_offsets_and_not_written(
    log_dir: Path, clock: FakeClock
) -> None:
    log = PartitionLog(log_dir, LogConfig(), clock=clock)
    first = log.append(batch(7, 0, 3))
    log.append(batch(8, 0))
    again = log.append(batch(7, 0, 3))
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
    assert again.batches == () and again.log_append_time_ms == -1
    assert log.log_end_offset == 4
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(7, 5))
    assert log.log_end_offset == 4
    log.close()


def test_duplicate_on_log_append_time_topic(log_dir: Path, clock: FakeClock) -> None:
    log = PartitionLog(log_dir, LogConfig(message_timestamp_type="LogAppendTime"), clock=clock)
    first = log.append(batch(1, 0))
    clock.advance(5000)
    again = log.append(batch(1, 0))
    assert again.log_append_time_ms == first.log_append_time_ms == clock.now_ms - 5000
    log.close()


def test_snapshots_on_roll_and_close_and_clean_reload(log_dir: Path, clock: FakeClock) -> None:
    log = PartitionLog(log_dir, SMALL, clock=clock)
    for seq in range(20):
        log.append(batch(1, seq, size=100))
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) > 2
    assert snapshots(log) == bases[1:]  # one per roll, named after the new segment
    log.flush()
    log.close()
    assert snapshots(log)[-1] == 20  # clean shutdown: at the log end offset
    again = PartitionLog(log_dir, SMALL, clock=clock, clean_shutdown=True)
    assert again.append(batch(1, 19, size=100)).first_offset == 19  # last batch: known
    assert again.append(batch(1, 20, size=100)).first_offset == 20
    again.close()


def test_unclean_reload_rebuilds_from_the_log(log_dir: Path, clock: FakeClock) -> None:
    log = PartitionLog(log_dir, SMALL, clock=clock)
    for seq in range(12):
        log.append(batch(1, seq, size=100))
        log.append(batch(2, 100 + seq, size=100))
    live = dict(log.producer_state.producers)
    latest_snapshot = snapshots(log)[-1]
    # a crash: nothing closed, nothing flushed (the page cache keeps the writes)
    crashed = PartitionLog(log_dir, SMALL, clock=clock, recovery_point=0)
    rebuilt = crashed.producer_state.producers
    for pid in (1, 2):
        # Kafka behaviour kept: the snapshot holds each producer's last batch; the batches
        # after it are replayed, so the cache holds those (at most five) plus that one
        assert rebuilt[pid].batches[-1] == live[pid].batches[-1]
        replayed = [b for b in live[pid].batches if b.last_offset >= latest_snapshot]
        assert len(rebuilt[pid].batches) >= min(len(replayed) + 1, 5)
    assert crashed.append(batch(1, 11, size=100)).first_offset == 22
    assert crashed.append(batch(2, 111, size=100)).first_offset == 23
    assert crashed.log_end_offset == 24
    crashed.close()


def test_unclean_reload_keeps_a_snapshot_that_still_matches(
    log_dir: Path, clock: FakeClock
) -> None:
    """A crash after a clean stop and start (nothing appended): recovery replays the active
    segment and finds the snapshot at the log end right, so it is neither deleted nor written
    again; a snapshot whose bytes differ from the replayed state is replaced."""
    log = PartitionLog(log_dir, LogConfig(), clock=clock)
    for seq in range(4):
        log.append(batch(1, seq))
        log.append(batch(2, 10 + seq))
    log.close()
    at_end = log_dir / f"{4 * 2:020d}.snapshot"
    before = at_end.stat()
    state = dict(log.producer_state.producers)

    crashed = PartitionLog(log_dir, LogConfig(), clock=clock, recovery_point=8)
    after = at_end.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert snapshots(crashed) == [8]
    assert crashed.producer_state.producers[1].batches[-1] == state[1].batches[-1]
    assert crashed.append(batch(1, 3)).first_offset == 6  # a retry: its original offsets
    crashed.close_without_flush()

    # The same crash, but the snapshot at the log end lost its bytes (power loss): replaced.
    log_dir2 = log_dir.parent / "topic-1"
    second = PartitionLog(log_dir2, LogConfig(), clock=clock)
    for seq in range(4):
        second.append(batch(1, seq))
    second.close()
    damaged = log_dir2 / f"{4:020d}.snapshot"
    damaged.write_bytes(bytes(damaged.stat().st_size))
    again = PartitionLog(log_dir2, LogConfig(), clock=clock, recovery_point=4)
    (entry,) = read_snapshot(damaged)  # written again, and valid
    assert (entry.producer_id, entry.last_sequence, entry.last_offset) == (1, 3, 3)
    assert again.append(batch(1, 3)).first_offset == 3
    again.close()


def test_unclean_reload_without_snapshot_knows_five_batches(
    log_dir: Path, clock: FakeClock
) -> None:
    log = PartitionLog(log_dir, LogConfig(), clock=clock)
    for seq in range(8):
        log.append(batch(1, seq))
    crashed = PartitionLog(log_dir, LogConfig(), clock=clock, recovery_point=0)
    assert dict(crashed.producer_state.producers) == dict(log.producer_state.producers)
    for seq in range(3, 8):
        assert crashed.append(batch(1, seq)).first_offset == seq
    assert crashed.log_end_offset == 8
    crashed.close()


def test_delete_records_and_retention_drop_producers_and_snapshots(
    log_dir: Path, clock: FakeClock
) -> None:
    log = PartitionLog(log_dir, SMALL, clock=clock)
    log.append(batch(1, 0, size=100))
    for seq in range(15):
        log.append(batch(2, seq, size=100))
    log.delete_records(5)
    assert set(log.producer_state.producers) == {2}
    assert min(snapshots(log)) >= 5
    log.apply_retention(clock())
    assert log.log_start_offset == 5
    assert all(s >= log.segments()[0].base_offset for s in snapshots(log))
    # producer 1 is unknown now: it may start again at any sequence
    assert log.append(batch(1, 40)).first_offset == 16
    log.close()


def test_retention_expires_idle_producers_and_keeps_two_segments_of_snapshots(
    log_dir: Path, clock: FakeClock
) -> None:
    log = PartitionLog(log_dir, SMALL, clock=clock, producer_id_expiration_ms=60_000)
    for seq in range(30):
        log.append(batch(1, seq, size=100, ts=clock()))
    log.flush()
    log.apply_retention(clock())
    assert set(log.producer_state.producers) == {1}
    clock.advance(60_000)
    log.apply_retention(clock())
    assert not log.producer_state.producers
    bases = [s.base_offset for s in log.segments()]
    assert snapshots(log) == bases[-2:]
    log.close()


def test_truncation_reloads_the_state(log_dir: Path, clock: FakeClock) -> None:
    log = PartitionLog(log_dir, SMALL, clock=clock)
    for seq in range(10):
        log.append(batch(1, seq, size=100))
    log.truncate_to(6)
    entry = log.producer_state.last_entry(1)
    assert entry is not None and entry.last_sequence == 5
    assert log.append(batch(1, 6, size=100)).first_offset == 6  # rewritten, not a duplicate
    log.truncate_to(0)
    assert not log.producer_state.producers
    log.close()


def test_log_manager_passes_the_expiration(tmp_path: Path, clock: FakeClock) -> None:
    manager = LogManager([tmp_path], default_config=LogConfig(), producer_id_expiration_ms=123)
    manager.startup()
    import uuid

    log = manager.create_log("t", 0, LogConfig(), uuid.uuid4())
    assert log.producer_state.producer_id_expiration_ms == 123
    manager.shutdown()


OPS = st.lists(
    st.tuples(
        st.sampled_from(["new", "new", "new", "retry", "crash", "close", "delete"]),
        st.integers(0, 2),
        st.integers(1, 5),
    ),
    max_size=40,
)


@settings(max_examples=40, deadline=None)
@given(ops=OPS)
def test_random_appends_crashes_and_restarts(ops: list[tuple[str, int, int]]) -> None:
    """Live state == state after any restart; retries of the last batch always recognised."""
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = PartitionLog(directory, SMALL, clock=clock)
        next_seq = [0, 0, 0]
        last: list[tuple[bytes, int] | None] = [None, None, None]
        expected_leo = 0
        for op, which, n in ops:
            if op == "new":
                data = batch(which, next_seq[which], n, size=60)
                info = log.append(data)
                assert info.first_offset == expected_leo
                expected_leo += n
                last[which] = (data, info.first_offset)
                next_seq[which] += n
            elif op == "retry" and last[which] is not None:
                data, offset = last[which]  # type: ignore[misc]
                if offset >= log.log_start_offset:
                    assert log.append(data).first_offset == offset
            elif op in ("crash", "close"):
                live = dict(log.producer_state.producers)
                if op == "close":
                    log.close()
                start = log.log_start_offset
                log = PartitionLog(
                    directory,
                    SMALL,
                    clock=clock,
                    clean_shutdown=op == "close",
                    recovery_point=0,
                    log_start_offset=start,
                )
                reloaded = log.producer_state.producers
                assert set(reloaded) == set(live)
                for pid, entry in reloaded.items():
                    assert entry.producer_epoch == live[pid].producer_epoch
                    assert entry.batches[-1] == live[pid].batches[-1]
            elif op == "delete" and expected_leo:
                log.delete_records(min(expected_leo, log.log_start_offset + n))
                log.apply_retention(clock())
        assert log.log_end_offset == expected_leo
        log.close()
