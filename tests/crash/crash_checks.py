"""Checks run on a quiet broker after a crash: the log, the indexes, the committed offsets.

- ``read_back``: every partition read from its log start to its high watermark with librdkafka
  (``check.crcs=true``), offsets checked to be contiguous.
- ``compare``: each acknowledged record is at its acknowledged offset with the same key, value
  and headers; no key appears twice; what the group consumer was handed is still there.
- ``check_indexes``: each segment's ``.index`` / ``.timeindex`` file equals a rebuild that
  storage's own recovery computes from a copy of the ``.log`` file (which must need no cut).
- ``committed_offsets``: the group's committed offsets, through OffsetFetch.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from crash_workload import Ledger, Position, digest

from storage.config import LogConfig
from storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, LogSegment

__all__ = (
    "Findings",
    "PartitionRead",
    "check_indexes",
    "committed_offsets",
    "compare",
    "read_back",
)


@dataclass
class PartitionRead:
    low: int
    high: int
    records: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)  # offset -> key, digest
    problems: list[str] = field(default_factory=list)


@dataclass
class Findings:
    """What one check found; every list must stay empty."""

    acked_checked: int = 0
    retained_away: int = 0  # acknowledged, then deleted by retention (below the log start)
    lost: list[Position] = field(default_factory=list)
    changed: list[Position] = field(default_factory=list)
    duplicates: list[bytes] = field(default_factory=list)
    consumed_gone: list[Position] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.changed or self.duplicates or self.consumed_gone or self.problems
        )


def _consumer(bootstrap: str, group: str = "chaos-verify") -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": 20,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )


def read_back(
    bootstrap: str, partitions: Iterable[tuple[str, int]], timeout: float = 60.0
) -> dict[tuple[str, int], PartitionRead]:
    """Read each partition from its log start to its high watermark."""
    consumer = _consumer(bootstrap)
    try:
        reads: dict[tuple[str, int], PartitionRead] = {}
        assignment = []
        for topic, partition in partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=15, cached=False
            )
            reads[(topic, partition)] = PartitionRead(low, high)
            if high > low:
                assignment.append(TopicPartition(topic, partition, OFFSET_BEGINNING))
        pending = {(tp.topic, tp.partition) for tp in assignment}
        expected_next: dict[tuple[str, int], int | None] = dict.fromkeys(pending)
        if assignment:
            consumer.assign(assignment)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=5000, timeout=0.5):
                key = (message.topic(), message.partition())
                read = reads[key]
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        read.problems.append(f"{key}: consumer error {error}")
                        pending.discard(key)
                    continue
                offset = message.offset()
                want = expected_next[key]
                if want is not None and offset != want:
                    read.problems.append(f"{key}: offset {offset} follows {want - 1}")
                expected_next[key] = offset + 1
                read.records[offset] = (
                    message.key(),
                    digest(message.key(), message.value(), message.headers()),
                )
                if offset + 1 >= read.high:
                    pending.discard(key)
        for key in pending:
            reads[key].problems.append(f"{key}: read did not reach the high watermark in time")
        return reads
    finally:
        consumer.close()


def compare(
    ledger: Ledger,
    reads: Mapping[tuple[str, int], PartitionRead],
    *,
    retention_topics: frozenset[str] = frozenset(),
) -> Findings:
    """Everything the clients were told against what the broker now serves."""
    found = Findings()
    keys_seen: dict[bytes, Position] = {}
    for (topic, partition), read in reads.items():
        found.problems.extend(read.problems)
        offsets = sorted(read.records)
        if offsets:
            # Contiguous from the log start (retention deletes whole segments: the first batch
            # starts at the log start offset) to the high watermark.
            if offsets[0] != read.low:
                found.problems.append(
                    f"{topic}-{partition}: first offset {offsets[0]}, log start {read.low}"
                )
            if offsets[-1] != read.high - 1 or len(offsets) != read.high - offsets[0]:
                found.problems.append(
                    f"{topic}-{partition}: {len(offsets)} records in [{offsets[0]}, {read.high})"
                )
        elif read.high > read.low:
            found.problems.append(f"{topic}-{partition}: nothing read in [{read.low}, {read.high})")
        if topic not in retention_topics and read.low != 0:
            found.problems.append(f"{topic}-{partition}: log start {read.low} without retention")
        for offset, (key, _) in read.records.items():
            where = keys_seen.get(key)
            if where is not None:
                found.duplicates.append(key)
            keys_seen[key] = (topic, partition, offset)
    with ledger.lock:
        acked = dict(ledger.acked)
        consumed = dict(ledger.consumed)
    for position, record_digest in acked.items():
        topic, partition, offset = position
        read = reads.get((topic, partition))
        if read is None:
            continue
        found.acked_checked += 1
        if offset < read.low and topic in retention_topics:
            found.retained_away += 1
            continue
        got = read.records.get(offset)
        if got is None:
            found.lost.append(position)
        elif got[1] != record_digest:
            found.changed.append(position)
    for position, record_digest in consumed.items():
        topic, partition, offset = position
        read = reads.get((topic, partition))
        if read is None or offset < read.low:
            continue
        got = read.records.get(offset)
        if got is None or got[1] != record_digest:
            found.consumed_gone.append(position)
    return found


def committed_offsets(
    bootstrap: str, group: str, partitions: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """The group's committed offset per partition (-1001 when none), via OffsetFetch."""
    consumer = _consumer(bootstrap, group)
    try:
        result = consumer.committed(
            [TopicPartition(t, p) for t, p in partitions], timeout=15
        )
        return {(tp.topic, tp.partition): tp.offset for tp in result}
    finally:
        consumer.close()


# --------------------------------------------------------------------------- indexes


def check_indexes(
    log_dir: Path, topics: Iterable[str], index_interval_bytes: int
) -> tuple[int, list[str]]:
    """Compare every segment's index files with a rebuild; returns (segments checked, problems).

    The rebuild runs storage's recovery (``LogSegment.recover``) on a copy of the ``.log``.
    Segments that retention renames while we look are skipped.
    """
    problems: list[str] = []
    checked = 0
    config = LogConfig(index_interval_bytes=index_interval_bytes)
    topics = set(topics)
    with tempfile.TemporaryDirectory(prefix="index-rebuild-") as scratch:
        for part_dir in sorted(log_dir.iterdir()):
            topic, _, partition = part_dir.name.rpartition("-")
            if topic not in topics or not part_dir.is_dir() or not partition.isdigit():
                continue
            for log_path in sorted(part_dir.glob(f"*{LOG_SUFFIX}")):
                base = int(log_path.name[: -len(LOG_SUFFIX)])
                copy_dir = Path(scratch) / f"{part_dir.name}-{base}"
                copy_dir.mkdir()
                try:
                    shutil.copyfile(log_path, copy_dir / log_path.name)
                    index_path = log_path.with_suffix(INDEX_SUFFIX)
                    time_path = log_path.with_suffix(TIMEINDEX_SUFFIX)
                    index_bytes = index_path.read_bytes()
                    time_bytes = time_path.read_bytes()
                except FileNotFoundError:
                    if not log_path.exists():
                        continue  # deleted by retention meanwhile
                    raise
                (copy_dir / index_path.name).write_bytes(index_bytes)
                (copy_dir / time_path.name).write_bytes(time_bytes)
                problems.extend(_compare_segment(copy_dir, base, config, log_path))
                checked += 1
                shutil.rmtree(copy_dir)
    return checked, problems


def _compare_segment(copy_dir: Path, base: int, config: LogConfig, origin: Path) -> list[str]:
    on_disk_index = (copy_dir / f"{base:020d}{INDEX_SUFFIX}").read_bytes()
    on_disk_time = (copy_dir / f"{base:020d}{TIMEINDEX_SUFFIX}").read_bytes()
    # The rebuild gets its own index files (recover() rewrites them).
    for suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX):
        (copy_dir / f"{base:020d}{suffix}").unlink()
    segment = LogSegment(copy_dir, base, config, now_ms=0)
    try:
        cut = segment.recover(config.index_interval_bytes)
        offsets = segment.offset_index.all_entries()
        times = segment.time_index.all_entries()
    finally:
        segment.close()
    problems = []
    if cut:
        problems.append(f"{origin}: recovery of a copy would cut {cut} bytes")
    want_index = b"".join(struct.pack(">ii", o - base, p) for o, p in offsets)
    want_time = b"".join(struct.pack(">qi", t, o - base) for t, o in times)
    for name, got, want in (
        ("index", on_disk_index, want_index),
        ("timeindex", on_disk_time, want_time),
    ):
        if got[: len(want)] != want or got[len(want) :].strip(b"\x00"):
            problems.append(
                f"{origin}: {name} differs from a rebuild ({len(got)} bytes on disk, "
                f"{len(want)} expected, first difference at byte "
                f"{next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))})"
            )
    return problems
