"""Aborted transactions across segment rolls, read by stock read_committed consumers (issue 26).

A topic with a small ``segment.bytes`` and consumers with a small max.partition.fetch.bytes:
every Fetch answer ends inside an early segment while the ABORT markers (and so the
``.txnindex`` entries) lie in later segments. The broker must still list those aborted
transactions, or the client delivers their records. Checked with confluent-kafka and
kafka-python, on a fresh broker, after a clean restart, and after SIGKILL (with the indexes
rebuilt from the log, and with a transaction left open by the crash and aborted at its timeout).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.test_transactions import read_committed
from tidelog.storage.checkpoint import RECOVERY_POINT_CHECKPOINT
from tidelog.storage.transaction_index import TransactionIndex

pytestmark = pytest.mark.integration

TOPIC = "rolls"
SEGMENT_BYTES = 2048
FETCH_BYTES = 1000  # a few batches: each answer ends inside a segment (librdkafka's least)
FAST = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)})
    for future in admin.create_topics([topic]).values():
        future.result(30)


def txn_producer(bootstrap: str, transactional_id: str, **extra: Any) -> Producer:
    config = {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "linger.ms": 0,
        "batch.num.messages": 4,
    }
    config.update(extra)
    producer = Producer(config)
    producer.init_transactions(30)
    return producer


def value(prefix: str, i: int) -> bytes:
    return b"%s%03d-" % (prefix.encode(), i) + b"x" * 60


def send_in_batches(producer: Producer, prefix: str, count: int) -> None:
    """``count`` values in batches of four (a flush after each)."""
    for i in range(count):
        producer.produce(TOPIC, value=value(prefix, i), partition=0)
        if i % 4 == 3:
            producer.flush(10)
    producer.flush(10)


def produce_spanning_rolls(bootstrap: str) -> list[bytes]:
    """Interleaved transactions over many segments; returns what read_committed must see.

    ``a`` (aborted) and ``b`` (committed) interleave over several rolls, then ``c`` (aborted)
    spans one roll, then ``d`` commits.
    """
    a = txn_producer(bootstrap, "tx-a")
    b = txn_producer(bootstrap, "tx-b")
    a.begin_transaction()
    b.begin_transaction()
    for i in range(40):
        a.produce(TOPIC, value=value("a", i), partition=0)
        a.flush(10)
        b.produce(TOPIC, value=value("b", i), partition=0)
        b.flush(10)
    b.commit_transaction(30)
    a.abort_transaction(30)
    c = txn_producer(bootstrap, "tx-c")
    c.begin_transaction()
    send_in_batches(c, "c", 30)
    c.abort_transaction(30)
    d = txn_producer(bootstrap, "tx-d")
    d.begin_transaction()
    for i in range(5):
        d.produce(TOPIC, value=value("d", i), partition=0)
    d.commit_transaction(30)
    return [value("b", i) for i in range(40)] + [value("d", i) for i in range(5)]


def confluent_read_committed(bootstrap: str) -> list[bytes]:
    small = {
        "max.partition.fetch.bytes": FETCH_BYTES,
        "fetch.max.bytes": FETCH_BYTES,
        "message.max.bytes": FETCH_BYTES,
    }
    return read_committed(bootstrap, TOPIC, wait_s=15.0, **small)


def kafka_python_read_committed(bootstrap: str) -> list[bytes]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=FETCH_BYTES,
        fetch_max_bytes=FETCH_BYTES,
        consumer_timeout_ms=4000,
    )
    consumer.assign([KpTopicPartition(TOPIC, 0)])
    try:
        return [m.value for m in consumer]
    finally:
        consumer.close()


def tidelog_consume_read_committed(bootstrap: str) -> list[bytes]:
    """``tidelog consume`` (kafka-python underneath) with the same small fetch sizes."""
    done = subprocess.run(
        [
            sys.executable, "-m", "tidelog", "consume",
            "--bootstrap-server", bootstrap, "--topic", TOPIC, "--from-beginning",
            "--isolation-level", "read_committed", "--timeout-ms", "4000",
            "--consumer-property", f"max.partition.fetch.bytes={FETCH_BYTES}",
            "--consumer-property", f"fetch.max.bytes={FETCH_BYTES}",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def partition_dir(broker: Any) -> Path:
    return Path(broker.log_dir) / f"{TOPIC}-0"


def txnindex_entries(broker: Any) -> dict[str, list[Any]]:
    return {
        p.name: TransactionIndex(p).entries
        for p in sorted(partition_dir(broker).glob("*.txnindex"))
    }


def assert_both_clients_read(bootstrap: str, expected: list[bytes]) -> None:
    seen = {
        "confluent-kafka": confluent_read_committed(bootstrap),
        "kafka-python": kafka_python_read_committed(bootstrap),
    }
    assert seen == {"confluent-kafka": expected, "kafka-python": expected}


def assert_spans_rolls(broker: Any) -> None:
    """The aborted transactions began segments before the one holding their marker."""
    segments = sorted(partition_dir(broker).glob("*.log"))
    assert len(segments) >= 6, segments
    bases = [int(p.stem) for p in segments]
    entries = [e for found in txnindex_entries(broker).values() for e in found]
    assert len(entries) == 2
    for entry in entries:
        holding_first = max(b for b in bases if b <= entry.first_offset)
        holding_marker = max(b for b in bases if b <= entry.last_offset)
        assert holding_first < holding_marker, entry
    assert f"{bases[0]:020d}.txnindex" not in txnindex_entries(broker)


def test_read_committed_skips_aborted_transactions_spanning_rolls(broker_factory: Any) -> None:
    broker = broker_factory()
    bs = broker.bootstrap
    create_topic(bs)
    expected = produce_spanning_rolls(bs)
    assert_spans_rolls(broker)
    assert_both_clients_read(bs, expected)
    assert tidelog_consume_read_committed(bs) == expected
    # a clean restart reads the kept indexes
    indexes = txnindex_entries(broker)
    broker.restart()
    assert txnindex_entries(broker) == indexes
    assert_both_clients_read(bs, expected)


def test_read_committed_after_sigkill_with_rebuilt_indexes(broker_factory: Any) -> None:
    broker = broker_factory()
    bs = broker.bootstrap
    create_topic(bs)
    expected = produce_spanning_rolls(bs)
    indexes = txnindex_entries(broker)
    broker.kill()
    # As if nothing had been checkpointed: every segment is recovered, the ``.txnindex`` files
    # are rebuilt by the producer-state replay.
    (Path(broker.log_dir) / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)
    for pattern in ("*.txnindex", "*.snapshot"):
        for path in partition_dir(broker).glob(pattern):
            path.unlink()
    broker.start()
    assert_both_clients_read(bs, expected)
    assert txnindex_entries(broker) == indexes


def test_transaction_open_across_rolls_at_sigkill_is_aborted_at_timeout(
    broker_factory: Any,
) -> None:
    broker = broker_factory(FAST)
    bs = broker.bootstrap
    create_topic(bs)
    committed = txn_producer(bs, "tx-before")
    committed.begin_transaction()
    committed.produce(TOPIC, value=value("k", 0), partition=0)
    committed.commit_transaction(30)
    open_txn = txn_producer(bs, "tx-open", **{"transaction.timeout.ms": 2000})
    open_txn.begin_transaction()
    send_in_batches(open_txn, "o", 60)
    assert len(list(partition_dir(broker).glob("*.log"))) >= 3
    broker.kill()
    broker.start()
    deadline = time.monotonic() + 20
    while not txnindex_entries(broker) and time.monotonic() < deadline:
        time.sleep(0.3)  # the coordinator aborts the transaction at its timeout
    (entries,) = txnindex_entries(broker).values()
    assert len(entries) == 1 and entries[0].first_offset == 2
    after = txn_producer(bs, "tx-after")
    after.begin_transaction()
    after.produce(TOPIC, value=value("k", 1), partition=0)
    after.commit_transaction(30)
    assert_both_clients_read(bs, [value("k", 0), value("k", 1)])
