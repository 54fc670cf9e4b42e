"""The streaming reader's offsets, driven directly (no JVM): initial, latest, limits, the
availableNow target, new partitions."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from tests.analytics.kafka_layout import PartitionWriter, write_checkpoint
from tidelog.analytics.options import parse_options
from tidelog.analytics.source import TidelogStreamReader, _cap
from tidelog.storage.record_codec import NewRecord


def _grow(w: PartitionWriter, n: int, root: Path, writers: list[PartitionWriter]) -> None:
    w.batch([NewRecord(b"k", b"v%d" % i, (), 1000 + i) for i in range(n)])
    write_checkpoint(root / "replication-offset-checkpoint",
                     {(x.topic, x.partition): x.next_offset for x in writers})  # fmt: skip


def test_offsets_limits_and_available_now(tmp_path: Path) -> None:
    a0 = PartitionWriter(tmp_path, "s", 0)
    a1 = PartitionWriter(tmp_path, "s", 1)
    writers = [a0, a1]
    _grow(a0, 30, tmp_path, writers)
    _grow(a1, 10, tmp_path, writers)
    opts = parse_options({"path": str(tmp_path), "subscribe": "s",
                          "startingOffsets": "earliest", "maxOffsetsPerTrigger": "8"},
                         streaming=True)  # fmt: skip
    r = TidelogStreamReader(opts)
    start = r.initialOffset()
    assert start == {"s": {"0": 0, "1": 0}}
    assert isinstance(r.getDefaultReadLimit(), ReadMaxRows)
    capped = r.latestOffset(start, ReadMaxRows(8))
    assert sum(capped["s"].values()) == 8 and capped["s"]["0"] > capped["s"]["1"]
    assert r.latestOffset(start, ReadAllAvailable()) == {"s": {"0": 30, "1": 10}}
    parts = r.partitions(start, capped)
    assert sum(p.range.size for p in parts) == 8
    r.prepareForTriggerAvailableNow()  # the target is fixed now ...
    _grow(a0, 5, tmp_path, writers)
    end = r.latestOffset({"s": {"0": 30, "1": 10}}, ReadAllAvailable())
    assert end == {"s": {"0": 30, "1": 10}}  # ... so no new data past it
    later = TidelogStreamReader(opts).latestOffset(end, ReadAllAvailable())
    assert later == {"s": {"0": 35, "1": 10}}  # a new run sees it
    PartitionWriter(tmp_path, "s", 2).batch([NewRecord(None, b"x", (), 1)])
    grown = TidelogStreamReader(opts).latestOffset(end, ReadAllAvailable())
    assert grown["s"]["2"] == 1  # a new partition, read from its earliest offset
    new_parts = TidelogStreamReader(opts).partitions(end, grown)
    assert {(p.range.partition, p.range.start, p.range.end) for p in new_parts} == {
        (0, 30, 35), (2, 0, 1)}  # fmt: skip


def test_cap_always_makes_progress() -> None:
    begin = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    end = {("t", 0): 1, ("t", 1): 1, ("t", 2): 1}
    out = _cap(begin, end, 1)
    assert sum(out[tp] - begin[tp] for tp in begin) == 1
