"""The sink on local[2] against a real tidelog broker with topic auto-creation off: records
produced with kafka-python, read in Spark, transformed, written with `format("tidelog")`, read
back with kafka-python: every key, value and header once, keys on murmur2's partitions. Bad
input fails on the driver with Spark's Kafka sink messages, before any task runs."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.analytics.orders import require_transactions
from tests.support.net import free_port
from tidelog.analytics.partitioner import partition_for_key

pytestmark = pytest.mark.spark

N = 400
Rec = tuple[bytes | None, bytes, tuple[tuple[str, bytes], ...]]


@pytest.fixture(scope="module")
def sink_broker(module_broker: Any) -> Any:
    module_broker.restart({"auto.create.topics.enable": "false"})
    return module_broker


def _create(bootstrap: str, **topics: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()])
    finally:
        admin.close()


def _input(i: int) -> Rec:
    key = None if i % 9 == 0 else b"user-%d" % (i % 37)
    return key, b"v%d" % i, (("trace", b"t%d" % i), ("n", b"%d" % (i % 5)))


def _produce(bootstrap: str, topic: str, recs: list[Rec]) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    futures = [p.send(topic, key=k, value=v, headers=list(h)) for k, v, h in recs]
    p.flush()
    for f in futures:
        f.get(timeout=30)
    p.close()


def _consume(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      isolation_level=isolation)  # fmt: skip
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
    c.assign(tps)
    c.seek_to_beginning()
    end = c.end_offsets(tps)
    out: list[Any] = []
    deadline = time.monotonic() + 60
    while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
        for batch in c.poll(timeout_ms=500).values():
            out += batch
    c.close()
    return out


@pytest.fixture(scope="module")
def source_topic(sink_broker: Any) -> tuple[str, list[Rec]]:
    topic = "orders-in"
    _create(sink_broker.bootstrap, **{topic: 3})
    recs = [_input(i) for i in range(N)]
    _produce(sink_broker.bootstrap, topic, recs)
    return topic, recs


def _read(spark: Any, bootstrap: str, topic: str) -> Any:
    return (
        spark.read.format("tidelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )


def _transform(df: Any) -> Any:
    """Key kept, value marked, one header added."""
    return df.selectExpr(
        "key",
        "concat(value, X'21') AS value",
        "concat(headers, array(named_struct('key', 'via', 'value', X'7370'))) AS headers",
    )


def _expected(recs: list[Rec]) -> Counter[Rec]:
    return Counter((k, v + b"!", (*h, ("via", b"sp"))) for k, v, h in recs)


def _check_output(bootstrap: str, topic: str, recs: list[Rec], partitions: int) -> list[Any]:
    got = _consume(bootstrap, topic)
    seen = Counter((r.key, r.value, tuple(r.headers)) for r in got)
    assert seen == _expected(recs)  # every key, value and header exactly once
    for r in got:
        if r.key is not None:
            assert r.partition == partition_for_key(r.key, partitions), r
    assert len({r.partition for r in got if r.key is None}) >= 1
    return got


def test_batch_round_trip(spark: Any, sink_broker: Any,
                          source_topic: tuple[str, list[Rec]]) -> None:  # fmt: skip
    topic, recs = source_topic
    _create(sink_broker.bootstrap, **{"orders-out": 4})
    df = _transform(_read(spark, sink_broker.bootstrap, topic))
    (df.write.format("tidelog").mode("append")
     .option("kafka.bootstrap.servers", sink_broker.bootstrap)
     .option("topic", "orders-out").option("kafka.linger.ms", "5")
     .option("kafka.compression.type", "lz4").save())  # fmt: skip
    _check_output(sink_broker.bootstrap, "orders-out", recs, 4)


def test_streaming_round_trip(spark: Any, sink_broker: Any, source_topic: tuple[str, list[Rec]],
                              tmp_path: Path) -> None:  # fmt: skip
    topic, recs = source_topic
    _create(sink_broker.bootstrap, **{"orders-stream-out": 5})
    src = (spark.readStream.format("tidelog")
           .option("kafka.bootstrap.servers", sink_broker.bootstrap).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("includeHeaders", "true")
           .option("maxOffsetsPerTrigger", str(N // 2)).load())  # fmt: skip
    q = (_transform(src).writeStream.format("tidelog")
         .option("kafka.bootstrap.servers", sink_broker.bootstrap)
         .option("topic", "orders-stream-out")
         .option("checkpointLocation", str(tmp_path / "cp"))
         .trigger(availableNow=True).start())  # fmt: skip
    q.awaitTermination(180)
    assert q.exception() is None
    assert len(q.recentProgress) >= 2  # several micro-batches
    _check_output(sink_broker.bootstrap, "orders-stream-out", recs, 5)


def test_topic_column_partition_and_timestamp(spark: Any, sink_broker: Any) -> None:
    _create(sink_broker.bootstrap, **{"col-a": 2, "col-b": 3})
    rows = [("col-a" if i % 2 else "col-b", f"k{i}", f"v{i}", i % 2, 1_700_000_000.5 + i)
            for i in range(20)]  # fmt: skip
    df = spark.createDataFrame(
        rows, "topic string, key string, value string, partition int, timestamp double"
    )
    opts = {"kafka.bootstrap.servers": sink_broker.bootstrap}
    df.write.format("tidelog").mode("append").options(**opts).save()
    got = _consume(sink_broker.bootstrap, "col-a") + _consume(sink_broker.bootstrap, "col-b")
    want = {(t, k.encode(), v.encode(), p, int(ts * 1000)) for t, k, v, p, ts in rows}
    assert {(r.topic, r.key, r.value, r.partition, r.timestamp) for r in got} == want
    assert len(got) == len(rows)
    # the option wins over the column (as in Spark's Kafka sink)
    df.drop("partition").write.format("tidelog").mode("append").options(**opts).option(
        "topic", "col-b"
    ).save()
    again = _consume(sink_broker.bootstrap, "col-b")
    assert len(again) == len([r for r in rows if r[0] == "col-b"]) + len(rows)


def _fails_before_tasks(spark: Any, write: Any, message: str, seconds: float = 60) -> str:
    group = "bad-" + uuid.uuid4().hex[:8]
    spark.sparkContext.setJobGroup(group, group)
    t0 = time.monotonic()
    try:
        with pytest.raises(Exception) as e:
            write()
    finally:
        spark.sparkContext.setJobGroup("", "")
    assert message in str(e.value), str(e.value)[:2000]
    assert time.monotonic() - t0 < seconds  # a clear error, not a hang
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == []  # no task ran
    return str(e.value)


@pytest.mark.parametrize(
    ("schema", "options", "message"),
    [
        ("key string", {"topic": "orders-out"}, "Required attribute 'value' not found"),
        ("key int, value string", {"topic": "orders-out"},
         "key attribute unsupported type int. key must be a(n) string or binary"),
        ("value string", {}, "topic option required when no 'topic' attribute is present. "
         "Use the topic option for setting a topic."),
        ("value string, partition bigint", {"topic": "orders-out"},
         "partition attribute unsupported type bigint. partition must be a(n) int"),
        ("value string", {"topic": "no-such-topic"},
         "topic 'no-such-topic' does not exist at kafka.bootstrap.servers="),
        ("value string", {"topic": "orders-out", "kafka.key.serializer": "x"},
         "Kafka option 'key.serializer' is not supported"),
    ],
)  # fmt: skip
def test_bad_input_fails_on_the_driver(spark: Any, sink_broker: Any, schema: str,
                                       options: dict[str, str], message: str) -> None:  # fmt: skip
    n = len(schema.split(","))
    row = tuple(("1" if "string" in c else 1) for c in schema.split(","))
    df = spark.createDataFrame([row] * 3, schema)
    assert n == len(row)

    def write() -> None:
        w = df.write.format("tidelog").mode("append").options(**options)
        w.option("kafka.bootstrap.servers", sink_broker.bootstrap).save()

    _fails_before_tasks(spark, write, message)


def test_overwrite_and_unreachable_broker(spark: Any, sink_broker: Any) -> None:
    df = spark.createDataFrame([("v",)], "value string")

    def overwrite() -> None:
        w = df.write.format("tidelog").mode("overwrite").option("topic", "t")
        w.option("kafka.bootstrap.servers", sink_broker.bootstrap).save()

    _fails_before_tasks(spark, overwrite, "Save mode Overwrite not allowed for Kafka")
    dead = f"127.0.0.1:{free_port()}"  # a port nothing listens on

    def unreachable() -> None:
        (df.write.format("tidelog").mode("append").option("kafka.bootstrap.servers", dead)
         .option("topic", "t").save())  # fmt: skip

    _fails_before_tasks(
        spark, unreachable, f"cannot reach Kafka at kafka.bootstrap.servers='{dead}'"
    )


def test_missing_topic_from_a_column_fails_the_task_clearly(spark: Any, sink_broker: Any) -> None:
    df = spark.createDataFrame([("absent-topic", "v")], "topic string, value string")
    with pytest.raises(Exception) as e:
        (df.write.format("tidelog").mode("append")
         .option("kafka.bootstrap.servers", sink_broker.bootstrap)
         .option("kafka.max.block.ms", "3000").save())  # fmt: skip
    assert "topic 'absent-topic' does not exist" in str(e.value)


def test_exactly_once_batch_and_replayed_micro_batches(
    spark: Any, sink_broker: Any, source_topic: tuple[str, list[Rec]], tmp_path: Path
) -> None:
    """exactlyOnce=true: read_committed sees each record once, also when a micro-batch is
    replayed (the commit log of the last batch removed, as after a driver crash)."""
    require_transactions(sink_broker.bootstrap)
    topic, recs = source_topic
    _create(sink_broker.bootstrap, **{"eos-batch": 3, "eos-stream": 3})
    df = _transform(_read(spark, sink_broker.bootstrap, topic))
    (df.write.format("tidelog").mode("append").option("exactlyOnce", "true")
     .option("kafka.bootstrap.servers", sink_broker.bootstrap)
     .option("topic", "eos-batch").save())  # fmt: skip
    got = _consume(sink_broker.bootstrap, "eos-batch", "read_committed")
    assert Counter((r.key, r.value, tuple(r.headers)) for r in got) == _expected(recs)

    def run() -> None:
        src = (spark.readStream.format("tidelog")
               .option("kafka.bootstrap.servers", sink_broker.bootstrap)
               .option("subscribe", topic).option("startingOffsets", "earliest")
               .option("includeHeaders", "true").option("maxOffsetsPerTrigger", str(N // 2))
               .load())  # fmt: skip
        q = (_transform(src).writeStream.format("tidelog").option("exactlyOnce", "true")
             .option("kafka.bootstrap.servers", sink_broker.bootstrap)
             .option("topic", "eos-stream").option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())  # fmt: skip
        q.awaitTermination(180)
        assert q.exception() is None

    run()
    commits = sorted((tmp_path / "cp" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert len(commits) >= 2
    # forget the last batch was committed (and its checksum file, or Spark's metadata log
    # refuses to write it again): a restart replays it
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run()
    got = _consume(sink_broker.bootstrap, "eos-stream", "read_committed")
    assert Counter((r.key, r.value, tuple(r.headers)) for r in got) == _expected(recs)
