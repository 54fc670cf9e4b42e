"""Spark's own Kafka connector (`format("kafka")`, spark-sql-kafka-0-10 from tests/jvm/spark-kafka)
against tidelog on local[2]: batch reads with every way to pick topics and offsets, headers,
minPartitions, read_committed over aborted transactions, every codec, failOnDataLoss after
DeleteRecords and retention; batch writes with every column; and the "one word" claim: the same
job with format("tidelog") gives identical DataFrames. One Spark session for the module."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

import pytest

from tests.analytics.kafka_connector_data import (
    BASE_TS,
    CODECS,
    TXN_COMMITTED,
    Loaded,
    consume_all,
    load_topics,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def loaded(module_broker: Any) -> Loaded:
    # retention runs every half second here, for the retention test
    module_broker.restart({"log.retention.check.interval.ms": "500"})
    return load_topics(module_broker.bootstrap)


def _read(spark: Any, fmt: str, bootstrap: str, **options: str) -> Any:
    r = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.collect()]


def test_subscribe_pattern_and_assign(kafka_spark: Any, loaded: Loaded) -> None:
    df = _read(kafka_spark, "kafka", loaded.bootstrap, subscribe="kc-a")
    rows = df.select("key", "value", "partition", "offset").collect()
    assert Counter(bytes(r.value) for r in rows) == Counter(v for _, v, _, _ in loaded.a)
    by_part: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        by_part[r.partition].append(r.offset)
    assert {p: sorted(o) for p, o in by_part.items()} == {
        p: list(range(n)) for p, n in loaded.a_counts.items() if n
    }
    both = _read(kafka_spark, "kafka", loaded.bootstrap, subscribePattern="kc-[ab]")
    assert both.count() == len(loaded.a) + len(loaded.b)
    assign = json.dumps({"kc-a": [0, 2]})
    part = _read(kafka_spark, "kafka", loaded.bootstrap, assign=assign)
    assert {r.partition for r in part.select("partition").distinct().collect()} == {0, 2}
    assert part.count() == loaded.a_counts[0] + loaded.a_counts[2]


def test_json_offsets_and_timestamps(kafka_spark: Any, loaded: Loaded) -> None:
    start = json.dumps({"kc-a": {"0": 2, "1": -2, "2": 1}})
    end = json.dumps({"kc-a": {"0": 5, "1": 3, "2": -1}})
    df = _read(kafka_spark, "kafka", loaded.bootstrap, subscribe="kc-a",
               startingOffsets=start, endingOffsets=end)  # fmt: skip
    got = Counter((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    want = [(0, o) for o in range(2, 5)] + [(1, o) for o in range(3)]
    want += [(2, o) for o in range(1, loaded.a_counts[2])]
    assert got == Counter(want)
    # record i has timestamp BASE_TS + i seconds: from i >= 60 on
    cut = BASE_TS + 60_000
    by_ts = _read(
        kafka_spark, "kafka", loaded.bootstrap, subscribe="kc-a", startingTimestamp=str(cut)
    )
    values = {bytes(r.value) for r in by_ts.select("value").collect()}
    assert values == {v for _, v, _, ts in loaded.a if ts >= cut}
    per = json.dumps({"kc-a": {"0": cut, "1": cut, "2": BASE_TS}})
    by_pts = _read(kafka_spark, "kafka", loaded.bootstrap, subscribe="kc-a",
                   startingOffsetsByTimestamp=per)  # fmt: skip
    got_ts = Counter(
        (r.partition, r.timestamp)
        for r in by_pts.selectExpr(
            "partition", "CAST(unix_millis(timestamp) AS BIGINT) AS timestamp"
        ).collect()
    )
    want_ts = Counter((p, ts) for _, _, p, ts in loaded.a_placed if p == 2 or ts >= cut)
    assert got_ts == want_ts


def test_headers_and_min_partitions(kafka_spark: Any, loaded: Loaded) -> None:
    df = _read(kafka_spark, "kafka", loaded.bootstrap, subscribe="kc-a", includeHeaders="true",
               minPartitions="9")  # fmt: skip
    assert df.rdd.getNumPartitions() >= 9
    got = Counter((bytes(r.value), tuple((h.key, bytes(h.value)) for h in r.headers))
                  for r in df.select("value", "headers").collect())  # fmt: skip
    assert got == Counter((v, h) for _, v, h, _ in loaded.a)


def test_read_committed_skips_aborted_transactions(kafka_spark: Any, loaded: Loaded) -> None:
    committed = _read(kafka_spark, "kafka", loaded.bootstrap, subscribe="kc-txn",
                      **{"kafka.isolation.level": "read_committed"})  # fmt: skip
    assert sorted(bytes(r.value) for r in committed.select("value").collect()) == sorted(
        TXN_COMMITTED
    )
    everything = _read(kafka_spark, "kafka", loaded.bootstrap, subscribe="kc-txn")
    assert everything.count() == len(TXN_COMMITTED) * 2  # read_uncommitted sees the aborted too


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec(kafka_spark: Any, loaded: Loaded, codec: str) -> None:
    df = _read(kafka_spark, "kafka", loaded.bootstrap, subscribe=f"kc-codec-{codec}")
    got = sorted(bytes(r.value) for r in df.select("value").collect())
    assert got == sorted(loaded.codec_values)


def test_fail_on_data_loss_after_delete_records_and_retention(
    kafka_spark: Any, loaded: Loaded
) -> None:
    for topic, first in (("kc-deleted", 10), ("kc-retained", loaded.retained_start)):
        start = json.dumps({topic: {"0": 0}})
        lenient = _read(kafka_spark, "kafka", loaded.bootstrap, subscribe=topic,
                        startingOffsets=start, failOnDataLoss="false")  # fmt: skip
        offsets = sorted(r.offset for r in lenient.select("offset").collect())
        assert offsets == list(range(first, loaded.lost_total)), topic
        strict = _read(
            kafka_spark, "kafka", loaded.bootstrap, subscribe=topic, startingOffsets=start
        )
        with pytest.raises(Exception, match=r"(?i)data.*lost|failOnDataLoss|out of range"):
            strict.collect()


def test_batch_write_with_every_column(kafka_spark: Any, loaded: Loaded) -> None:
    from pyspark.sql import Row

    rows = [Row(key=b"k%d" % i, value=b"w%d" % i, topic=f"kc-out-{i % 2}", partition=i % 3,
                headers=[Row(key="n", value=b"%d" % i), Row(key="e", value=None)])
            for i in range(60)]  # fmt: skip
    schema = ("key binary, value binary, topic string, partition int, "
              "headers array<struct<key: string, value: binary>>")  # fmt: skip
    df = kafka_spark.createDataFrame(rows, schema)
    df.write.format("kafka").option("kafka.bootstrap.servers", loaded.bootstrap).save()
    got = consume_all(loaded.bootstrap, ["kc-out-0", "kc-out-1"], 3, 60)
    want = Counter((f"kc-out-{i % 2}", i % 3, b"k%d" % i, b"w%d" % i,
                    (("n", b"%d" % i), ("e", None))) for i in range(60))  # fmt: skip
    assert Counter((r.topic, r.partition, r.key, r.value, tuple(r.headers)) for r in got) == want
    # a `topic` option wins over the column
    df.limit(5).write.format("kafka").option("kafka.bootstrap.servers", loaded.bootstrap).option(
        "topic", "kc-out-opt"
    ).save()
    assert len(consume_all(loaded.bootstrap, ["kc-out-opt"], 3, 5)) == 5


ONE_WORD_JOBS: dict[str, dict[str, str]] = {
    "subscribe+headers": {"subscribe": "kc-a", "includeHeaders": "true"},
    "pattern": {"subscribePattern": "kc-.*", "includeHeaders": "true"},
    "assign+json": {"assign": json.dumps({"kc-a": [0, 2]}),
                    "startingOffsets": json.dumps({"kc-a": {"0": 3, "2": -2}}),
                    "endingOffsets": json.dumps({"kc-a": {"0": -1, "2": 7}})},
    "timestamp": {"subscribe": "kc-a,kc-b", "startingTimestamp": str(BASE_TS + 30_000)},
    "read_committed": {"subscribe": "kc-txn", "kafka.isolation.level": "read_committed"},
}  # fmt: skip


@pytest.mark.parametrize("job", list(ONE_WORD_JOBS))
def test_one_word_tidelog_and_kafka_give_identical_dataframes(
    kafka_spark: Any, loaded: Loaded, job: str
) -> None:
    frames = {fmt: _read(kafka_spark, fmt, loaded.bootstrap, **ONE_WORD_JOBS[job])
              for fmt in ("kafka", "tidelog")}  # fmt: skip
    assert frames["tidelog"].schema == frames["kafka"].schema
    per: dict[str, dict[tuple[str, int], list[tuple[Any, ...]]]] = {}
    for fmt, df in frames.items():
        parts: dict[tuple[str, int], list[tuple[Any, ...]]] = defaultdict(list)
        for row in _rows(df):  # collect keeps each Spark partition's order: offsets ascending
            parts[(row[2], row[3])].append(row)
        per[fmt] = dict(parts)
    assert per["tidelog"] == per["kafka"]
    assert sum(len(v) for v in per["kafka"].values()) > 0
