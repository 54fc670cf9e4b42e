"""Log compaction through the real broker, with stock clients.

- A topic created with ``cleanup.policy=compact`` (small segments, ``min.cleanable.dirty.ratio``
  0.01, short ``segment.ms``), written by kafka-python (idempotent) and confluent-kafka with
  compression: the background cleaner compacts it, and consumers reading from the beginning
  (kafka-python and librdkafka) see the latest value of every key at its original offset, with
  the older values gone; the same after a restart.
- A record without a key on a compacted topic is refused with INVALID_RECORD.
- ``__consumer_offsets`` is compacted: after many commits of the same group its live segment
  bytes are a fraction of what was written, and the group's committed offsets survive a restart.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import InvalidRecordError
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.integration

CLEANER = {
    "log.cleaner.backoff.ms": "100",
    "log.segment.delete.delay.ms": "1000",
}
COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "8192",
    "segment.ms": "200",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "100",
}
KEYS = 12


def create(bootstrap: str, topic: str, configs: dict[str, str] = COMPACT) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs=configs)])
    finally:
        admin.close()


def read_all(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + 20
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            out += [(r.offset, r.key, r.value) for r in records]
    consumer.close()
    return out


def read_all_confluent(bootstrap: str, topic: str, end: int) -> list[tuple[Any, Any, Any]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"ck-{topic}", "enable.auto.commit": False}
    )
    consumer.assign([CTopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: list[tuple[Any, Any, Any]] = []
    deadline = time.monotonic() + 20
    while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append((msg.offset(), msg.key(), msg.value()))
    consumer.close()
    return out


def live_log_bytes(log_dir: Path, prefix: str) -> int:
    return sum(
        p.stat().st_size
        for d in log_dir.iterdir()
        if d.is_dir() and d.name.startswith(prefix)
        for p in d.iterdir()
        if p.name.endswith(".log")
    )


def wait_compacted(
    bootstrap: str, topic: str, end: int, expected: dict[bytes, tuple[int, bytes]]
) -> list[tuple[int, bytes, bytes | None]]:
    """Read until every key appears once, as its latest write (or time out)."""
    deadline = time.monotonic() + 40
    while True:
        seen = read_all(bootstrap, topic, end)
        keys = [k for _, k, _ in seen]
        if len(keys) == len(set(keys)) and len(seen) <= len(expected) + 1:
            return seen
        assert time.monotonic() < deadline, f"not compacted: {len(seen)} records"
        time.sleep(0.3)


def test_compacted_topic_keeps_latest_value_of_every_key(broker_factory: Any) -> None:
    from confluent_kafka import Producer

    broker = broker_factory(CLEANER)
    topic = "changelog"
    create(broker.bootstrap, topic)
    latest: dict[bytes, tuple[int, bytes]] = {}
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        enable_idempotence=True,
        acks="all",
        compression_type="gzip",
        linger_ms=2,
        batch_size=2048,
    )
    futures = []
    for i in range(400):
        key = f"key-{i % KEYS}".encode()
        value = f"value-{i}".encode() * 4
        futures.append((key, value, producer.send(topic, key=key, value=value, partition=0)))
    for key, value, future in futures:
        latest[key] = (future.get(timeout=20).offset, value)
    producer.close()
    errors: list[Any] = []
    confluent = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 2,
            "batch.size": 2048,
        }
    )
    results: dict[bytes, tuple[bytes, list[int]]] = {}
    for i in range(400, 600):
        key = f"key-{i % KEYS}".encode()
        value = f"value-{i}".encode() * 4
        box: list[int] = []
        results[key] = (value, box)

        def delivered(err: Any, msg: Any, box: list[int] = box) -> None:
            if err:
                errors.append(err)
            else:
                box.append(msg.offset())

        confluent.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
    assert confluent.flush(20) == 0 and not errors
    for key, (value, box) in results.items():
        latest[key] = (box[-1], value)
    # roll the last data segment: one more write after segment.ms
    time.sleep(0.4)
    sentinel = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    end = sentinel.send(topic, key=b"zz-sentinel", value=b"x", partition=0).get(20).offset + 1
    sentinel.close()
    seen = wait_compacted(broker.bootstrap, topic, end, latest)
    got = {k: (o, v) for o, k, v in seen if k != b"zz-sentinel"}
    assert got == latest
    assert [o for o, _, _ in seen] == sorted(o for o, _, _ in seen)
    librdkafka = read_all_confluent(broker.bootstrap, topic, end)
    assert librdkafka == seen
    partition_dir = broker.log_dir / f"{topic}-0"
    assert (broker.log_dir / "cleaner-offset-checkpoint").exists()
    assert live_log_bytes(broker.log_dir, f"{topic}-") < 600 * 40 / 2
    broker.restart()
    assert read_all(broker.bootstrap, topic, end) == seen
    assert not [p for p in partition_dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]


def test_tombstones_delete_keys(broker_factory: Any) -> None:
    broker = broker_factory(CLEANER)
    topic = "with-deletes"
    create(broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    for i in range(100):
        producer.send(topic, key=f"k{i % 5}".encode(), value=b"v" * 50, partition=0)
    for k in (b"k0", b"k1"):
        producer.send(topic, key=k, value=None, partition=0)
    producer.flush()
    time.sleep(0.4)
    end = producer.send(topic, key=b"k4", value=b"last", partition=0).get(20).offset + 1
    producer.close()
    deadline = time.monotonic() + 40
    while True:
        keys = [k for _, k, _ in read_all(broker.bootstrap, topic, end)]
        # the sealed part holds k2, k3, k4 once each; the active segment the last k4
        if sorted(keys) == [b"k2", b"k3", b"k4", b"k4"]:
            break
        assert time.monotonic() < deadline, keys
        time.sleep(0.3)


def test_keyless_record_is_refused_with_invalid_record(broker_factory: Any) -> None:
    from confluent_kafka import KafkaError, Producer

    broker = broker_factory(CLEANER)
    create(broker.bootstrap, "needs-keys")
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, enable_idempotence=False, retries=0
    )
    with pytest.raises(InvalidRecordError):
        producer.send("needs-keys", value=b"no key", partition=0).get(timeout=20)
    assert producer.send("needs-keys", key=b"k", value=b"v", partition=0).get(20).offset == 0
    producer.close()
    errors: list[Any] = []
    confluent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False})
    confluent.produce(
        "needs-keys", value=b"no key", partition=0, on_delivery=lambda err, _msg: errors.append(err)
    )
    confluent.flush(20)
    assert len(errors) == 1 and errors[0].code() == KafkaError.INVALID_RECORD


def test_consumer_offsets_is_compacted(broker_factory: Any) -> None:
    broker = broker_factory(
        {
            **CLEANER,
            "offsets.topic.num.partitions": "1",
            "offsets.topic.segment.bytes": "4096",
            "log.cleaner.min.cleanable.ratio": "0.01",
        }
    )
    create(broker.bootstrap, "plain", {"cleanup.policy": "delete"})
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id="committer", enable_auto_commit=False
    )
    tp = TopicPartition("plain", 0)
    consumer.assign([tp])
    commits = 1500
    for i in range(commits):
        consumer.commit({tp: OffsetAndMetadata(i, "", -1)})
    consumer.close()
    written = commits * 60  # a commit record is ~60 bytes or more
    deadline = time.monotonic() + 40
    while live_log_bytes(broker.log_dir, "__consumer_offsets-") > written / 5:
        assert time.monotonic() < deadline, live_log_bytes(broker.log_dir, "__consumer_offsets-")
        time.sleep(0.3)
    broker.restart()
    again = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id="committer", enable_auto_commit=False
    )
    assert again.committed(tp) == commits - 1
    again.close()
