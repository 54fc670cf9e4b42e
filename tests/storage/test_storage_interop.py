"""Interop with kafka-python's record-batch code: it builds what we store, it parses our files."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from tidelog.storage import LogConfig, PartitionLog

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _kafka_python_batch(codec: int, start: int, count: int) -> tuple[bytes, list[tuple]]:  # type: ignore[type-arg]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    expected = []
    for i in range(count):
        key = f"key-{start + i}".encode()
        value = (f"value-{start + i}-" * (i % 7 + 1)).encode()
        headers = [("h", f"{i}".encode())] if i % 2 else []
        timestamp = 1_700_000_000_000 + start + i
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=headers)
        expected.append((timestamp, key, value, headers))
    return bytes(builder.build()), expected


def _decode(data: bytes) -> list[tuple]:  # type: ignore[type-arg]
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return out


@pytest.mark.parametrize("codec", list(CODECS))
def test_kafka_python_batches_round_trip(log_dir: Path, codec: str) -> None:
    from kafka import codec as kafka_codecs

    if codec == "snappy" and not kafka_codecs.has_snappy():
        pytest.skip("kafka-python has no snappy library here")
    log = PartitionLog(log_dir, LogConfig(segment_bytes=4000, index_interval_bytes=500))
    expected = []
    offset = 0
    for n in range(12):
        data, records = _kafka_python_batch(CODECS[codec], offset, n % 5 + 1)
        info = log.append(data)
        assert info.first_offset == offset
        for i, (ts, key, value, headers) in enumerate(records):
            expected.append((offset + i, ts, key, value, headers))
        offset += len(records)
    assert _decode(log.read(0, 1 << 24).read_bytes()) == expected
    # the segment files themselves parse with kafka-python, record by record
    from_files = []
    for segment in log.segments():
        from_files.extend(_decode(segment.log_path.read_bytes()))
    assert from_files == expected
    # timestamp look-ups decode compressed batches
    assert log.offset_for_timestamp(expected[7][1]) == (expected[7][0], expected[7][1])
    assert log.offset_of_max_timestamp() == (expected[-1][0], expected[-1][1])
    log.close()
