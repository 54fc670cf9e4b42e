"""The topics the Spark Kafka connector tests read, written with kafka-python into a real broker,
and what each holds."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tidelog.analytics.partitioner import partition_for_key

# record i of kc-a has timestamp BASE_TS + i seconds (recent: retention runs in these tests)
BASE_TS = int(time.time()) * 1000 - 3_600_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TXN_COMMITTED = [b"c%d" % i for i in range(20)]
N_A, N_B, N_LOST = 120, 40, 30


@dataclass
class Loaded:
    bootstrap: str
    a: list[tuple[bytes, bytes, tuple[tuple[str, bytes], ...], int]] = field(default_factory=list)
    a_placed: list[tuple[bytes, bytes, int, int]] = field(default_factory=list)
    a_counts: dict[int, int] = field(default_factory=dict)
    b: list[bytes | None] = field(default_factory=list)
    codec_values: list[bytes] = field(default_factory=list)
    lost_total: int = N_LOST
    retained_start: int = 0


def load_topics(bootstrap: str) -> Loaded:
    from kafka import KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    out = Loaded(bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    retained = {"segment.bytes": "400", "retention.bytes": "600", "retention.ms": "-1"}
    topics = [
        NewTopic("kc-a", 3, 1),
        NewTopic("kc-b", 2, 1),
        NewTopic("kc-txn", 2, 1),
        NewTopic("kc-deleted", 1, 1),
        NewTopic("kc-retained", 1, 1, topic_configs=retained),
        NewTopic("kc-out-0", 3, 1),
        NewTopic("kc-out-1", 3, 1),
        NewTopic("kc-out-opt", 3, 1),
    ]
    topics += [NewTopic(f"kc-codec-{c}", 2, 1) for c in CODECS]  # fmt: skip
    admin.create_topics(topics)
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for i in range(N_A):
        key, value = b"k%d" % (i % 7), b"v%d" % i
        headers = (("i", b"%d" % i), ("even", b"%d" % (i % 2)))
        ts = BASE_TS + i * 1000
        p.send("kc-a", key=key, value=value, headers=list(headers), timestamp_ms=ts)
        out.a.append((key, value, headers, ts))
        out.a_placed.append((key, value, partition_for_key(key, 3), ts))
    for i in range(N_B):
        value = None if i % 10 == 9 else b"b%d" % i  # tombstones: null values (with a key)
        key = b"t%d" % i if value is None else None
        p.send("kc-b", key=key, value=value, partition=i % 2, timestamp_ms=BASE_TS + i * 2000)
        out.b.append(value)
    for i in range(N_LOST):
        p.send("kc-deleted", value=b"d%d" % i)
        p.send("kc-retained", value=b"r%04d" % i + b"." * 40)
        p.flush()  # one batch each: retention removes whole segments of a few batches
    p.flush()
    p.close()
    out.codec_values = [b"codec-%d-" % i + b"x" * (i % 50) for i in range(200)]
    for codec in CODECS:
        cp = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                           compression_type=None if codec == "none" else codec)  # fmt: skip
        for i, v in enumerate(out.codec_values):
            cp.send(f"kc-codec-{codec}", value=v, partition=i % 2)
        cp.flush()
        cp.close()
    tp = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kc-txn-writer")
    tp.init_transactions()
    for chunk in range(4):
        tp.begin_transaction()
        for j in range(10):
            n = chunk // 2 * 10 + j
            tp.send("kc-txn", value=(b"c%d" if chunk % 2 == 0 else b"a%d") % n, partition=j % 2)
        tp.flush()  # an abort drops what is not sent yet: these must reach the log
        if chunk % 2 == 0:
            tp.commit_transaction()
        else:
            tp.abort_transaction()
    tp.close()
    counts = {p: 0 for p in range(3)}
    for _, _, part, _ in out.a_placed:
        counts[part] += 1
    out.a_counts = counts
    admin.delete_records({TopicPartition("kc-deleted", 0): 10})
    out.retained_start = _wait_log_start(admin, bootstrap, "kc-retained")
    admin.close()
    return out


def _wait_log_start(admin: Any, bootstrap: str, topic: str) -> int:
    """Wait until retention removed the first segments of `topic`; its new log start offset."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap)
    tp = TopicPartition(topic, 0)
    deadline = time.monotonic() + 30
    start = 0
    while time.monotonic() < deadline:
        start = c.beginning_offsets([tp])[tp]
        if start > 0:
            break
        time.sleep(0.3)
    c.close()
    assert 0 < start < N_LOST, f"retention removed nothing from {topic} (log start {start})"
    return int(start)


def consume_all(bootstrap: str, topics: list[str], partitions: int, want: int) -> list[Any]:
    """Every record of `topics` (read_uncommitted, from the beginning), waiting for `want`."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(t, p) for t in topics for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning()
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < want and time.monotonic() < deadline:
        for batch in c.poll(timeout_ms=300).values():
            got += batch
    c.close()
    return got


def read_to_end(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted"
) -> list[Any]:
    """Every record of `topic` from the beginning up to its end offsets (as of the call)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                      enable_auto_commit=False)  # fmt: skip
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning()
    end = c.end_offsets(tps)
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
        for batch in c.poll(timeout_ms=300).values():
            got += batch
    c.close()
    return got
