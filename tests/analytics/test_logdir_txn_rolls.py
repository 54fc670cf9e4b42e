"""The Spark file source in read_committed over aborted transactions that span segment rolls.

``analytics.logdir`` finds the aborted transactions of a range with the partition log's own
look-up (``storage.transaction_state.collect_aborted_transactions``). Every range that ends in
an early segment, while the markers lie in later ones, must skip exactly the aborted batches
(the rule written independently here: a transactional batch whose producer has an aborted
transaction covering its base offset).
"""

from __future__ import annotations

from pathlib import Path

from tests.analytics.kafka_layout import write_checkpoint
from tests.storage.test_txn_segment_roll import SEGMENT_BYTES, interleaved
from tidelog.analytics.logdir import LogDir
from tidelog.analytics.plan import OffsetRange
from tidelog.storage import LogConfig, PartitionLog


def test_read_committed_ranges_ending_in_early_segments(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=SEGMENT_BYTES))
    aborted = interleaved(log)
    segments = log.segments()
    headers = [h for s in segments for _, h in s.read_headers(0, s.size)]
    leo = log.log_end_offset
    bases = [s.base_offset for s in segments]
    log.close()
    write_checkpoint(tmp_path / "replication-offset-checkpoint", {("t", 0): leo})

    def visible(start: int, end: int) -> list[int]:
        out = []
        for h in headers:
            if h.is_control or h.base_offset >= end or h.last_offset < start:
                continue
            if h.is_transactional and any(
                t.producer_id == h.producer_id and t.first_offset <= h.base_offset <= t.last_offset
                for t in aborted
            ):
                continue
            out.extend(o for o in range(h.base_offset, h.last_offset + 1) if start <= o < end)
        return out

    reader = LogDir(tmp_path, read_committed=True)
    checked = 0
    for base in bases:
        for start in (0, base):
            for end in (base + 1, base + 5, leo):
                if end <= start:
                    continue
                got = [
                    o for cols in reader.read(OffsetRange("t", 0, start, end)) for o in cols.offsets
                ]
                assert got == visible(start, end), (start, end)
                checked += 1
    assert checked > 20
    # the aborted records are really there for read_uncommitted
    everything = LogDir(tmp_path)
    got = [o for cols in everything.read(OffsetRange("t", 0, 0, leo)) for o in cols.offsets]
    assert len(got) > len(visible(0, leo))
