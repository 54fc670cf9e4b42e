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

import random
import shutil
import struct
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from tests.crash.crash_workload import Ledger, Position, digest
from tidelog.storage.batch import iter_batches
from tidelog.storage.config import LogConfig
from tidelog.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, LogSegment
from tidelog.storage.segment_recovery import recover

__all__ = (
    "Findings",
    "IndexCheck",
    "PartitionRead",
    "check_indexes",
    "committed_offsets",
    "compare",
    "probe_lookups",
    "read_back",
)


@dataclass
class PartitionRead:
    low: int
    high: int
    #: offset -> (key, digest of key, value and headers, timestamp)
    records: dict[int, tuple[bytes, bytes, int]] = field(default_factory=dict)
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
                    message.timestamp()[1],
                )
                if offset + 1 >= read.high:
                    pending.discard(key)
        for key in pending:
            reads[key].problems.append(f"{key}: read did not reach the high watermark in time")
        for (topic, partition), read in reads.items():
            if read.records and min(read.records) > read.low:
                # Retention moved the log start while we read (the consumer was reset to it):
                # what is below the first record read is retained away if that is the start now.
                low, _ = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=15, cached=False
                )
                if min(read.records) == low:
                    read.low = low
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
        for offset, (key, _, _) in read.records.items():
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
        result = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=15)
        return {(tp.topic, tp.partition): tp.offset for tp in result}
    finally:
        consumer.close()


# --------------------------------------------------------------------------- indexes

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


@dataclass
class IndexCheck:
    segments: int = 0
    #: Time-index entries beyond a rebuild's: each start-up's recovery adds a final entry to the
    #: segment it recovers (Kafka's LogSegment.recover does the same); once that segment gets
    #: more batches, the entry stays in its middle. Valid (a real running maximum), not rebuilt.
    recovery_time_entries: int = 0
    problems: list[str] = field(default_factory=list)
    #: Segment -> (size, mtime) of its three files when last found right: unchanged files are
    #: not checked again (a long run has thousands of sealed segments).
    seen: dict[Path, tuple[tuple[int, int], ...]] = field(default_factory=dict)


def check_indexes(
    log_dir: Path,
    topics: Iterable[str],
    index_interval_bytes: int,
    *,
    include_active: bool,
    into: IndexCheck,
) -> None:
    """Compare segments' index files with a rebuild by storage's own recovery.

    ``include_active=False`` skips each partition's last segment: while a broker runs (or
    after it was killed), the active segment's index entries live in memory and are written
    when it rolls; recovery rebuilds it from the log after any crash. ``include_active=True``
    is for a broker stopped cleanly, which trims every index file. The rebuild runs
    ``segment_recovery.recover`` on a copy of the ``.log`` (which must need no cut). The offset
    index must equal the rebuild; the time index must hold the rebuild's entries plus, at most,
    entries that are a real running maximum (see ``IndexCheck.recovery_time_entries``).
    Segments that retention renames while we look are skipped.
    """
    config = LogConfig(index_interval_bytes=index_interval_bytes)
    wanted = set(topics)
    with tempfile.TemporaryDirectory(prefix="index-rebuild-") as scratch:
        for part_dir in sorted(log_dir.iterdir()):
            topic, _, partition = part_dir.name.rpartition("-")
            if topic not in wanted or not part_dir.is_dir() or not partition.isdigit():
                continue
            logs = sorted(part_dir.glob(f"*{LOG_SUFFIX}"))
            for log_path in logs if include_active else logs[:-1]:
                try:
                    signature = tuple(
                        (st.st_size, st.st_mtime_ns)
                        for st in (
                            p.stat()
                            for p in (
                                log_path,
                                log_path.with_suffix(INDEX_SUFFIX),
                                log_path.with_suffix(TIMEINDEX_SUFFIX),
                            )
                        )
                    )
                except FileNotFoundError:
                    signature = ()
                if signature and into.seen.get(log_path) == signature:
                    continue
                problems_before = len(into.problems)
                base = int(log_path.name[: -len(LOG_SUFFIX)])
                copy_dir = Path(scratch) / f"{part_dir.name}-{base}"
                copy_dir.mkdir()
                try:
                    shutil.copyfile(log_path, copy_dir / log_path.name)
                    index_bytes = log_path.with_suffix(INDEX_SUFFIX).read_bytes()
                    time_bytes = log_path.with_suffix(TIMEINDEX_SUFFIX).read_bytes()
                except FileNotFoundError:
                    if not log_path.exists():
                        continue  # deleted by retention meanwhile
                    into.problems.append(f"{log_path}: index file missing")
                    continue
                _compare_segment(copy_dir, base, config, log_path, index_bytes, time_bytes, into)
                into.segments += 1
                shutil.rmtree(copy_dir)
                if signature and len(into.problems) == problems_before:
                    into.seen[log_path] = signature


def _running_maxima(log_bytes: bytes, base: int) -> set[tuple[int, int]]:
    """Every (max timestamp so far, its offset) pair a batch boundary of the log has."""
    pairs = set()
    max_ts, offset_of_max = -1, base
    for _, header in iter_batches(log_bytes):
        if header.max_timestamp > max_ts:
            max_ts, offset_of_max = header.max_timestamp, header.last_offset
        pairs.add((max_ts, offset_of_max))
    return pairs


def _entries(data: bytes, entry: struct.Struct, base: int, time: bool) -> list[tuple[int, int]]:
    out = []
    for a, b in entry.iter_unpack(data[: len(data) - len(data) % entry.size]):
        out.append((a, base + b) if time else (base + a, b))
    return out


def _compare_segment(
    copy_dir: Path,
    base: int,
    config: LogConfig,
    origin: Path,
    index_bytes: bytes,
    time_bytes: bytes,
    into: IndexCheck,
) -> None:
    segment = LogSegment(copy_dir, base, config, now_ms=0)
    try:
        cut = recover(segment, config.index_interval_bytes)
        offsets = segment.offset_index.all_entries()
        times = segment.time_index.all_entries()
    finally:
        segment.close()
    log_bytes = (copy_dir / origin.name).read_bytes()
    if cut:
        into.problems.append(f"{origin}: a recovery of a copy would cut {cut} bytes")
    # Inactive segments (and all of them after a clean shutdown) have trimmed index files.
    want_index = b"".join(_OFFSET_ENTRY.pack(o - base, p) for o, p in offsets)
    if index_bytes != want_index:
        into.problems.append(
            f"{origin}: offset index {_entries(index_bytes, _OFFSET_ENTRY, base, False)[:8]}... "
            f"({len(index_bytes)} bytes) differs from a rebuild {offsets[:8]}..."
        )
    on_disk = _entries(time_bytes, _TIME_ENTRY, base, True)
    valid = _running_maxima(log_bytes, base)
    stamps = [t for t, _ in on_disk]
    problem = None
    if len(time_bytes) % _TIME_ENTRY.size:
        problem = f"size {len(time_bytes)} is not a multiple of {_TIME_ENTRY.size}"
    elif stamps != sorted(set(stamps)):
        problem = "timestamps do not strictly increase"
    elif not set(times) <= set(on_disk):
        problem = f"rebuilt entries {sorted(set(times) - set(on_disk))[:5]} are missing"
    elif not set(on_disk) <= valid:
        problem = f"entries {sorted(set(on_disk) - valid)[:5]} are no running maximum of the log"
    elif times and on_disk[-1] != times[-1]:
        problem = f"last entry {on_disk[-1]} is not the segment's maximum {times[-1]}"
    if problem:
        into.problems.append(f"{origin}: time index: {problem} (on disk {on_disk[:8]}...)")
    into.recovery_time_entries += len(on_disk) - len(times)


# --------------------------------------------------------------------------- look-ups


def probe_lookups(
    bootstrap: str,
    reads: Mapping[tuple[str, int], PartitionRead],
    rng: random.Random,
    samples: int,
) -> tuple[int, list[str]]:
    """Fetch from random offsets and look offsets up by random timestamps (the broker's
    in-memory indexes, active segment included); returns (look-ups done, problems)."""
    consumer = _consumer(bootstrap)
    problems: list[str] = []
    done = 0
    try:
        for _ in range(samples):
            chosen = {
                key: rng.randrange(read.low, read.high)
                for key, read in reads.items()
                if read.high > read.low
            }
            if not chosen:
                break
            consumer.assign([TopicPartition(t, p, o) for (t, p), o in chosen.items()])
            waiting = dict(chosen)
            deadline = time.monotonic() + 15
            while waiting and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=100, timeout=0.5):
                    key = (message.topic(), message.partition())
                    if message.error() is not None or key not in waiting:
                        continue
                    want = waiting.pop(key)
                    done += 1
                    if message.offset() != want:
                        problems.append(f"{key}: fetch at {want} began at {message.offset()}")
            problems.extend(f"{key}: no answer to a fetch at {o}" for key, o in waiting.items())
            # ListOffsets by timestamp: the first offset whose timestamp is >= the target.
            queries = []
            expected = {}
            for key, read in reads.items():
                if not read.records:
                    continue
                target = rng.choice([r[2] for r in read.records.values()]) + rng.choice((0, 1))
                later = [o for o, r in read.records.items() if r[2] >= target]
                expected[key] = min(later) if later else -1
                queries.append(TopicPartition(key[0], key[1], target))
            for tp in consumer.offsets_for_times(queries, timeout=15):
                key = (tp.topic, tp.partition)
                done += 1
                if tp.offset != expected[key] and not (expected[key] == -1 and tp.offset < 0):
                    problems.append(f"{key}: offset for timestamp {tp.offset}, not {expected[key]}")
        return done, problems
    finally:
        consumer.close()
