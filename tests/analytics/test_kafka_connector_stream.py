"""Spark's Kafka connector streaming against tidelog on local[2]: `readStream.format("kafka")`
with trigger(availableNow=True) and maxOffsetsPerTrigger, a restart from the checkpoint (no loss,
no duplicates), and a running micro-batch query that reads while a producer writes and writes
with `writeStream.format("kafka")` (key, value, headers, topic and partition columns)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.analytics.kafka_connector_data import consume_all

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def bootstrap(module_broker: Any) -> str:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    admin.create_topics([NewTopic("ks-in", 3, 1), NewTopic("ks-live", 2, 1),
                         NewTopic("ks-out-a", 2, 1), NewTopic("ks-out-b", 2, 1)])  # fmt: skip
    admin.close()
    return str(module_broker.bootstrap)


def _produce(bootstrap: str, topic: str, values: list[bytes], pause: float = 0.0) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2)
    for i, v in enumerate(values):
        p.send(topic, key=b"k%d" % (i % 5), value=v)
        if pause and i % 10 == 9:
            p.flush()
            time.sleep(pause)
    p.flush()
    p.close()


def _available_now(spark: Any, bootstrap: str, checkpoint: Path, out: Path) -> Any:
    q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", "ks-in").option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "40").load()
         .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
         .writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())  # fmt: skip
    q.awaitTermination(300)
    return q


def test_available_now_restart_from_checkpoint_and_max_offsets(
    kafka_spark: Any, bootstrap: str, tmp_path: Path
) -> None:
    first = [b"a%d" % i for i in range(150)]
    _produce(bootstrap, "ks-in", first)
    cp, out = tmp_path / "cp", tmp_path / "out"
    q = _available_now(kafka_spark, bootstrap, cp, out)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 150 and max(sizes) <= 40 and len(sizes) >= 4, sizes
    second = [b"b%d" % i for i in range(70)]
    _produce(bootstrap, "ks-in", second)
    q2 = _available_now(kafka_spark, bootstrap, cp, out)  # a restart: resumes from the checkpoint
    assert sum(p["numInputRows"] for p in q2.recentProgress) == 70
    rows = kafka_spark.read.parquet(str(out)).collect()
    assert Counter(r.value for r in rows) == Counter(v.decode() for v in first + second)
    assert len({(r.partition, r.offset) for r in rows}) == len(rows)  # no duplicates


def test_running_query_reads_while_producing_and_writes_with_every_column(
    kafka_spark: Any, bootstrap: str, tmp_path: Path
) -> None:
    values = [b"live-%d" % i for i in range(200)]
    q = (kafka_spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", "ks-live").option("startingOffsets", "earliest")
         .option("includeHeaders", "true").load()
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value",
                     "IF(partition = 0, 'ks-out-a', 'ks-out-b') AS topic",
                     "CAST(offset % 2 AS INT) AS partition",
                     "array(named_struct('key', 'from', 'value', CAST(CAST(offset AS STRING)"
                     " AS BINARY))) AS headers")
         .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("checkpointLocation", str(tmp_path / "cp"))
         .trigger(processingTime="1 second").start())  # fmt: skip
    deadline = time.monotonic() + 120
    while q.lastProgress is None and time.monotonic() < deadline:  # the query runs first
        time.sleep(0.2)
    assert q.lastProgress["numInputRows"] == 0  # the query ran before anything was written
    writer = threading.Thread(target=_produce, args=(bootstrap, "ks-live", values, 0.25))
    writer.start()
    try:
        writer.join(120)
        got = consume_all(bootstrap, ["ks-out-a", "ks-out-b"], 2, len(values))
        deadline = time.monotonic() + 120
        while len(got) < len(values) and time.monotonic() < deadline:
            time.sleep(2)
            got = consume_all(bootstrap, ["ks-out-a", "ks-out-b"], 2, len(values))
        assert q.isActive and q.exception() is None
    finally:
        q.stop()
    assert Counter(r.value for r in got) == Counter(v.upper() for v in values)
    for r in got:
        ((key, origin),) = r.headers
        assert key == "from" and r.partition == int(origin) % 2
