"""The replay's planning and file reading without Spark: options, ranges, the log dir reader."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from tests.analytics.kafka_layout import PartitionWriter, write_checkpoint
from tidelog.analytics.logdir import LogDir, LogDirError, read_checkpoint
from tidelog.analytics.options import OptionError, parse_options
from tidelog.analytics.plan import OffsetRange, PlanError, plan_ranges, split
from tidelog.analytics.replay import parse_position
from tidelog.storage.record_codec import NewRecord, Record, RecordColumns, encode_batch

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _recs(n: int, start: int, ts: int = 1_700_000_000_000) -> list[NewRecord]:
    return [
        NewRecord(None if i % 5 == 0 else b"key-%d" % (i % 3), None if i % 7 == 3 else b"v%d" % i,
                  (("trace", b"t%d" % i), ("empty", None)) if i % 2 else (), ts + start + i)
        for i in range(start, start + n)
    ]  # fmt: skip


def _rows(cols_iter: object) -> list[tuple[object, ...]]:
    out = []
    for c in cols_iter:  # type: ignore[attr-defined]
        assert isinstance(c, RecordColumns)
        out += list(zip(c.offsets, c.timestamps, c.keys, c.values, c.headers, strict=True))
    return out


def _want(recs: list[Record]) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]


@pytest.fixture()
def logdir(tmp_path: Path) -> tuple[Path, dict[tuple[str, int], PartitionWriter]]:
    """'events' (2 partitions, every codec, small segments so they roll, a compacted stretch
    with gaps, a control batch) and 'other' (1 partition); HW of events-1 is below its LEO."""
    writers = {}
    for p in range(2):
        w = PartitionWriter(tmp_path, "events", p, segment_bytes=700)
        for b, codec in enumerate(CODECS * 2):
            w.batch(_recs(6, b * 6), codec)
        w.batch(_recs(4, 100), "zstd", gap=2)
        w.control()
        w.batch(_recs(3, 200), "gzip")
        writers[("events", p)] = w
    o = PartitionWriter(tmp_path, "other", 0)
    o.batch(_recs(5, 0), "lz4")
    writers[("other", 0)] = o
    hw = {tp: w.next_offset for tp, w in writers.items()}
    hw[("events", 1)] -= 3  # the last batch is not committed yet
    write_checkpoint(tmp_path / "replication-offset-checkpoint", hw)
    (tmp_path / "events-0" / "partial").write_text("x")  # stray files are ignored
    with open(tmp_path / "other-0" / f"{0:020d}.log", "ab") as f:
        f.write(encode_batch(_recs(3, 9), base_offset=5)[:70])  # an append in flight
    last = max(writers[("events", 0)].dir.glob("*.log"))
    with open(last, "ab") as f:
        f.write(b"\x00" * 30)  # a zero-filled (preallocated) tail
    return tmp_path, writers


def test_layout_offsets_and_rolls(logdir: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    root, writers = logdir
    ld = LogDir(root)
    assert ld.topics() == {"events": [0, 1], "other": [0]}
    assert len(ld.segments(("events", 0))) > 3  # rolled
    tps = [("events", 0), ("events", 1), ("other", 0)]
    assert ld.earliest(tps) == dict.fromkeys(tps, 0)
    latest = ld.latest(tps)
    assert latest[("events", 1)] == writers[("events", 1)].next_offset - 3
    assert latest[("other", 0)] == 5


def test_reads_every_record_below_hw(logdir: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    root, writers = logdir
    ld = LogDir(root)
    for tp, w in writers.items():
        hw = ld.latest([tp])[tp]
        got = _rows(ld.read(OffsetRange(tp[0], tp[1], 0, hw)))
        assert got == _want([r for r in w.expected if r.offset < hw])


def test_split_ranges_read_the_same_rows(logdir: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    root, writers = logdir
    ld = LogDir(root)
    hw = ld.latest([("events", 0)])[("events", 0)]
    for size in (1, 4, 7, 13):
        pieces = split([OffsetRange("events", 0, 0, hw)], size)
        assert all(p.size <= size for p in pieces)
        got = [row for p in pieces for row in _rows(ld.read(p))]
        assert got == _want(writers[("events", 0)].expected)
    mid = _rows(ld.read(OffsetRange("events", 0, 20, 33)))
    assert [r[0] for r in mid] == list(range(20, 33))


def test_offsets_for_time_and_log_start(logdir: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    root, writers = logdir
    ld = LogDir(root)
    exp = writers[("events", 0)].expected
    target = exp[17].timestamp
    assert ld.offsets_for_time([("events", 0)], target) == {("events", 0): exp[17].offset}
    assert ld.offsets_for_time([("events", 0)], 2**50) == {("events", 0): None}
    write_checkpoint(root / "log-start-offset-checkpoint", {("events", 0): 9})
    assert LogDir(root).earliest([("events", 0)]) == {("events", 0): 9}


def test_plan_with_options(logdir: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    root, writers = logdir
    opts = parse_options({"path": str(root), "subscribePattern": "ev.*",
                          "startingOffsets": '{"events":{"0":5,"1":-2}}',
                          "endingOffsets": '{"events":{"0":11}}',
                          "maxRecordsPerPartition": "4"})  # fmt: skip
    ranges = plan_ranges(opts, LogDir(root))
    hw1 = writers[("events", 1)].next_offset - 3
    assert ranges[:2] == [OffsetRange("events", 0, 5, 9), OffsetRange("events", 0, 9, 11)]
    assert sum(r.size for r in ranges if r.partition == 1) == hw1
    exp = writers[("events", 0)].expected
    by_time = parse_options({"path": str(root), "assign": '{"events":[0]}',
                             "startingTimestamp": str(exp[3].timestamp),
                             "endingTimestamp": str(exp[8].timestamp)})  # fmt: skip
    assert plan_ranges(by_time, LogDir(root)) == [OffsetRange("events", 0, 3, 8)]
    with pytest.raises(PlanError, match=r"subscribe: no topic.*nope"):
        plan_ranges(parse_options({"path": str(root), "subscribe": "nope"}), LogDir(root))


def test_legacy_segment(tmp_path: Path) -> None:
    """An old Kafka log: v1 messages, one gzip wrapper (relative inner offsets), then v2."""

    def msg(offset: int, attrs: int, ts: int, key: bytes | None, value: bytes) -> bytes:
        body = bytes((1, attrs)) + struct.pack(">q", ts)
        body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
        body += struct.pack(">i", len(value)) + value
        return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body

    inner = b"".join(msg(i, 0, 10 + i, b"k", b"in%d" % i) for i in range(3))
    data = msg(0, 0, 5, None, b"plain") + msg(3, 1, 0, None, zlib.compress(inner, wbits=31))
    w = PartitionWriter(tmp_path, "old", 0)
    w.raw(data, [Record(0, 5, None, b"plain")] + [Record(1 + i, 10 + i, b"k", b"in%d" % i)
                                                   for i in range(3)], 4)  # fmt: skip
    w.batch(_recs(2, 0), "none")
    ld = LogDir(tmp_path)
    assert _rows(ld.read(OffsetRange("old", 0, 0, 6))) == _want(w.expected)
    assert [r[0] for r in _rows(ld.read(OffsetRange("old", 0, 2, 5)))] == [2, 3, 4]
    fast = [r for b in ld.read_arrow(OffsetRange("old", 0, 1, 6), False) for r in b.to_pylist()]
    assert [(r["offset"], r["key"], r["value"]) for r in fast] == [
        (r.offset, r.key, r.value) for r in w.expected[1:]
    ]


def test_checkpoint_parsing(tmp_path: Path) -> None:
    p = tmp_path / "cp"
    p.write_text("0\n2\na-b 0 5\nc 3 7\n")
    assert read_checkpoint(p) == {("a-b", 0): 5, ("c", 3): 7}
    p.write_text("1\n0\n")
    with pytest.raises(LogDirError, match="checkpoint"):
        read_checkpoint(p)
    with pytest.raises(LogDirError, match=r"path=.*not a directory"):
        LogDir(tmp_path / "missing")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t", "bogus": "1"}, "unknown option 'bogus'"),
        ({"subscribe": "t", "kafka.bootstrap.servers": "h:1"}, "exactly one of option path"),
        ({}, "exactly one of options subscribe"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of options subscribe"),
        ({"assign": "[1]"}, "option assign"),
        ({"subscribePattern": "("}, "subscribePattern"),
        ({"subscribe": "t", "startingOffsets": "soon"}, "startingOffsets"),
        ({"subscribe": "t", "startingOffsets": '{"t":{"x":1}}'}, "startingOffsets"),
        ({"subscribe": "t", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, "endingOffsets"),
        ({"subscribe": "t", "startingTimestamp": "yesterday"}, "startingTimestamp"),
        ({"subscribe": "t", "includeHeaders": "yes"}, "includeHeaders"),
        ({"subscribe": "t", "maxRecordsPerPartition": "0"}, "maxRecordsPerPartition"),
        ({"subscribe": "t", "kafka.group.id": "g"}, "unknown option 'kafka.group.id'"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    opts = {"path": "/tmp", **options}
    with pytest.raises(OptionError, match=message):
        parse_options(opts)


def test_options_round_trip_and_streaming_rules() -> None:
    opts = parse_options({"kafka.bootstrap.servers": "h:9092", "SUBSCRIBE": "a,b",
                          "kafka.client.id": "me", "failOnDataLoss": "false"})  # fmt: skip
    assert opts.topics == ("a", "b") and opts.starting == "earliest"
    assert parse_options(opts.to_dict()) == opts
    assert parse_options({"path": "/x", "subscribe": "a"}, streaming=True).starting == "latest"
    with pytest.raises(OptionError, match="endingOffsets is for batch"):
        parse_options({"path": "/x", "subscribe": "a", "endingOffsets": "latest"}, streaming=True)


def test_cli_positions() -> None:
    assert parse_position("earliest", "--from") == ("offsets", "earliest")
    assert parse_position("42", "--from") == ("offset", "42")
    assert parse_position("@1700000000000", "--to") == ("timestamp", "1700000000000")
    assert parse_position("2023-11-14T22:13:20Z", "--to") == ("timestamp", "1700000000000")
    assert parse_position("2023-11-14", "--to") == ("timestamp", "1699920000000")
    with pytest.raises(OptionError, match="--from 'soon'"):
        parse_position("soon", "--from")


def test_arrow_reader_equals_column_reader(logdir: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    from tidelog.analytics.arrow import to_arrow

    root, writers = logdir
    ld = LogDir(root)
    for tp in writers:
        hw = ld.latest([tp])[tp]
        for piece in split([OffsetRange(tp[0], tp[1], 0, hw)], 9):
            fast = [r for b in ld.read_arrow(piece, True) for r in b.to_pylist()]
            slow = [r for c in ld.read(piece) for r in to_arrow(c, *tp, True).to_pylist()]
            assert fast == slow


def test_a_worker_that_cannot_see_the_log_dir_says_so(tmp_path: Path) -> None:
    """Files mode on a cluster: the task's worker checks the log dir before reading."""
    from tidelog.analytics.source import read_range

    opts = parse_options({"path": str(tmp_path), "subscribe": "t"})
    gone = tmp_path / "gone"
    moved = parse_options({"path": str(gone), "subscribe": "t"})
    assert opts.path == str(tmp_path)
    with pytest.raises(LogDirError) as e:
        list(read_range(moved, OffsetRange("t", 0, 0, 5)))
    msg = str(e.value)
    assert f"log dir {str(gone)!r} is not visible on Spark worker" in msg
    assert "same host or a shared file system" in msg and "kafka.bootstrap.servers" in msg


def test_read_committed_in_files_mode(tmp_path: Path) -> None:
    """A partition written by tidelog's storage with a committed, an aborted and an open
    transaction: read_committed stops at the open one and skips the aborted records."""
    from tidelog.storage import LogConfig, PartitionLog

    log = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=400))

    def txn(pid: int, seq: int, values: list[bytes]) -> None:
        log.append(
            encode_batch(
                [NewRecord(None, v, (), 1_700_000_000_000) for v in values],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=seq,
                is_transactional=True,
            )
        )

    def end(pid: int, commit: bool) -> None:
        log.append_end_txn_marker(
            producer_id=pid, producer_epoch=0, coordinator_epoch=0, commit=commit
        )

    txn(1, 0, [b"c1", b"c2"])  # 0-1
    end(1, True)  # 2
    txn(2, 0, [b"a1"])  # 3
    end(2, False)  # 4
    log.append(encode_batch([NewRecord(None, b"plain", (), 1_700_000_000_000)]))  # 5
    txn(3, 0, [b"open"])  # 6, never ended
    log.append(encode_batch([NewRecord(None, b"after", (), 1_700_000_000_000)]))  # 7
    log.close()
    write_checkpoint(tmp_path / "replication-offset-checkpoint", {("t", 0): 8})
    everything = LogDir(tmp_path)
    assert everything.latest([("t", 0)]) == {("t", 0): 8}
    committed = LogDir(tmp_path, read_committed=True)
    assert committed.latest([("t", 0)]) == {("t", 0): 6}
    rows = _rows(committed.read(OffsetRange("t", 0, 0, 6)))
    assert [r[3] for r in rows] == [b"c1", b"c2", b"plain"]
    assert [r[3] for r in _rows(everything.read(OffsetRange("t", 0, 0, 8)))] == [
        b"c1", b"c2", b"a1", b"plain", b"open", b"after"
    ]  # fmt: skip
    opts = parse_options(
        {"path": str(tmp_path), "subscribe": "t", "kafka.isolation.level": "read_committed"}
    )
    assert dict(opts.kafka_config) == {"isolation.level": "read_committed"}
