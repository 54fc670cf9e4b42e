"""Disk damage found at start-up: the broker repairs only the damaged tail and serves the rest.

A template log dir is written once by a real broker (one topic per kind of damage, 40 batches
of 3 records each over 4 KiB segments), in two states: after a SIGKILL (unclean) and after a
clean shutdown. Each scenario copies one state, damages every topic its own way (and maybe the
offset checkpoints), starts a broker on it and checks, with exact Fetch frames whose every
batch is CRC-checked and decoded by kafka-python and with librdkafka:

- a torn tail (random bytes cut), a garbage tail, flipped bits in the last batch: the broker
  starts, cuts exactly the damaged bytes (and logs it), serves every batch before them, and
  the next produce continues at the cut;
- garbage, missing or zeroed indexes: rebuilt; every batch served; look-ups by offset and by
  timestamp right; after a clean restart the index files equal a rebuild;
- damage in an older segment (below the recovery point): that batch is answered with
  CORRUPT_MESSAGE / KAFKA_STORAGE_ERROR, never served as data, and later segments still serve;
- stray ``.deleted`` / ``.cleaned`` files: removed, data intact;
- garbage or missing checkpoint files: the broker starts and serves everything.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.crash.crash_checks import IndexCheck, check_indexes
from tests.support.broker_process import BrokerProcess
from tests.support.checkpoints import wait_for_checkpoint
from tests.support.fault_wire import (
    CORRUPT_MESSAGE,
    KAFKA_STORAGE_ERROR,
    PartitionView,
    batch_timestamp,
    create_topic,
    expected_values,
    fetch_once,
    produce,
    read_partition,
)
from tests.support.kafka_wire import WireClient
from tidelog.storage.batch import iter_batches
from tidelog.storage.checkpoint import RECOVERY_POINT_CHECKPOINT

SETTINGS = {
    "log.segment.bytes": "4096",
    "log.index.interval.bytes": "256",
    "log.flush.interval.messages": "1",
    "log.flush.offset.checkpoint.interval.ms": "100",
    "auto.create.topics.enable": "false",
}
INDEX_INTERVAL = 256
BATCHES = 40
RECORDS = 3
TAIL_CASES = ("torn-tail", "garbage-tail", "flip-last")
INDEX_CASES = ("garbage-index", "missing-index", "zero-timeindex", "untrimmed-index")
OLD_CASES = ("old-payload", "old-header")
STRAY_CASES = ("stray-deleted", "stray-cleaned")
CASES = TAIL_CASES + INDEX_CASES + OLD_CASES + STRAY_CASES
CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
)
SCENARIOS = (
    ("unclean", "intact"),
    ("clean", "intact"),
    ("unclean", "missing"),
    ("clean", "garbage"),
)


def _segments(part_dir: Path) -> list[Path]:
    return sorted(part_dir.glob("*.log"))


def _batches(path: Path) -> list[tuple[int, int]]:
    """(position, size) of each batch of a segment file."""
    return [(pos, h.size_in_bytes) for pos, h in iter_batches(path.read_bytes())]


def _global_index(part_dir: Path, segment: Path, local: int) -> int:
    """Index (from 0) of a segment's ``local``-th batch among all batches of the partition."""
    before = sum(len(_batches(s)) for s in _segments(part_dir) if s < segment)
    return before + local


def _flip(path: Path, positions: list[int], rng: random.Random) -> None:
    data = bytearray(path.read_bytes())
    for p in positions:
        data[p] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


# Each damage returns the index of the first batch that may not be served as data (None: all).
Damage = Callable[[Path, random.Random], "int | None"]


def _torn_tail(part: Path, rng: random.Random) -> int | None:
    last = _segments(part)[-1]
    spans = _batches(last)
    size = last.stat().st_size
    keep = rng.randrange(max(spans[-1][0] - spans[-1][1], 1), size)  # cut 1 B .. ~2 batches
    if any(pos == keep for pos, _ in spans):
        keep += 1  # inside a batch: a cut at a boundary leaves nothing to repair
    with open(last, "r+b") as f:
        f.truncate(keep)
    first_cut = next(i for i, (pos, n) in enumerate(spans) if pos + n > keep)
    return _global_index(part, last, first_cut)


def _garbage_tail(part: Path, rng: random.Random) -> int | None:
    with open(_segments(part)[-1], "ab") as f:
        f.write(rng.randbytes(rng.randrange(1, 400)))
    return BATCHES


def _flip_last(part: Path, rng: random.Random) -> int | None:
    last = _segments(part)[-1]
    pos, size = _batches(last)[-1]
    # The length, magic, CRC and everything the CRC covers. The base offset and the partition
    # leader epoch are outside the CRC in message format v2 (as in Kafka): not damaged here.
    covered = [*range(pos + 8, pos + 12), *range(pos + 16, pos + size)]
    _flip(last, rng.sample(covered, rng.randint(1, 3)), rng)
    return BATCHES - 1


def _garbage_index(part: Path, rng: random.Random) -> int | None:
    for seg in _segments(part):
        for suffix in (".index", ".timeindex"):
            seg.with_suffix(suffix).write_bytes(rng.randbytes(rng.randrange(0, 200)))
    return None


def _missing_index(part: Path, rng: random.Random) -> int | None:
    for seg in _segments(part):
        for suffix in (".index", ".timeindex"):
            seg.with_suffix(suffix).unlink(missing_ok=True)
    return None


def _zero_timeindex(part: Path, rng: random.Random) -> int | None:
    """Time indexes of zero bytes (a preallocated file never written), offset indexes intact.

    At least two entries: one zero entry (timestamp 0 at the base offset) is a valid index of a
    segment whose first batch is stamped 0, for Kafka's sanity check as for ours.
    """
    for seg in _segments(part):
        seg.with_suffix(".timeindex").write_bytes(bytes(12 * rng.randint(2, 20)))
    return None


def _untrimmed_index(part: Path, rng: random.Random) -> int | None:
    """Entries followed by preallocated zero bytes (a crash before a roll trimmed them)."""
    for seg in _segments(part)[:-1]:
        for suffix, size in ((".index", 8), (".timeindex", 12)):
            path = seg.with_suffix(suffix)
            path.write_bytes(path.read_bytes() + bytes(size * rng.randint(1, 50)))
    return None


def _old_payload(part: Path, rng: random.Random) -> int | None:
    first = _segments(part)[0]
    spans = _batches(first)
    local = rng.randrange(1, len(spans) - 1)
    pos, size = spans[local]
    _flip(first, [rng.randrange(pos + 61, pos + size)], rng)  # inside the records
    return _global_index(part, first, local)


def _old_header(part: Path, rng: random.Random) -> int | None:
    second = _segments(part)[1]
    spans = _batches(second)
    local = rng.randrange(0, len(spans) - 1)
    pos, _ = spans[local]
    data = bytearray(second.read_bytes())
    data[pos + 8 : pos + 12] = rng.choice(
        (b"\x7f\xff\xff\xff", b"\x00\x00\x00\x05", b"\xff\xff\xff\xf0")
    )
    second.write_bytes(bytes(data))
    return _global_index(part, second, local)


def _stray_deleted(part: Path, rng: random.Random) -> int | None:
    first = _segments(part)[0]
    shutil.copyfile(first, first.with_name(first.name + ".deleted"))
    (part / f"{99999:020d}.log.deleted").write_bytes(rng.randbytes(500))
    (part / f"{99999:020d}.index.deleted").write_bytes(rng.randbytes(16))
    return None


def _stray_cleaned(part: Path, rng: random.Random) -> int | None:
    (part / f"{0:020d}.log.cleaned").write_bytes(rng.randbytes(700))
    (part / f"{0:020d}.index.cleaned").write_bytes(rng.randbytes(24))
    return None


DAMAGE: dict[str, Damage] = {
    "torn-tail": _torn_tail,
    "garbage-tail": _garbage_tail,
    "flip-last": _flip_last,
    "garbage-index": _garbage_index,
    "missing-index": _missing_index,
    "zero-timeindex": _zero_timeindex,
    "untrimmed-index": _untrimmed_index,
    "old-payload": _old_payload,
    "old-header": _old_header,
    "stray-deleted": _stray_deleted,
    "stray-cleaned": _stray_cleaned,
}


@dataclass
class Damaged:
    broker: BrokerProcess
    shutdown: str
    checkpoints: str
    first_bad: dict[str, int | None]

    @property
    def recovery_point_known(self) -> bool:
        return self.checkpoints == "intact" or self.shutdown == "clean"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("faults-template")
    data = base / "data"
    data.mkdir()
    broker = BrokerProcess(data, SETTINGS)
    broker.start()
    try:
        with WireClient(broker.bootstrap) as c:
            for topic in CASES:
                create_topic(c, topic)
            for i in range(BATCHES):
                for topic in CASES:
                    values = expected_values(topic, i, RECORDS)
                    assert produce(c, topic, values, batch_timestamp(i)) == i * RECORDS
        # the recovery-point checkpoint covers every batch
        ends = {(topic, 0): BATCHES * RECORDS for topic in CASES}
        wait_for_checkpoint(data, RECOVERY_POINT_CHECKPOINT, ends)
        broker.kill()
        shutil.copytree(data, base / "unclean")
        broker.start()
        assert broker.stop() == 0
        shutil.copytree(data, base / "clean")
    finally:
        if broker.running:
            broker.kill()
    return {"unclean": base / "unclean", "clean": base / "clean"}


@pytest.fixture(scope="module", params=SCENARIOS, ids=lambda s: f"{s[0]}-{s[1]}-checkpoints")
def damaged(
    request: pytest.FixtureRequest,
    template: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Damaged]:
    shutdown, checkpoints = request.param
    data = tmp_path_factory.mktemp(f"faults-{shutdown}-{checkpoints}") / "data"
    shutil.copytree(template[shutdown], data)
    rng = random.Random(f"{shutdown}/{checkpoints}")
    first_bad = {case: DAMAGE[case](data / f"{case}-0", rng) for case in CASES}
    for name in CHECKPOINTS:
        if checkpoints == "missing":
            (data / name).unlink(missing_ok=True)  # an unclean stop may leave none
        elif checkpoints == "garbage":
            (data / name).write_bytes(rng.randbytes(rng.randrange(1, 300)))
    broker = BrokerProcess(data, SETTINGS)
    broker.start()
    yield Damaged(broker, shutdown, checkpoints, first_bad)
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-3000:]


def _expected(topic: str, count: int) -> list[tuple[int, tuple[bytes, ...]]]:
    return [(i * RECORDS, expected_values(topic, i, RECORDS)) for i in range(count)]


def _served(
    bootstrap: str, topic: str, start: int = 0
) -> tuple[list[tuple[int, tuple[bytes, ...]]], PartitionView]:
    view = read_partition(bootstrap, topic, start)
    assert not view.bad_crc, f"{topic}: damaged batches served as data at {view.bad_crc}"
    return [(b.base_offset, b.values) for b in view.batches], view


def _consume_all(bootstrap: str, topic: str, end: int) -> list[bytes]:
    """Every value of the partition up to ``end`` through librdkafka (CRCs checked)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "faults-check",
            "enable.partition.eof": True,
            "check.crcs": True,
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        while len(values) < end and time.monotonic() < deadline:
            for m in consumer.consume(500, timeout=0.5):
                if m.error() is None:
                    values.append(m.value())
                else:
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
    finally:
        consumer.close()
    return values


def _produce_continues(bootstrap: str, topic: str, high_watermark: int) -> None:
    """A new batch lands exactly at the high watermark and reads back."""
    values = (b"after-repair-" + topic.encode(),)
    with WireClient(bootstrap) as c:
        assert produce(c, topic, values) == high_watermark
        part = fetch_once(c, topic, high_watermark)
        assert part.error_code == 0 and values[0] in bytes(part.records)


@pytest.mark.parametrize("case", TAIL_CASES)
def test_damaged_tail_is_cut_and_the_rest_served(damaged: Damaged, case: str) -> None:
    first_bad = damaged.first_bad[case]
    assert first_bad is not None
    bootstrap = damaged.broker.bootstrap
    served, view = _served(bootstrap, case)
    assert served[:first_bad] == _expected(case, first_bad)
    log = damaged.broker.log_text()
    if first_bad == BATCHES or damaged.shutdown == "unclean" or view.error == 0:
        # Cut at start-up (and said so): everything before the damage, nothing after.
        assert served == _expected(case, first_bad), f"{case}: {len(served)} batches served"
        assert view.error == 0 and view.high_watermark == first_bad * RECORDS
        assert f"recovered segment {damaged.broker.log_dir}/{case}-0/" in log, log[-3000:]
        assert _consume_all(bootstrap, case, first_bad * RECORDS) == [
            v for _, values in _expected(case, first_bad) for v in values
        ]
        _produce_continues(bootstrap, case, first_bad * RECORDS)
    else:
        # A clean shutdown vouched for the last batch: found damaged when read, not served.
        assert view.error in (CORRUPT_MESSAGE, KAFKA_STORAGE_ERROR)
        assert view.error_offset == first_bad * RECORDS


@pytest.mark.parametrize("case", INDEX_CASES + STRAY_CASES)
def test_index_and_stray_file_damage_loses_nothing(damaged: Damaged, case: str) -> None:
    bootstrap = damaged.broker.bootstrap
    served, view = _served(bootstrap, case)
    assert view.error == 0 and served == _expected(case, BATCHES)
    part_dir = damaged.broker.log_dir / f"{case}-0"
    assert not list(part_dir.glob("*.deleted")) and not list(part_dir.glob("*.cleaned"))
    with WireClient(bootstrap) as c:
        # Every batch found by offset, from inside it too (the offset index).
        for i in range(0, BATCHES, 3):
            for offset in (i * RECORDS, i * RECORDS + 2):
                got = fetch_once(c, case, offset, max_bytes=1)
                assert int.from_bytes(bytes(got.records[:8]), "big") == i * RECORDS, offset
    _produce_continues(bootstrap, case, BATCHES * RECORDS)


def test_offsets_for_timestamps_after_index_damage(damaged: Damaged) -> None:
    """ListOffsets by timestamp through librdkafka (the time index) on every index case."""
    consumer = Consumer({"bootstrap.servers": damaged.broker.bootstrap, "group.id": "ts"})
    try:
        for case in INDEX_CASES:
            for i in range(0, BATCHES, 4):
                for j in range(RECORDS):
                    target = TopicPartition(case, 0, batch_timestamp(i) + j)
                    (tp,) = consumer.offsets_for_times([target], timeout=10)
                    assert tp.offset == i * RECORDS + j, (case, i, j, tp.offset)
    finally:
        consumer.close()


@pytest.mark.parametrize("case", OLD_CASES)
def test_old_segment_damage_is_an_error_never_data(damaged: Damaged, case: str) -> None:
    first_bad = damaged.first_bad[case]
    assert first_bad is not None
    bootstrap = damaged.broker.bootstrap
    served, view = _served(bootstrap, case)
    assert served == _expected(case, first_bad)
    if damaged.recovery_point_known:
        assert view.error in (CORRUPT_MESSAGE, KAFKA_STORAGE_ERROR), view
        assert view.error_offset == first_bad * RECORDS
        # The segments after the damaged one are still served.
        later = _segments(damaged.broker.log_dir / f"{case}-0")[-1]
        start = int(later.name[:20])
        rest, rest_view = _served(bootstrap, case, start)
        assert rest_view.error == 0
        assert rest == [e for e in _expected(case, BATCHES) if e[0] >= start]
    else:
        # Without a recovery point every segment is recovered: cut there, as Kafka does.
        assert view.error == 0 and view.high_watermark == first_bad * RECORDS
        assert "recovered segment" in damaged.broker.log_text()


def test_checkpoints_are_rewritten(damaged: Damaged) -> None:
    for name in CHECKPOINTS:
        lines = (damaged.broker.log_dir / name).read_text().splitlines()
        assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
    if damaged.checkpoints == "garbage":
        assert "ignoring unreadable checkpoint" in damaged.broker.log_text()


def test_indexes_equal_a_rebuild_after_a_clean_restart(damaged: Damaged) -> None:
    """Last in the module: stop cleanly, compare every index file with a rebuild, restart."""
    broker = damaged.broker
    # Logs that still hold damage (kept, answered with an error) cannot equal a rebuild.
    whole = [
        c for c in CASES if c not in OLD_CASES and read_partition(broker.bootstrap, c).error == 0
    ]
    assert broker.stop() == 0, broker.log_text()[-3000:]
    found = IndexCheck()
    check_indexes(broker.log_dir, whole, INDEX_INTERVAL, include_active=True, into=found)
    assert found.segments >= len(whole) * 3
    assert not found.problems, found.problems
    broker.start()
