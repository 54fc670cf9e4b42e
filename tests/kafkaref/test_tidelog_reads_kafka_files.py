"""tidelog reads Kafka's files: a log dir written by Apache Kafka 4.4 (plain, every codec,
idempotent, transactional with an abort, compacted with tombstones, records deleted) is read by
``tidelog dump-log`` (line for line what Kafka's own DumpLogSegments prints) and by the Spark file
source's reader (``analytics.logdir.LogDir``) with the records Kafka's consumer returns, at
read_committed and read_uncommitted.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.jvm import jvm_set_classpath
from tests.support.kafka_reference import KafkaProcess, log4j_config, run_java
from tests.support.sample_logs import consume_all, tidelog_dump_log, write_sample
from tidelog.analytics.logdir import LogDir, LogDirError, read_checkpoint
from tidelog.analytics.plan import OffsetRange

pytestmark = pytest.mark.integration

Rows = list[tuple[int, bytes | None, bytes | None]]


class KafkaLogs:
    def __init__(
        self, root: Path, topics: list[str], committed: dict[str, Rows], all_: dict[str, Rows]
    ) -> None:
        self.root = root
        self.topics = topics
        self.committed = committed
        self.uncommitted = all_


CHECKPOINTS = ("replication-offset-checkpoint", "log-start-offset-checkpoint")


def _copy_checkpoints(log_dir: Path, copy: Path, topics: list[str], ends: dict[str, int]) -> bool:
    """Copy Kafka's checkpoint files; whether they cover the sample yet (HW at each end, the
    deleted records' log start 3)."""
    for name in CHECKPOINTS:
        shutil.copy(log_dir / name, copy / name)
    try:
        hw = read_checkpoint(copy / CHECKPOINTS[0])
        start = read_checkpoint(copy / CHECKPOINTS[1])
    except LogDirError:  # caught between Kafka's writes
        return False
    return all(hw.get((t, 0)) == ends[t] for t in topics) and start.get((topics[-1], 0)) == 3


@pytest.fixture(scope="module")
def kafka_logs(
    kafka_broker: KafkaProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaLogs]:
    topics = write_sample(kafka_broker.bootstrap, "kt")
    assert topics[-1] == "kt-deleted"
    committed = {t: consume_all(kafka_broker.bootstrap, t) for t in topics}
    everything = {t: consume_all(kafka_broker.bootstrap, t, committed=False) for t in topics}
    ends = {t: _end_offset(kafka_broker.log_dir / f"{t}-0") for t in topics}
    copy = tmp_path_factory.mktemp("kafka_files") / "data"
    copy.mkdir()
    for t in topics:
        shutil.copytree(kafka_broker.log_dir / f"{t}-0", copy / f"{t}-0")
    deadline = time.monotonic() + 30
    while not _copy_checkpoints(kafka_broker.log_dir, copy, topics, ends):
        assert time.monotonic() < deadline, f"Kafka never checkpointed the sample: {ends}"
        time.sleep(0.3)
    yield KafkaLogs(copy, topics, committed, everything)


def _end_offset(partition_dir: Path) -> int:
    """The log end offset, from the last batch header (offset i64, size i32, ..., last offset
    delta at byte 23) of the newest segment."""
    segment = sorted(partition_dir.glob("*.log"))[-1]
    data = segment.read_bytes()
    pos, end = 0, int(segment.stem)
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big")
        if size <= 0 or pos + 12 + size > len(data):
            break
        base = int.from_bytes(data[pos : pos + 8], "big")
        end = base + int.from_bytes(data[pos + 23 : pos + 27], "big", signed=True) + 1
        pos += 12 + size
    return end


def test_dump_log_prints_what_kafka_prints(kafka_logs: KafkaLogs) -> None:
    files = ",".join(
        str(f)
        for t in kafka_logs.topics
        for f in sorted((kafka_logs.root / f"{t}-0").iterdir())
        if f.suffix in (".log", ".index", ".timeindex", ".snapshot", ".txnindex")
    )
    args = ("--deep-iteration", "--print-data-log", "--files", files)
    kafka = run_java(
        jvm_set_classpath("kafka"),
        "org.apache.kafka.tools.DumpLogSegments",
        *args,
        log4j=log4j_config(kafka_logs.root.parent),
    )
    ours = tidelog_dump_log(*args)
    theirs, mine = _sections(kafka.stdout), _sections(ours.stdout)
    assert list(mine) == list(theirs)
    for path, lines in mine.items():
        if lines == [f"{path} is empty."] and path.endswith("index"):
            # Kafka divergence: Kafka's dumper reads the zero-filled preallocated index of a live
            # active segment as one entry (and reports it as a mismatch on stderr); tidelog
            # dump-log, like Kafka's broker when it loads the index, sees no entries.
            assert theirs[path] in (["offset: 0 position: 0"], ["timestamp: 0 offset: 0"])
        else:
            assert lines == theirs[path], path
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        assert f"compresscodec: {codec}" in ours.stdout
    assert "endTxnMarker: ABORT" in ours.stdout


def _sections(text: str) -> dict[str, list[str]]:
    """A dump's lines by the file they belong to (``Dumping <path>`` starts a section)."""
    out: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("Dumping "):
            current = out.setdefault(line.removeprefix("Dumping "), [])
        else:
            current.append(line)
    return out


def _read(root: Path, topic: str, *, committed: bool) -> Rows:
    ld = LogDir(root, read_committed=committed)
    tp = (topic, 0)
    start, end = ld.earliest([tp])[tp], ld.latest([tp])[tp]
    rows: Rows = []
    for cols in ld.read(OffsetRange(topic, 0, start, end)):
        rows += list(zip(cols.offsets, cols.keys, cols.values, strict=True))
    return rows


@pytest.mark.parametrize("committed", [True, False], ids=["read_committed", "read_uncommitted"])
def test_file_source_reads_what_the_consumer_returns(
    kafka_logs: KafkaLogs, committed: bool
) -> None:
    want = kafka_logs.committed if committed else kafka_logs.uncommitted
    for topic in kafka_logs.topics:
        assert _read(kafka_logs.root, topic, committed=committed) == want[topic], topic
    assert [o for o, _, _ in want["kt-deleted"]] == list(range(3, 10))
    assert len(kafka_logs.uncommitted["kt-txn"]) == len(kafka_logs.committed["kt-txn"]) + 3


@pytest.mark.spark
@pytest.mark.parametrize("committed", [True, False], ids=["read_committed", "read_uncommitted"])
def test_spark_file_source_reads_what_the_consumer_returns(
    spark: Any, kafka_logs: KafkaLogs, committed: bool
) -> None:
    """The same through Spark: ``spark.read.format("tidelog").option("path", <Kafka's dir>)``."""
    level = "read_committed" if committed else "read_uncommitted"
    df = (
        spark.read.format("tidelog")
        .option("path", str(kafka_logs.root))
        .option("subscribe", ",".join(kafka_logs.topics))
        .option("kafka.isolation.level", level)
        .load()
    )
    got: dict[str, Rows] = {t: [] for t in kafka_logs.topics}
    for row in df.select("topic", "offset", "key", "value").collect():
        key = None if row.key is None else bytes(row.key)
        value = None if row.value is None else bytes(row.value)
        got[row.topic].append((row.offset, key, value))
    want = kafka_logs.committed if committed else kafka_logs.uncommitted
    assert {t: sorted(rows) for t, rows in got.items()} == want
