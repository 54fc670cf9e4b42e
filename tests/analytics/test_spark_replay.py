"""Replay into Spark, over the wire and from files, against records produced through a real
tidelog broker (every codec, keys, null keys, tombstones, headers, rolled segments)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkpoints import wait_for_checkpoint
from tidelog.analytics.replay import main as replay_main
from tidelog.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT

pytestmark = pytest.mark.spark

T0 = 1_700_000_040_000  # a minute boundary
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
Broker = Any  # tests/analytics/conftest.py: .bootstrap, .log_dir
Row = tuple[str, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


def _record(i: int, null_header: bool = True) -> tuple[
    bytes | None, bytes | None, list[tuple[str, bytes | None]], int
]:  # fmt: skip
    key = None if i % 10 == 0 else b"user-0" if i % 4 == 0 else b"user-%d" % (i % 7)
    value = None if i % 25 == 7 else b"payload-%d-" % i + b"x" * (i % 50)
    headers = [("trace", b"%d" % i), ("empty", None if null_header else b"")] if i % 2 else []
    return key, value, headers, T0 + i * 1000


def _produce(bootstrap: str, topic: str, items: list[tuple[int, int]], codec: str,
             client: str = "librdkafka") -> list[Row]:  # fmt: skip
    """Send records (index, partition) with one codec and client (librdkafka or kafka-python,
    which has no snappy here and no null header values); returns what was acknowledged."""
    rows: list[Row] = []
    if client == "librdkafka":
        import confluent_kafka as ck

        p = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                         "linger.ms": 20})  # fmt: skip
        for i, part in items:
            k, v, h, ts = _record(i)

            def done(err: Any, msg: Any, k: Any = k, v: Any = v, h: Any = h, ts: int = ts) -> None:
                assert err is None, err
                rows.append((topic, msg.partition(), msg.offset(), k, v, tuple(h), ts))

            p.produce(topic, key=k, value=v, headers=h, partition=part, timestamp=ts,
                      on_delivery=done)  # fmt: skip
        assert p.flush(30) == 0
        return rows
    from kafka import KafkaProducer

    kp = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none"
                       else codec, enable_idempotence=False, linger_ms=20)  # fmt: skip
    futures = []
    for i, part in items:
        k, v, h, ts = _record(i, null_header=False)
        f = kp.send(topic, key=k, value=v, headers=h, partition=part, timestamp_ms=ts)
        futures.append((f, k, v, h, ts))
    kp.flush()
    for f, k, v, h, ts in futures:
        md = f.get(timeout=30)
        rows.append((topic, md.partition, md.offset, k, v, tuple(h), ts))
    kp.close()
    return rows


def _wait_for_checkpoint(broker: Broker, rows: list[Row]) -> None:
    ends: dict[tuple[str, int], int] = {}
    for t, p, o, *_ in rows:
        ends[(t, p)] = max(ends.get((t, p), 0), o + 1)
    wait_for_checkpoint(broker.log_dir, REPLICATION_OFFSET_CHECKPOINT, ends, timeout_s=20)


@pytest.fixture(scope="module")
def produced(replay_broker: Broker) -> list[Row]:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=replay_broker.bootstrap)
    admin.create_topics([
        NewTopic("events", 3, 1, topic_configs={"segment.bytes": "1500"}),
        NewTopic("audit", 1, 1),
    ])  # fmt: skip
    admin.close()
    rows: list[Row] = []
    for g in range(10):  # 10 groups of 30 records, each group with one codec -> many batches
        codec = CODECS[g % len(CODECS)]
        client = "kafka-python" if g >= 5 and codec != "snappy" else "librdkafka"
        items = [(i, i % 3) for i in range(g * 30, g * 30 + 30)]
        rows += _produce(replay_broker.bootstrap, "events", items, codec, client)
    rows += _produce(replay_broker.bootstrap, "audit", [(i, 0) for i in range(40)], "zstd",
                     "kafka-python")  # fmt: skip
    _wait_for_checkpoint(replay_broker, rows)
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


def _commit_group(bootstrap: str, group: str, offsets: dict[int, int]) -> dict[int, int]:
    """Commit offsets of `events` for a group; {} when the broker has no group support yet."""
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        c.commit({TopicPartition("events", p): OffsetAndMetadata(o, "", -1)
                  for p, o in offsets.items()})  # fmt: skip
        return offsets
    except Exception:
        return {}
    finally:
        c.close()


def _collect(df: Any) -> list[Row]:
    from pyspark.sql import functions as F

    got = df.select("topic", "partition", "offset", "key", "value", "headers",
                    F.unix_millis("timestamp").alias("ts"), "timestampType").collect()  # fmt: skip
    assert {r.timestampType for r in got} <= {0}
    return sorted(
        (r.topic, r.partition, r.offset, None if r.key is None else bytes(r.key),
         None if r.value is None else bytes(r.value),
         tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers or ()),
         r.ts)
        for r in got
    )  # fmt: skip


def _read(spark: Any, broker: Broker, way: str, **options: str) -> Any:
    reader = spark.read.format("tidelog").option("includeHeaders", "true")
    if way == "files":
        reader = reader.option("path", str(broker.log_dir))
    else:
        reader = reader.option("kafka.bootstrap.servers", broker.bootstrap)
    return reader.options(**options).load()


KAFKA_SCHEMA = (
    "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
    "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
)


@pytest.mark.parametrize("way", ["wire", "files"])
def test_rows_equal_what_was_produced(spark: Any, replay_broker: Broker, produced: list[Row],
                                      way: str) -> None:  # fmt: skip
    df = _read(spark, replay_broker, way, subscribe="events,audit")
    assert df.schema.simpleString() == KAFKA_SCHEMA
    assert _collect(df) == produced
    segments = list((replay_broker.log_dir / "events-0").glob("*.log"))
    assert len(segments) > 1, "the test data should roll segments"


def test_ranges_splits_and_times_agree(spark: Any, replay_broker: Broker,
                                       produced: list[Row]) -> None:  # fmt: skip
    events = [r for r in produced if r[0] == "events"]
    opts = {"subscribePattern": "ev.*", "maxRecordsPerPartition": "7"}
    split_df = _read(spark, replay_broker, "files", **opts)
    assert split_df.rdd.getNumPartitions() >= 300 // 7
    assert _collect(split_df) == events
    ranged = {"assign": '{"events":[0,2]}', "startingOffsets": '{"events":{"0":5,"2":-2}}',
              "endingOffsets": '{"events":{"0":50,"2":-1}}'}  # fmt: skip
    want = [r for r in events if (r[1] == 0 and 5 <= r[2] < 50) or r[1] == 2]
    for way in ("wire", "files"):
        assert _collect(_read(spark, replay_broker, way, **ranged)) == want
    timed = {"subscribe": "events", "startingTimestamp": str(T0 + 100_000),
             "endingTimestamp": str(T0 + 160_000)}  # fmt: skip
    want = [r for r in events if T0 + 100_000 <= r[6] < T0 + 160_000]
    for way in ("wire", "files"):
        assert _collect(_read(spark, replay_broker, way, **timed)) == want


def test_a_bad_option_names_itself(spark: Any, replay_broker: Broker) -> None:
    with pytest.raises(Exception, match="maxRecordsPerPartition") as e:
        _read(spark, replay_broker, "files", subscribe="events",
              maxRecordsPerPartition="-3").collect()  # fmt: skip
    assert "positive whole number" in str(e.value)


def test_replay_job_writes_records_tables_and_report(
    spark: Any, replay_broker: Broker, produced: list[Row], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    out = tmp_path / "out"
    committed = _commit_group(replay_broker.bootstrap, "replay-lag", {0: 10, 1: 20})
    sql = "SELECT topic, count(*) AS n FROM records GROUP BY topic"
    rc = replay_main(["--log-dir", str(replay_broker.log_dir), "--topic-pattern", "events|audit",
                      "--master", "local[2]", "--output", str(out), "--group", "replay-lag",
                      "--lag-bootstrap-server", replay_broker.bootstrap, "--sql", sql])  # fmt: skip
    assert rc == 0
    printed = capsys.readouterr()
    assert "|events|300|" in printed.out.replace(" ", "")
    assert str(out / "report.html") in printed.out
    back = spark.read.parquet(str(out / "records"))
    assert back.count() == len(produced)
    tables = {p.stem: json.loads(p.read_text()) for p in (out / "analytics").glob("*.json")}
    size = lambda r: len(r[3] or b"") + len(r[4] or b"")  # noqa: E731
    for part in tables["partitions"]:
        mine = [r for r in produced if (r[0], r[1]) == (part["topic"], part["partition"])]
        assert part["records"] == len(mine)
        assert part["bytes"] == sum(size(r) for r in mine)
        assert (part["first_offset"], part["last_offset"]) == (mine[0][2], mine[-1][2])
        assert part["null_keys"] == sum(r[3] is None for r in mine)
        assert part["tombstones"] == sum(r[4] is None for r in mine)
    ev = [r for r in produced if r[0] == "events"]
    top = next(k for k in tables["top_keys"] if k["topic"] == "events")
    ((key, n),) = Counter(r[3] for r in ev if r[3] is not None).most_common(1)
    assert (top["key"], top["records"]) == (key.decode(), n)
    minutes = Counter((r[0], (r[6] // 60000) * 60000) for r in produced)
    assert sum(m["records"] for m in tables["per_minute"]) == len(produced)
    assert len(tables["per_minute"]) == len(minutes)
    sizes = sorted(size(r) for r in ev)
    ev_sizes = next(s for s in tables["record_sizes"] if s["topic"] == "events")
    assert (ev_sizes["min"], ev_sizes["max"]) == (sizes[0], sizes[-1])
    assert abs(ev_sizes["p50"] - sizes[len(sizes) // 2]) <= 1
    page = (out / "report.html").read_text()
    assert page.count("<img") >= 4 and "replay-lag" in page  # the lag rows or why there are none
    if committed:  # the broker keeps group offsets: the lag is exact
        ends = Counter((r[0], r[1]) for r in produced)
        lag = {(r["topic"], r["partition"]): r["lag"] for r in tables["group_lag"]}
        assert lag == {("events", p): ends[("events", p)] - o for p, o in committed.items()}
    assert (out / "analytics" / "partitions.parquet").exists()


def test_streaming_available_now_picks_up_new_records(
    spark: Any, replay_broker: Broker, produced: list[Row], tmp_path: Path
) -> None:
    audit = [r for r in produced if r[0] == "audit"]

    def run(way: str) -> list[Row]:
        reader = spark.readStream.format("tidelog").option("subscribe", "audit")
        reader = reader.option("startingOffsets", "earliest").option("includeHeaders", "true")
        if way == "files":
            reader = reader.option("path", str(replay_broker.log_dir))
        else:
            reader = reader.option("kafka.bootstrap.servers", replay_broker.bootstrap)
        q = (reader.load().writeStream.format("parquet")
             .option("path", str(tmp_path / way / "data"))
             .option("checkpointLocation", str(tmp_path / way / "cp"))
             .trigger(availableNow=True).start())  # fmt: skip
        q.awaitTermination(120)
        assert q.exception() is None
        return _collect(spark.read.parquet(str(tmp_path / way / "data")))

    first = {way: run(way) for way in ("wire", "files")}
    assert first["wire"] == first["files"] == audit
    more = _produce(replay_broker.bootstrap, "audit", [(i, 0) for i in range(40, 50)], "lz4")
    _wait_for_checkpoint(replay_broker, more)
    for way in ("wire", "files"):
        assert run(way) == sorted(audit + more)  # exactly the new ones were added


def test_csv_has_a_header_and_text_keys_and_values(spark: Any, tmp_path: Path) -> None:
    import base64
    import csv

    from tidelog.analytics.replay import _write_records

    rows = [("t", 0, 0, b"key-1", "héllo".encode()), ("t", 0, 1, b"\xff\x00", None),
            ("t", 0, 2, None, b"\x80bin")]  # fmt: skip
    df = spark.createDataFrame(
        rows, "topic string, partition int, offset long, key binary, value binary"
    )
    for mode in ("text", "base64"):
        out = tmp_path / mode
        _write_records(df, out, "csv", mode)
        got = []
        for part in sorted((out / "topic=t").glob("*.csv")):
            with open(part, newline="", encoding="utf-8") as fh:
                text = fh.read()
            if text:
                header = text.splitlines()[0].split(",")  # every part file has one
                assert header[:4] == ["partition", "offset", "key", "value"], header
                got += list(csv.DictReader(text.splitlines()))
        got.sort(key=lambda r: int(r["offset"]))
        if mode == "text":
            assert [(r["key"], r["key_encoding"]) for r in got] == [
                ("key-1", "utf8"), (base64.b64encode(b"\xff\x00").decode(), "base64"), ("", ""),
            ]  # fmt: skip
            assert [(r["value"], r["value_encoding"]) for r in got] == [
                ("héllo", "utf8"), ("", ""), (base64.b64encode(b"\x80bin").decode(), "base64"),
            ]  # fmt: skip
        else:
            assert got[0]["key"] == base64.b64encode(b"key-1").decode()
            assert "key_encoding" not in got[0]


def test_replay_counts_empty_partitions(
    spark: Any, replay_broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """7 records on p0 and none on p1: both partitions are in the tables, the skew and the
    summary line (issue 26: the empty one was left out)."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=replay_broker.bootstrap)
    try:
        admin.create_topics([NewTopic("orders-empty-p1", 2, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=replay_broker.bootstrap)
    for i in range(7):
        producer.send("orders-empty-p1", value=b"order-%d" % i, key=b"k", partition=0)
    producer.flush()
    producer.close()
    out = tmp_path / "out"
    rc = replay_main(["--bootstrap-server", replay_broker.bootstrap, "--topics",
                      "orders-empty-p1", "--master", "local[1]", "--output", str(out)])  # fmt: skip
    assert rc == 0
    printed = capsys.readouterr()
    assert "replayed 7 records from 2 partition(s)" in printed.out
    tables = {p.stem: json.loads(p.read_text()) for p in (out / "analytics").glob("*.json")}
    rows = {(p["topic"], p["partition"]): p["records"] for p in tables["partitions"]}
    assert rows == {("orders-empty-p1", 0): 7, ("orders-empty-p1", 1): 0}
    (topic,) = tables["topics"]
    assert topic["partitions"] == 2 and topic["records"] == 7
    (skew,) = [k for k in tables["key_skew"] if k["topic"] == "orders-empty-p1"]
    assert skew["partition_skew"] == 2.0  # 7 against a mean of 3.5


def test_local_master_binds_spark_to_loopback(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tidelog.analytics.replay import spark_session

    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    spark_session("local[1]")
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.7")  # the user's choice is kept
    spark_session("local[1]")
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.7"
