"""Hypothesis: random appends, rolls and reopens (clean and unclean) read back identically."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords

from tests.storage.batches import Rec, build_batch
from tests.storage.storage_helpers import expected_indexes
from tidelog.storage import LogConfig, PartitionLog

record = st.builds(
    Rec,
    key=st.one_of(st.none(), st.binary(max_size=8)),
    value=st.one_of(st.none(), st.binary(max_size=300)),
    timestamp=st.integers(min_value=0, max_value=10_000),
)
batch = st.tuples(st.lists(record, min_size=1, max_size=5), st.sampled_from([0, 0, 1]))
operation = st.one_of(
    st.tuples(st.just("append"), st.lists(batch, min_size=1, max_size=3)),
    st.tuples(st.just("roll"), st.none()),
    st.tuples(st.just("reopen_clean"), st.none()),
    st.tuples(st.just("reopen_unclean"), st.booleans()),
)


def _decode(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        b = records.next_batch()
        assert b.validate_crc()
        out.extend((r.offset, r.timestamp, r.key, r.value) for r in b)
    return out


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    ops=st.lists(operation, min_size=1, max_size=12),
    segment_bytes=st.integers(min_value=700, max_value=4000),
    interval=st.sampled_from([0, 100, 1000]),
)
def test_random_operations_round_trip(
    ops: list[tuple[str, object]], segment_bytes: int, interval: int
) -> None:
    config = LogConfig(
        segment_bytes=segment_bytes, index_interval_bytes=interval, segment_index_bytes=4096
    )
    root = Path(tempfile.mkdtemp())
    try:
        directory = root / "p-0"
        log = PartitionLog(directory, config)
        expected: list[tuple[int, int, bytes | None, bytes | None]] = []
        batch_starts: dict[int, int] = {}  # offset -> base offset of its batch
        for name, arg in ops:
            if name == "append":
                assert isinstance(arg, list)
                data = b"".join(build_batch(recs, compression=c) for recs, c in arg)
                info = log.append(data)
                offset = info.first_offset
                for recs, _ in arg:
                    for i, r in enumerate(recs):
                        expected.append((offset + i, r.timestamp, r.key, r.value))
                        batch_starts[offset + i] = offset
                    offset += len(recs)
                assert info.last_offset == offset - 1
            elif name == "roll":
                log.roll()
            elif name == "reopen_clean":
                log.close()
                log = PartitionLog(directory, config, clean_shutdown=True)
            else:
                recovery_point = log.recovery_point if arg else 0
                log.close_without_flush()  # a crash: untrimmed indexes, no final entries
                log = PartitionLog(directory, config, recovery_point=recovery_point)
        assert log.log_end_offset == len(expected)
        assert log.high_watermark == log.log_end_offset
        got = _decode(log.read(0, 1 << 24).read_bytes()) if expected else []
        assert got == expected
        for offset in range(len(expected)):
            info = log.read(offset, 1)
            assert info.first_offset == batch_starts[offset]
        for segment in log.segments()[:-1]:
            offsets, _ = expected_indexes(
                segment.log_path.read_bytes(), segment.base_offset, interval
            )
            assert segment.offset_index.all_entries() == offsets
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.lists(record, min_size=1, max_size=4), min_size=1, max_size=15),
    target=st.integers(min_value=-1, max_value=10_001),
)
def test_offset_for_timestamp_matches_scan(batches: list[list[Rec]], target: int) -> None:
    config = LogConfig(segment_bytes=1500, index_interval_bytes=200)
    root = Path(tempfile.mkdtemp())
    try:
        log = PartitionLog(root / "p-0", config)
        expected: list[tuple[int, int]] = []
        for recs in batches:
            info = log.append(build_batch(recs))
            expected.extend((info.first_offset + i, r.timestamp) for i, r in enumerate(recs))
        # Kafka semantics: the first batch (in offset order) whose max timestamp reaches the
        # target, then its first record at or after the target.
        want = None
        offset = 0
        for recs in batches:
            if max(r.timestamp for r in recs) >= target:
                for i, r in enumerate(recs):
                    if r.timestamp >= target:
                        want = (offset + i, r.timestamp)
                        break
                break
            offset += len(recs)
        # Segments are searched by their max timestamp first, which gives the same answer.
        assert log.offset_for_timestamp(target) == want
        top = max(t for _, t in expected)
        assert log.offset_of_max_timestamp() == next((o, t) for o, t in expected if t == top)
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
