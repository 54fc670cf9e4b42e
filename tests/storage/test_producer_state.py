"""storage.producer_state: sequence/epoch validation, duplicates, expiry, log start, load."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.storage.batch import RecordBatchHeader
from tidelog.storage.errors import InvalidRecordError, StorageError
from tidelog.storage.producer_snapshot import list_snapshots, snapshot_path
from tidelog.storage.producer_state import (
    INT32_MAX,
    BatchMetadata,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateEntry,
    ProducerStateManager,
    decrement_sequence,
    increment_sequence,
)

NOW = 1_700_000_000_000
DAY = 24 * 3600 * 1000


def header(
    producer_id: int,
    epoch: int,
    base_sequence: int,
    count: int = 1,
    *,
    base_offset: int = 0,
    timestamp: int = NOW,
    control: bool = False,
) -> RecordBatchHeader:
    return RecordBatchHeader(
        base_offset=base_offset,
        batch_length=49 + 10 * count,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0x20 if control else 0,
        last_offset_delta=count - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=base_sequence,
        records_count=count,
    )


class Log:
    """A minimal log: assigns offsets, keeps the written headers, drives the state manager."""

    def __init__(self, directory: Path, clock: list[int] | None = None) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.now = clock if clock is not None else [NOW]
        self.state = self.new_state()
        self.written: list[RecordBatchHeader] = []
        self.leo = 0

    def new_state(self) -> ProducerStateManager:
        return ProducerStateManager(self.directory, clock=lambda: self.now[0])

    def append(self, *batches: RecordBatchHeader) -> tuple[int, int]:
        """(first offset, last offset) as a produce answer would carry them."""
        duplicate = self.state.check_append(batches)
        if duplicate is not None:
            return duplicate.first_offset, duplicate.last_offset
        first = self.leo
        out = []
        for b in batches:
            h = _at(b, self.leo)
            out.append(h)
            self.leo = h.last_offset + 1
        self.written.extend(out)
        self.state.update(out)
        return first, self.leo - 1

    def scan(self, offset: int) -> Iterator[RecordBatchHeader]:
        return iter([h for h in self.written if h.last_offset >= offset])


def _at(h: RecordBatchHeader, base_offset: int) -> RecordBatchHeader:
    return RecordBatchHeader(
        base_offset,
        h.batch_length,
        h.partition_leader_epoch,
        h.magic,
        h.crc,
        h.attributes,
        h.last_offset_delta,
        h.base_timestamp,
        h.max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        h.records_count,
    )


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return Log(tmp_path / "t-0")


def test_sequences_wrap_like_kafka() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert decrement_sequence(8, 3) == 5


def test_in_order_appends_and_retries_of_the_last_five(log: Log) -> None:
    offsets = [log.append(header(7, 0, seq * 3, 3)) for seq in range(8)]
    assert offsets[0] == (0, 2) and offsets[-1] == (21, 23)
    for seq in range(3, 8):  # the last five are cached
        assert log.append(header(7, 0, seq * 3, 3)) == offsets[seq]
    assert log.leo == 24
    # an older batch is no longer known: it is out of order, not a duplicate
    with pytest.raises(OutOfOrderSequenceError):
        log.append(header(7, 0, 6, 3))
    assert log.append(header(7, 0, 24, 1)) == (24, 24)


def test_gap_is_out_of_order_and_changes_nothing(log: Log) -> None:
    log.append(header(1, 0, 0, 2))
    before = {pid: copy.copy(e) for pid, e in log.state.producers.items()}
    with pytest.raises(OutOfOrderSequenceError) as err:
        log.append(header(1, 0, 3))
    assert err.value.error_name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert isinstance(err.value, StorageError)
    assert dict(log.state.producers) == before and log.leo == 2
    assert log.append(header(1, 0, 2)) == (2, 2)


def test_partial_overlap_is_not_a_duplicate(log: Log) -> None:
    log.append(header(1, 0, 0, 4))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(header(1, 0, 0, 2))


def test_unknown_producer_may_start_anywhere(log: Log) -> None:
    """KIP-360 (Kafka >= 2.5): no UNKNOWN_PRODUCER_ID, any first sequence is accepted."""
    assert log.append(header(9, 3, 1234)) == (0, 0)
    assert log.append(header(9, 3, 1235)) == (1, 1)


def test_epochs(log: Log) -> None:
    log.append(header(1, 5, 0))
    with pytest.raises(InvalidProducerEpochError) as err:
        log.append(header(1, 4, 1))
    assert err.value.error_name == "INVALID_PRODUCER_EPOCH"
    with pytest.raises(OutOfOrderSequenceError):
        log.append(header(1, 6, 1))  # a new epoch must start at 0
    assert log.append(header(1, 6, 0)) == (1, 1)
    # the old epoch's batches are forgotten: a retry under epoch 5 is fenced
    with pytest.raises(InvalidProducerEpochError):
        log.append(header(1, 5, 0))
    entry = log.state.last_entry(1)
    assert entry is not None and entry.producer_epoch == 6 and len(entry.batches) == 1


def test_sequence_wraps_at_int_max(log: Log) -> None:
    log.append(header(1, 0, INT32_MAX - 1, 2))
    entry = log.state.last_entry(1)
    assert entry is not None and entry.last_sequence == INT32_MAX
    assert log.append(header(1, 0, 0, 2)) == (2, 3)
    # a batch whose sequence range wraps
    log2 = Log(log.directory.parent / "w-0")
    log2.append(header(1, 0, INT32_MAX - 1, 4))
    entry = log2.state.last_entry(1)
    assert entry is not None and entry.last_sequence == 1
    assert entry.batches[0].first_sequence == INT32_MAX - 1
    assert log2.append(header(1, 0, INT32_MAX - 1, 4)) == (0, 3)  # retry recognised
    assert log2.append(header(1, 0, 2)) == (4, 4)


def test_negative_sequence_with_producer_id_is_invalid(log: Log) -> None:
    with pytest.raises(InvalidRecordError):
        log.append(header(1, 0, -1))


def test_plain_batches_are_ignored(log: Log) -> None:
    assert log.append(header(-1, -1, -1), header(-1, -1, -1)) == (0, 1)
    assert log.append(header(-1, -1, -1)) == (2, 2)
    assert not log.state.producers


def test_several_batches_of_one_producer_in_one_request(log: Log) -> None:
    log.append(header(1, 0, 0))
    assert log.append(header(1, 0, 1), header(1, 0, 2, 2), header(2, 0, 7)) == (1, 4)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(header(1, 0, 4), header(1, 0, 6))  # second batch leaves a gap
    with pytest.raises(OutOfOrderSequenceError):
        log.append(header(1, 1, 0), header(1, 1, 2))
    assert log.append(header(1, 1, 0), header(1, 1, 1)) == (5, 6)
    entry = log.state.last_entry(1)
    assert entry is not None and [b.last_sequence for b in entry.batches] == [0, 1]


def test_duplicate_answers_for_whole_request(log: Log) -> None:
    """Kafka: if any batch of the request is a duplicate, the append is answered with it."""
    log.append(header(1, 0, 0))
    assert log.append(header(1, 0, 0), header(1, 0, 1)) == (0, 0)
    assert log.leo == 1


def test_expiry(log: Log) -> None:
    log.append(header(1, 0, 0, timestamp=NOW - DAY))
    log.append(header(2, 0, 0, timestamp=NOW - DAY + 1))
    assert log.state.remove_expired_producers(NOW) == 1
    assert set(log.state.producers) == {2}
    # an expired producer is unknown again: any sequence is accepted
    assert log.append(header(1, 0, 50)) == (2, 2)


def test_log_start_drops_batches_producers_and_snapshots(log: Log) -> None:
    for seq in range(4):
        log.append(header(1, 0, seq * 2, 2))  # offsets 0-7
    log.append(header(2, 0, 0))  # offset 8
    log.state.take_snapshot(log.leo)
    log.append(header(1, 0, 8))  # offset 9
    log.state.take_snapshot(log.leo)
    log.state.on_log_start_offset_incremented(9)
    assert set(log.state.producers) == {1}
    entry = log.state.last_entry(1)
    assert entry is not None and [b.last_offset for b in entry.batches] == [9]
    assert log.state.snapshot_offsets() == [9, 10]
    log.state.on_log_start_offset_incremented(5)  # never goes back: nothing changes
    assert log.state.snapshot_offsets() == [9, 10]


def test_control_batches_only_move_the_epoch(log: Log) -> None:
    log.append(header(1, 0, 0))
    log.state.update([header(1, 0, -1, base_offset=1, control=True)])
    entry = log.state.last_entry(1)
    assert entry is not None and len(entry.batches) == 1
    log.state.update([header(1, 1, -1, base_offset=2, control=True)])
    entry = log.state.last_entry(1)
    assert entry is not None and entry.producer_epoch == 1 and not entry.batches


def test_batch_metadata_derived_fields() -> None:
    b = BatchMetadata(last_sequence=1, last_offset=103, offset_delta=3, timestamp=5)
    assert b.first_offset == 100 and b.first_sequence == INT32_MAX - 1


# -- load ---------------------------------------------------------------------------------------


def _reload(log: Log, *, log_start: int = 0, take_snapshot: bool = True) -> ProducerStateManager:
    state = log.new_state()
    state.load(
        log_start_offset=log_start,
        log_end_offset=log.leo,
        scan=log.scan,
        take_snapshot=take_snapshot,
    )
    return state


def _fill(log: Log) -> None:
    for seq in range(7):
        log.append(header(1, 0, seq))
        log.append(header(2, 3, 100 + seq * 2, 2))
    log.append(header(-1, -1, -1))


def test_load_without_snapshot_equals_live_state(log: Log) -> None:
    _fill(log)
    state = _reload(log, take_snapshot=False)
    assert dict(state.producers) == dict(log.state.producers)
    assert state.snapshot_offsets() == []


def test_load_takes_a_snapshot_and_keeps_the_last_batch(log: Log) -> None:
    _fill(log)
    _reload(log)
    assert log.state.snapshot_offsets() == [log.leo]
    state = _reload(log)  # from the snapshot alone
    for pid, live in log.state.producers.items():
        loaded = state.producers[pid]
        assert loaded.producer_epoch == live.producer_epoch
        assert loaded.batches == live.batches[-1:]
        assert loaded.last_timestamp == live.last_timestamp


def test_load_from_snapshot_plus_tail(log: Log) -> None:
    for seq in range(3):
        log.append(header(1, 0, seq))
    log.state.take_snapshot(log.leo)
    for seq in range(3, 6):
        log.append(header(1, 0, seq))
        log.append(header(5, 0, seq))
    state = _reload(log, take_snapshot=False)
    live = log.state.producers
    assert state.producers[5] == live[5]
    assert state.producers[1].batches == live[1].batches[-4:]
    # the retry of a batch written after the snapshot is still a duplicate
    log.state = state
    assert log.append(header(1, 0, 4)) == (5, 5)


def test_corrupt_latest_snapshot_falls_back(log: Log) -> None:
    log.append(header(1, 0, 0))
    log.state.take_snapshot(1)
    log.append(header(1, 0, 1))
    log.state.take_snapshot(2)
    path = snapshot_path(log.directory, 2)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    state = _reload(log, take_snapshot=False)
    assert not path.exists()
    assert dict(state.producers) == dict(log.state.producers)


def test_load_drops_snapshots_out_of_range_and_tmp_files(log: Log) -> None:
    log.append(header(1, 0, 0))
    log.state.take_snapshot(1)
    log.append(header(1, 0, 1))
    log.state.take_snapshot(2)
    (log.directory / f"{3:020d}.snapshot").write_bytes(b"garbage")
    (log.directory / f"{2:020d}.snapshot.tmp").write_bytes(b"half")
    log.leo = 2
    state = _reload(log, log_start=1, take_snapshot=False)
    assert sorted(list_snapshots(log.directory)) == [1, 2]
    assert not (log.directory / f"{2:020d}.snapshot.tmp").exists()
    entry = state.last_entry(1)
    assert entry is not None and entry.last_sequence == 1


def test_load_skips_expired_producers(log: Log) -> None:
    log.append(header(1, 0, 0, timestamp=NOW - 2 * DAY))
    log.append(header(2, 0, 0))
    log.state.take_snapshot(1)
    assert set(_reload(log, take_snapshot=False).producers) == {2}
    (log.directory / f"{1:020d}.snapshot").unlink()
    assert set(_reload(log, take_snapshot=False).producers) == {2}


def test_take_snapshot_does_not_overwrite(log: Log) -> None:
    log.append(header(1, 0, 0))
    assert log.state.take_snapshot(1, sync=False) is not None
    assert log.state.take_snapshot(1) is None
    snapshot_path(log.directory, 1).rename(log.directory / "moved")
    log.state.flush_snapshots()  # the file is gone: no error
    (log.directory / "moved").rename(snapshot_path(log.directory, 1))
    assert log.state.take_snapshot(2, sync=False) is not None
    log.state.flush_snapshots()
    log.state.delete_snapshots_before(2)
    assert log.state.snapshot_offsets() == [2]


def test_entry_snapshot_round_trip() -> None:
    entry = ProducerStateEntry(
        4, 2, (BatchMetadata(10, 50, 2, 77), BatchMetadata(12, 52, 1, 78)), 78
    )
    back = ProducerStateEntry.from_snapshot_entry(entry.to_snapshot_entry())
    assert back == ProducerStateEntry(4, 2, (BatchMetadata(12, 52, 1, 78),), 78)
    empty = ProducerStateEntry(4, 2, (), 5)
    assert ProducerStateEntry.from_snapshot_entry(empty.to_snapshot_entry()) == empty


def test_snapshot_bytes_follow_kafkas_schema(tmp_path: Path) -> None:
    """Layout written independently: version i16, crc u32 over the rest, i32 count, entries."""
    import struct

    from crc32c import crc32c

    log = Log(tmp_path / "k-0")
    log.append(header(3, 1, 10, 4, timestamp=1234))  # offsets 0-3
    log.append(header(-1, -1, -1))  # offset 4
    log.append(header(2, 0, 0, 1, timestamp=99))  # offset 5
    path = log.state.take_snapshot(log.leo)
    assert path is not None and path.name == "00000000000000000006.snapshot"
    body = struct.pack(">i", 2)
    body += struct.pack(">qhiqiqiq", 2, 0, 0, 5, 0, 99, -1, -1)
    body += struct.pack(">qhiqiqiq", 3, 1, 13, 3, 3, 1234, -1, -1)
    assert path.read_bytes() == struct.pack(">hI", 1, crc32c(body)) + body


def test_maintain_keeps_what_kafka_keeps(log: Log) -> None:
    for offset in (0, 10, 20, 30, 35):
        log.state.take_snapshot(offset)
    log.append(header(1, 0, 0, timestamp=NOW - 2 * DAY))
    # segments at 0, 10, 20, 30; recovery point 25 (inside the segment at 20)
    log.state.maintain(NOW, [0, 10, 20, 30], 25)
    assert log.state.snapshot_offsets() == [20, 30, 35]
    assert not log.state.producers  # expired
    log.state.maintain(NOW, [0, 10, 20, 30], 12)
    assert log.state.snapshot_offsets() == [20, 30, 35]
    log.state.maintain(NOW, [30], 40)
    assert log.state.snapshot_offsets() == [30, 35]
