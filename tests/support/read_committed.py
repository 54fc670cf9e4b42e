"""What a ``read_committed`` consumer gets from a topic: the one check of the exactly-once
suites (``tests/go``, ``tests/java/test_java_eos.py``, ``tests/crash/txn_chaos.py``).

The reader assigns every partition from offset 0 with confluent-kafka (librdkafka, another
client than the programs under test), reads to the end of each partition (the last stable
offset: partition EOF) and returns the records; ``exactly_once`` checks that every key of
``0..n-1`` came exactly once.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass

__all__ = ("CommittedRecord", "exactly_once", "read_committed")

PARTITION_EOF = -191  # librdkafka's _PARTITION_EOF


@dataclass(frozen=True, slots=True)
class CommittedRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def read_committed(
    bootstrap: str, topic: str, *, expect_at_least: int = 0, wait_s: float = 60.0
) -> list[CommittedRecord]:
    """Every record of ``topic`` a read_committed consumer gets, once it reached the end of
    every partition with at least ``expect_at_least`` records (or ``wait_s`` passed)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-committed-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    records: list[CommittedRecord] = []
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_end: set[int] = set()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == PARTITION_EOF:
                    at_end.add(message.partition())
                    if len(at_end) == len(partitions) and len(records) >= expect_at_least:
                        break
                continue
            at_end.discard(message.partition())
            records.append(
                CommittedRecord(
                    message.partition(), message.offset(), message.key(), message.value()
                )
            )
    finally:
        consumer.close()
    return records


def exactly_once(records: list[CommittedRecord], n: int) -> list[str]:
    """Problems (empty when none) with ``records`` holding each key ``b"0"``..``b"n-1"`` once."""
    keys = Counter(r.key for r in records)
    problems = [f"key {k!r} seen {c} times" for k, c in keys.items() if c > 1]
    missing = [i for i in range(n) if str(i).encode() not in keys]
    if missing:
        problems.append(f"{len(missing)} of {n} keys missing (first {missing[:5]})")
    extra = [k for k in keys if k is None or not k.isdigit() or int(k) >= n]
    if extra:
        problems.append(f"{len(extra)} unexpected keys (first {extra[:5]})")
    return problems
