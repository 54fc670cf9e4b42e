"""Write a known mix of records into a running broker (tidelog or Apache Kafka) with
confluent-kafka: the sample the file checks of ``tests/kafkaref`` dump and read back.

``write_sample(bootstrap, prefix)`` makes topics ``<prefix>-plain`` (uncompressed, keys and
headers), ``<prefix>-<codec>`` for gzip, snappy, lz4 and zstd, ``<prefix>-idem`` (idempotent),
``<prefix>-txn`` (a committed and an aborted transaction), ``<prefix>-compact`` (compacted, with
deletes: null values), ``<prefix>-deleted`` (DeleteRecords up to offset 3), and commits the
offsets of group ``<prefix>-group`` (``__consumer_offsets``). It returns the topic names.
"""

from __future__ import annotations

import subprocess
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import ROOT

__all__ = ("CODECS", "consume_all", "tidelog_dump_log", "write_sample")

CODECS = ("gzip", "snappy", "lz4", "zstd")
TS = 1_700_000_000_000


def _produce(bootstrap: str, topic: str, n: int, **conf: object) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for i in range(n):
        producer.produce(
            topic,
            key=f"k{i % 3}".encode(),
            value=f"value-{i}".encode() * 3,
            headers=[("h", f"{i}".encode())],
            timestamp=TS + i,
            partition=0,
        )
    assert producer.flush(30) == 0


def write_sample(bootstrap: str, prefix: str) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"{prefix}-{s}" for s in ("plain", *CODECS, "idem", "txn", "compact", "deleted")]
    new = [
        NewTopic(
            t,
            num_partitions=1,
            replication_factor=1,
            # the sample's timestamps are of 2023: no retention by time, or Kafka deletes them
            config={"cleanup.policy": "compact"}
            if t.endswith("-compact")
            else {"retention.ms": "-1"},
        )
        for t in topics
    ]
    for future in admin.create_topics(new, operation_timeout=30).values():
        future.result(60)
    _produce(bootstrap, f"{prefix}-plain", 20, **{"compression.type": "none"})
    for codec in CODECS:
        _produce(bootstrap, f"{prefix}-{codec}", 20, **{"compression.type": codec})
    _produce(bootstrap, f"{prefix}-idem", 20, **{"enable.idempotence": True})
    _produce(bootstrap, f"{prefix}-deleted", 10)
    # transactions: one committed, one aborted, one committed
    tx = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}-tx", "linger.ms": 5}
    )
    tx.init_transactions(30)
    for i, commit in enumerate((True, False, True)):
        tx.begin_transaction()
        for j in range(3):
            tx.produce(f"{prefix}-txn", key=b"t", value=f"tx{i}-{j}".encode(), partition=0)
        assert tx.flush(30) == 0  # written before the end: an abort then leaves a marker
        if commit:
            tx.commit_transaction(30)
        else:
            tx.abort_transaction(30)
    # compacted, with tombstones
    compact = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        compact.produce(
            f"{prefix}-compact", key=f"c{i % 2}".encode(), value=f"v{i}".encode(), partition=0
        )
    compact.produce(f"{prefix}-compact", key=b"c0", value=None, partition=0)
    assert compact.flush(30) == 0
    # deleted records
    for future in admin.delete_records([TopicPartition(f"{prefix}-deleted", 0, 3)]).values():
        future.result(30)
    # a group's committed offsets
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{prefix}-group", "enable.auto.commit": False}
    )
    deadline = time.monotonic() + 60
    while True:  # a fresh Kafka answers NOT_COORDINATOR until __consumer_offsets is loaded
        try:
            consumer.commit(offsets=[TopicPartition(f"{prefix}-plain", 0, 7)], asynchronous=False)
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    consumer.close()
    return topics


def consume_all(
    bootstrap: str, topic: str, *, committed: bool = True
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of partition 0 of ``topic`` as ``(offset, key, value)``, as the consumer
    returns them (read_committed unless told)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, -2)])
    out: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, f"no end of {topic} seen"
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    return out
                raise AssertionError(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()


def tidelog_dump_log(*args: str) -> subprocess.CompletedProcess[str]:
    """``tidelog dump-log ARGS`` run to its end (exit code 0 asserted)."""
    done = subprocess.run(
        [sys.executable, "-m", "tidelog", "dump-log", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done
