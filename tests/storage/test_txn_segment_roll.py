"""Aborted transactions that span segment rolls (issue 26): the aborted-transaction look-up.

An aborted transaction is indexed in the ``.txnindex`` of the segment holding its ABORT marker,
which may be any segment after the one holding its first records. A read_committed fetch whose
data ends inside an earlier segment must still get the entry: Kafka's
``LocalLog.collectAbortedTransactions`` reads the indexes of the segment holding the fetch
offset and of every later segment until an entry's last stable offset reaches the fetch's upper
bound (``TransactionIndex.collectAbortedTxns``'s ``isComplete``).

Every fetch here is checked against the rule written independently of storage: the aborted
transactions are exactly those of the whole log whose ``[first_offset, last_offset]`` overlaps
``[fetch offset, offset after the data returned)``.
"""

from __future__ import annotations

import os
from pathlib import Path

from tidelog.storage import LogConfig, PartitionLog
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord
from tidelog.storage.transaction_index import AbortedTxn

SEGMENT_BYTES = 700


def txn_batch(pid: int, seq: int, count: int = 3) -> bytes:
    return encode_batch(
        [NewRecord(key=b"k", value=b"v" * 20) for _ in range(count)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )


class Producers:
    """Transactional producers writing to one log (sequence numbers kept per producer)."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def send(self, pid: int, count: int = 3) -> None:
        seq = self.seq.get(pid, 0)
        self.log.append(txn_batch(pid, seq, count))
        self.seq[pid] = seq + count

    def end(self, pid: int, *, commit: bool) -> None:
        self.log.append_end_txn_marker(
            producer_id=pid, producer_epoch=0, coordinator_epoch=0, commit=commit
        )


def all_aborted(log: PartitionLog) -> list[AbortedTxn]:
    return [t for s in log.segments() for t in s.txn_index.entries]


def check_every_fetch(log: PartitionLog, expected_aborted: list[AbortedTxn]) -> int:
    """Fetch from every batch's base offset with several byte limits; returns fetches checked."""
    assert sorted(all_aborted(log), key=lambda t: t.last_offset) == expected_aborted
    starts = sorted({h.base_offset for s in log.segments() for _, h in s.read_headers(0, s.size)})
    checked = 0
    for start in starts:
        for max_bytes in (1, 200, 900, 5000, 1 << 20):
            fetched = log.read_for_fetch(start, max_bytes, read_committed=True)
            last = fetched.read.last_offset
            assert last is not None
            upper = last + 1
            want = [
                t for t in expected_aborted if t.last_offset >= start and t.first_offset < upper
            ]
            got = sorted(fetched.aborted_transactions or (), key=lambda t: t.last_offset)
            assert got == want, (start, max_bytes, upper)
            checked += 1
    return checked


def test_aborted_txn_spanning_one_roll_is_listed_for_a_fetch_ending_in_the_first_segment(
    log_dir: Path,
) -> None:
    log = PartitionLog(log_dir, LogConfig(segment_bytes=SEGMENT_BYTES))
    producers = Producers(log)
    while len(log.segments()) < 2:
        producers.send(1)
    producers.end(1, commit=False)
    first, second = log.segments()
    assert first.txn_index.entries == []  # the entry is in the segment of the marker
    (entry,) = second.txn_index.entries
    assert entry.first_offset == 0 and entry.last_offset > second.base_offset
    fetched = log.read_for_fetch(0, 1, read_committed=True)
    assert fetched.read.last_offset is not None
    assert fetched.read.last_offset < second.base_offset  # the data ends in the first segment
    assert fetched.aborted_transactions == (entry,)
    check_every_fetch(log, [entry])


def test_aborted_txn_spanning_several_rolls(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig(segment_bytes=SEGMENT_BYTES))
    producers = Producers(log)
    while len(log.segments()) < 5:
        producers.send(1)
    producers.end(1, commit=False)
    assert [len(s.txn_index.entries) for s in log.segments()] == [0, 0, 0, 0, 1]
    (entry,) = all_aborted(log)
    for segment in log.segments()[:-1]:
        fetched = log.read_for_fetch(segment.base_offset, 1, read_committed=True)
        assert fetched.aborted_transactions == (entry,), segment.base_offset
    assert check_every_fetch(log, [entry]) > 0


def interleaved(log: PartitionLog) -> list[AbortedTxn]:
    """Three producers interleaving over many segments; two aborts and a commit overlap, then
    an abort of a transaction that opened before a committed one ended; plain data between."""
    producers = Producers(log)
    for _ in range(6):
        producers.send(1)
        producers.send(2, 2)
        producers.send(3, 1)
    producers.end(2, commit=True)
    for _ in range(4):
        producers.send(1)
        producers.send(3)
    producers.end(3, commit=False)
    for _ in range(3):
        producers.send(1, 2)
    producers.end(1, commit=False)
    log.append(encode_batch([NewRecord(value=b"plain")]))
    producers.send(4)
    producers.send(2)
    producers.send(4)
    producers.end(4, commit=False)
    producers.send(2)
    producers.end(2, commit=False)
    producers.send(5)
    producers.end(5, commit=True)
    aborted = all_aborted(log)
    assert [t.producer_id for t in aborted] == [3, 1, 4, 2]
    assert len(log.segments()) >= 6
    # the transactions of producers 1 and 3 both began in the first segment
    assert {t.producer_id for t in aborted if t.first_offset < log.segments()[1].base_offset} == {
        1,
        3,
    }
    return aborted


def test_interleaved_producers_every_fetch(log_dir: Path) -> None:
    log = PartitionLog(log_dir, LogConfig(segment_bytes=SEGMENT_BYTES))
    expected = interleaved(log)
    assert check_every_fetch(log, expected) > 100


def test_after_a_clean_restart(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=SEGMENT_BYTES)
    log = PartitionLog(log_dir, config)
    expected = interleaved(log)
    leo = log.log_end_offset
    log.close()
    reopened = PartitionLog(log_dir, config, clean_shutdown=True, recovery_point=leo)
    check_every_fetch(reopened, expected)
    reopened.close()


def test_after_a_crash_the_rebuilt_indexes_are_read_the_same_way(log_dir: Path) -> None:
    """As after SIGKILL: nothing closed, ``.txnindex`` and snapshots gone, everything
    recovered from offset 0, the indexes rebuilt by the producer-state replay."""
    config = LogConfig(segment_bytes=SEGMENT_BYTES)
    log = PartitionLog(log_dir, config)
    expected = interleaved(log)
    for segment in log.segments():
        segment.close()
    for pattern in ("*.txnindex", "*.snapshot"):
        for path in log_dir.glob(pattern):
            os.unlink(path)
    reopened = PartitionLog(log_dir, config, clean_shutdown=False, recovery_point=0)
    check_every_fetch(reopened, expected)


def test_aborted_transactions_of_the_whole_log_span_rolls(log_dir: Path) -> None:
    """``aborted_transactions`` (the cleaner's look-up) over ranges ending in early segments."""
    log = PartitionLog(log_dir, LogConfig(segment_bytes=SEGMENT_BYTES))
    expected = interleaved(log)
    for segment in log.segments():
        for upper in (segment.base_offset + 1, segment.next_offset):
            want = [t for t in expected if t.first_offset < upper]
            got = sorted(log.aborted_transactions(0, upper), key=lambda t: t.last_offset)
            assert got == want, upper
