"""Property tests of log compaction (Hypothesis, bounded): random keyed writes with tombstones.

After every cleaning pass, for the cleaned part ``[0, end offset)`` of the log:

* each key appears at most once, and that record is the latest write of the key below the end
  offset, at its original offset, with its value (no older value survives);
* each key's latest write overall that has a value is still readable at its original offset;
* a tombstone is present only while its delete horizon has not passed; after
  ``delete.retention.ms`` on the injected clock a further pass removes it and every older record
  of its key;
* a consumer reading from the start sees a valid log: offsets strictly increasing, every batch
  accepted (CRC included) by kafka-python's record parser, every record inside its batch's
  offset range;
* reopening the partition (clean or unclean) gives back the same bytes.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords

from tests.storage.storage_helpers import FakeClock
from tidelog.storage import LogConfig, LogManager, PartitionLog
from tidelog.storage.cleaner import CompactionConfig, LogCleaner
from tidelog.storage.record_codec import encode_batch, iter_batches
from tidelog.storage.record_types import DecodedBatch, NewRecord

RETENTION_MS = 10_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f", b"key-g" * 3, b""])
values = st.one_of(st.none(), st.binary(min_size=0, max_size=40))
records = st.lists(st.tuples(keys, values), min_size=1, max_size=6)
step = st.one_of(
    st.tuples(st.just("append"), records, st.sampled_from(CODECS), st.booleans()),
    st.tuples(st.just("clean"), st.integers(0, 3 * RETENTION_MS)),
    st.tuples(st.just("roll"), st.just(0)),
)


@dataclass(frozen=True, slots=True)
class Written:
    offset: int
    key: bytes
    value: bytes | None


def read_all(log: PartitionLog) -> bytes:
    return log.read(log.log_start_offset, 1 << 30, upper_bound=log.log_end_offset).read_bytes()


def check_consumer_view(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """kafka-python parses every batch; offsets strictly increase. Returns the records."""
    parsed = MemoryRecords(data)
    out: list[tuple[int, bytes | None, bytes | None]] = []
    last = -1
    batch = parsed.next_batch()
    while batch is not None:
        assert batch.validate_crc()
        base, last_offset = batch.base_offset, batch.base_offset + batch.last_offset_delta
        assert base > last
        for record in batch:
            assert base <= record.offset <= last_offset
            assert record.offset > last
            last = record.offset
            out.append((record.offset, record.key, record.value))
        last = last_offset
        batch = parsed.next_batch()
    assert parsed.valid_bytes() == len(data) if hasattr(parsed, "valid_bytes") else True
    ours = [
        (r.offset, r.key, r.value)
        for b in iter_batches(data)
        if isinstance(b, DecodedBatch)
        for r in b.records
    ]
    assert ours == out
    return out


def check_pass(
    history: list[Written],
    seen: list[tuple[int, bytes | None, bytes | None]],
    end: int,
    now: int,
    horizons: dict[int, int],
) -> None:
    latest_below: dict[bytes, Written] = {}
    latest: dict[bytes, Written] = {}
    for w in history:
        latest[w.key] = w
        if w.offset < end:
            latest_below[w.key] = w
    by_offset = {offset: (key, value) for offset, key, value in seen}
    cleaned_keys: dict[bytes | None, int] = {}
    for offset, key, value in seen:
        if offset >= end:
            continue
        assert key is not None
        assert key not in cleaned_keys, f"key {key!r} twice below {end}"
        cleaned_keys[key] = offset
        w = latest_below[key]
        assert (w.offset, w.value) == (offset, value), "an older value survived"
        if value is None:
            assert now < horizons.get(offset, now + 1), "tombstone outlived its horizon"
    for key, w in latest.items():
        if w.value is not None:
            assert by_offset.get(w.offset) == (key, w.value), f"latest of {key!r} lost"


def tombstone_horizons(data: bytes) -> dict[int, int]:
    out = {}
    for b in iter_batches(data):
        assert isinstance(b, DecodedBatch)
        if b.has_delete_horizon:
            for r in b.records:
                if r.value is None:
                    out[r.offset] = b.delete_horizon_ms
    return out


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(step, min_size=1, max_size=30), segment_bytes=st.sampled_from([300, 700]))
def test_compaction_keeps_latest_values(
    steps: list[tuple[object, ...]], segment_bytes: int
) -> None:
    root = Path(tempfile.mkdtemp(prefix="cleaner-prop-"))
    try:
        run_steps(root, steps, segment_bytes)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_steps(root: Path, steps: list[tuple[object, ...]], segment_bytes: int) -> None:
    clock = FakeClock()
    config = LogConfig(segment_bytes=segment_bytes, cleanup_policy="compact")
    manager = LogManager([root], default_config=config, clock=clock)
    manager.startup()
    log = manager.create_log("topic", 0, config, uuid.uuid4())
    cleaner = LogCleaner(
        manager,
        compaction_config=lambda _log: CompactionConfig(delete_retention_ms=RETENTION_MS),
        clock=clock,
    )
    history: list[Written] = []
    sequences = 0
    first_tombstone_end = -1
    for kind, *args in steps:
        if kind == "append":
            recs, codec, idempotent = args
            assert isinstance(recs, list)
            batch = encode_batch(
                [NewRecord(k, v, timestamp=clock.now_ms) for k, v in recs],
                compression=str(codec),
                producer_id=7 if idempotent else -1,
                producer_epoch=0 if idempotent else -1,
                base_sequence=sequences if idempotent else -1,
            )
            if idempotent:
                sequences += len(recs)
            info = log.append(batch)
            history += [Written(info.first_offset + i, k, v) for i, (k, v) in enumerate(recs)]
            clock.advance(7)
        elif kind == "roll":
            log.roll()
        else:
            clock.advance(int(args[0]))  # type: ignore[call-overload]
            clean_and_check(cleaner, log, history, clock)
    log.roll()
    end = clean_and_check(cleaner, log, history, clock)
    data = read_all(log)
    if any(w.value is None for w in history if w.offset < end):
        first_tombstone_end = end
    clock.advance(RETENTION_MS + 1)
    clean_and_check(cleaner, log, history, clock)
    data = read_all(log)
    seen = check_consumer_view(data)
    if first_tombstone_end >= 0:
        assert not [s for s in seen if s[2] is None and s[0] < first_tombstone_end]
    # reopen: clean shutdown, then an unclean one (no marker, recovery from 0)
    manager.shutdown()
    again = LogManager([root], default_config=config, clock=clock)
    again.startup()
    reopened = again.get_log("topic", 0)
    assert reopened is not None
    assert read_all(reopened) == data
    for p in list(reopened.dir.iterdir()):
        assert not p.name.endswith((".cleaned", ".swap")), p
    again.shutdown()
    (root / ".kafka_cleanshutdown").unlink()
    (root / "recovery-point-offset-checkpoint").unlink()
    crashed = LogManager([root], default_config=config, clock=clock)
    crashed.startup()
    recovered = crashed.get_log("topic", 0)
    assert recovered is not None and read_all(recovered) == data
    crashed.shutdown()


def clean_and_check(
    cleaner: LogCleaner, log: PartitionLog, history: list[Written], clock: FakeClock
) -> int:
    result = cleaner.clean_log(log)
    assert result is not None
    data = read_all(log)
    seen = check_consumer_view(data)
    check_pass(history, seen, result.end_offset, clock.now_ms, tombstone_horizons(data))
    assert result.end_offset <= log.segments()[-1].base_offset
    return result.end_offset
