"""Transactions in storage: markers, LSO, .txnindex, snapshots and recovery (real files)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from tidelog.storage import LogConfig, PartitionLog
from tidelog.storage.batch import parse_batch_header
from tidelog.storage.control_records import read_end_txn_marker
from tidelog.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from tidelog.storage.record_codec import decode_batch, encode_batch
from tidelog.storage.record_types import NewRecord
from tidelog.storage.transaction_index import AbortedTxn, TransactionIndex


def txn_batch(pid: int, seq: int, count: int = 1, epoch: int = 0) -> bytes:
    return encode_batch(
        [NewRecord(key=b"k", value=b"v" * 10) for _ in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def plain(pid: int, seq: int) -> bytes:
    return encode_batch(
        [NewRecord(key=b"k", value=b"v")], producer_id=pid, producer_epoch=0, base_sequence=seq
    )


def marker(log: PartitionLog, pid: int, commit: bool, epoch: int = 0, coord: int = 0) -> int:
    info = log.append_end_txn_marker(
        producer_id=pid, producer_epoch=epoch, coordinator_epoch=coord, commit=commit
    )
    return info.first_offset


def test_marker_batch_is_written_as_kafka_writes_it(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig())
    log.append(txn_batch(5, 0, 2))
    offset = marker(log, 5, commit=True, epoch=0, coord=3)
    assert offset == 2
    data = log.read(2, 10_000).read_bytes()
    header = parse_batch_header(data)
    assert header.attributes == 0x30  # transactional | control, uncompressed, CreateTime
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 0, -1)
    assert header.records_count == 1
    record = decode_batch(data).records[0]
    assert record.key == struct.pack(">hh", 0, 1)  # ControlRecordType v0, COMMIT
    assert record.value == struct.pack(">hi", 0, 3)  # EndTransactionMarker v0, epoch 3
    found = read_end_txn_marker(data)
    assert found.is_commit and found.coordinator_epoch == 3 and found.name == "COMMIT"


def test_last_stable_offset_follows_open_transactions(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig())
    log.append(encode_batch([NewRecord(value=b"a")]))  # offset 0, no producer
    log.append(txn_batch(1, 0, 2))  # offsets 1-2, txn of producer 1 opens at 1
    log.append(txn_batch(2, 0, 1))  # offset 3, txn of producer 2 opens at 3
    assert log.high_watermark == 4 and log.last_stable_offset == 1
    marker(log, 1, commit=True)  # offset 4
    assert log.last_stable_offset == 3
    marker(log, 2, commit=False)  # offset 5
    assert log.last_stable_offset == 6 == log.high_watermark
    entries = log.active_segment.txn_index.entries
    assert entries == [AbortedTxn(2, 3, 5, 6)]


def test_read_committed_fetch_stops_at_lso_and_lists_aborted(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig())
    log.append(txn_batch(1, 0, 3))  # 0-2
    marker(log, 1, commit=False)  # 3
    log.append(txn_batch(1, 3, 1))  # 4: a new transaction
    committed = log.read_for_fetch(0, 1 << 20, read_committed=True)
    assert committed.last_stable_offset == 4
    assert committed.read.last_offset == 3
    assert committed.aborted_transactions == (AbortedTxn(1, 0, 3, 4),)
    uncommitted = log.read_for_fetch(0, 1 << 20, read_committed=False)
    assert uncommitted.read.last_offset == 4 and uncommitted.aborted_transactions is None
    after = log.read_for_fetch(4, 1 << 20, read_committed=True)
    assert after.read.size_in_bytes == 0 and after.aborted_transactions == ()


def test_marker_checks_epochs_and_writes_nothing_when_refused(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig())
    log.append(txn_batch(1, 0, 1, epoch=2))
    marker(log, 1, commit=True, epoch=2, coord=4)
    leo = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        marker(log, 1, commit=True, epoch=1, coord=4)
    with pytest.raises(TransactionCoordinatorFencedError):
        marker(log, 1, commit=True, epoch=2, coord=3)
    assert log.log_end_offset == leo


def test_non_transactional_write_during_open_transaction_is_refused(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig())
    log.append(txn_batch(1, 0))
    with pytest.raises(InvalidTxnStateError):
        log.append(plain(1, 1))
    with pytest.raises(InvalidRecordError):  # clients never write control batches
        log.append(
            encode_batch(
                [NewRecord(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00")],
                producer_id=1,
                producer_epoch=0,
                is_control=True,
                is_transactional=True,
            )
        )
    assert log.log_end_offset == 1


def test_clean_restart_keeps_open_transaction_and_txnindex(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig())
    log.append(txn_batch(1, 0, 2))
    marker(log, 1, commit=False)
    log.append(txn_batch(2, 0, 1))  # open at 3
    log.close()
    snapshot = sorted(log_dir.glob("*.snapshot"))[-1]
    assert snapshot.name == f"{4:020d}.snapshot"
    reopened = PartitionLog(log_dir, LogConfig(), clean_shutdown=True, recovery_point=4)
    assert reopened.last_stable_offset == 3
    index = log_dir / f"{0:020d}.txnindex"
    assert index.stat().st_size == 34
    assert TransactionIndex(index).entries == [AbortedTxn(1, 0, 2, 3)]
    marker(reopened, 2, commit=True)
    assert reopened.last_stable_offset == reopened.high_watermark == 5


def test_unclean_restart_rebuilds_txnindex_and_lso(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=400)
    log = PartitionLog(log_dir, config)
    for i in range(6):
        log.append(txn_batch(1, i * 2, 2))
        marker(log, 1, commit=i % 2 == 0)
    log.append(txn_batch(9, 0, 1))  # left open by the "crash"
    expected = [e for s in log.segments() for e in s.txn_index.entries]
    assert len(expected) == 3 and len(log.segments()) > 1
    lso = log.last_stable_offset
    for segment in log.segments():
        segment.close()
    for path in log_dir.glob("*.txnindex"):
        os.unlink(path)  # lost with the crash
    for path in log_dir.glob("*.snapshot"):
        os.unlink(path)
    reopened = PartitionLog(log_dir, config, clean_shutdown=False, recovery_point=0)
    assert [e for s in reopened.segments() for e in s.txn_index.entries] == expected
    assert reopened.last_stable_offset == lso
    aborted = reopened.aborted_transactions(0, reopened.log_end_offset)
    assert aborted == expected


def test_txnindex_goes_with_its_segment_and_truncation(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=300)
    log = PartitionLog(log_dir, config)
    log.append(txn_batch(1, 0, 2))
    marker(log, 1, commit=False)  # offset 2, aborted
    log.roll()
    log.append(txn_batch(1, 2, 1))
    marker(log, 1, commit=False)  # offset 4, aborted, in the second segment
    second = log.active_segment
    assert second.txn_index.entries[0].last_offset == 4
    log.truncate_to(4)
    assert second.txn_index.entries == []
    assert not second.txn_index.path.exists()
    log.delete_records(3)
    log.apply_retention(0)
    assert not (log_dir / f"{0:020d}.txnindex").exists()
    deleted = list(log_dir.glob("*.txnindex.deleted"))
    assert len(deleted) == 1
    log.delete_expired_files(10**15)
    assert not list(log_dir.glob("*.txnindex*"))
