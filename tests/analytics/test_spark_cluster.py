"""On a Spark standalone cluster (a master and two 1-core workers from pyspark's jars, on
127.0.0.1): the sink round trip, `tidelog replay --master spark://...` over the wire and from
files, and the orders pipeline by spark-submit. One cluster for the module.

Marked `slow` (about 5-8 minutes on a loaded 2-core machine: three JVMs for the cluster, then
one Spark application per test); run with `./scripts/test -m slow tests/analytics`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.analytics.kafka_connector_data import read_to_end
from tests.analytics.orders import expected_windows, make_orders, produce_orders, read_windows
from tests.support.checkpoints import wait_for_checkpoint
from tests.support.migration import end_offsets
from tidelog.analytics.partitioner import partition_for_key
from tidelog.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from spark_cluster import StandaloneCluster, spark_home  # noqa: E402

N = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    c = StandaloneCluster(workers=2, cores=1, memory="1g",
                          work_dir=tmp_path_factory.mktemp("spark-cluster"))  # fmt: skip
    with c:
        yield c


@pytest.fixture(scope="module")
def topics(module_broker: Any) -> Any:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    module_broker.restart({"log.flush.offset.checkpoint.interval.ms": "1000"})
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    wanted = {"in": 3, "out": 4, "out-kafka": 4, "orders": 3, "orders-by-minute": 3}
    admin.create_topics([NewTopic(t, n, 1) for t, n in wanted.items()])
    admin.close()
    p = KafkaProducer(bootstrap_servers=module_broker.bootstrap, linger_ms=5)
    for i in range(N):
        p.send("in", key=b"k%d" % (i % 23), value=b"v%d" % i, headers=[("i", b"%d" % i)])
    p.flush()
    p.close()
    # the HW checkpoint covers them (files mode reads below it)
    ends = end_offsets(module_broker.bootstrap, "in", 3)
    wait_for_checkpoint(module_broker.log_dir, REPLICATION_OFFSET_CHECKPOINT, ends)
    return module_broker


def _env() -> dict[str, str]:
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
                PYTHONPATH=str(ROOT))  # fmt: skip


def test_kafka_connector_on_the_cluster(cluster: StandaloneCluster, topics: Any) -> None:
    """Spark's own Kafka connector (tests/jvm/spark-kafka) reads and writes on the cluster: the
    executors get its jars from spark.jars. First in the module: only the first session of a
    process puts jars on the driver's classpath."""
    from pyspark.sql import SparkSession

    from tests.support.jvm import spark_connector_jars

    jars = spark_connector_jars()
    if not jars:
        pytest.skip("JVM test: Spark's Kafka connector is not fetched (run scripts/jvm-deps)")
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    spark = (SparkSession.builder.master(cluster.url).appName("tidelog-cluster-kafka-connector")
             .config("spark.jars", jars).config("spark.executor.memory", "512m")
             .config("spark.ui.enabled", "false").getOrCreate())  # fmt: skip
    try:
        loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()
        try:
            loader.loadClass("org.apache.spark.sql.kafka010.KafkaSourceProvider")
        except Exception:
            pytest.skip("JVM test: this process's Spark JVM started without the connector jars")
        df = (spark.read.format("kafka").option("kafka.bootstrap.servers", topics.bootstrap)
              .option("subscribe", "in").option("includeHeaders", "true").load())  # fmt: skip
        out = df.selectExpr("key", "upper(cast(value AS STRING)) AS value", "headers")
        w = out.write.format("kafka").option("topic", "out-kafka")
        w.option("kafka.bootstrap.servers", topics.bootstrap).save()
    finally:
        spark.stop()
    got = read_to_end(topics.bootstrap, "out-kafka", 4)
    want = Counter((b"k%d" % (i % 23), b"V%d" % i, (("i", b"%d" % i),)) for i in range(N))
    assert Counter((r.key, r.value, tuple(r.headers)) for r in got) == want
    assert all(r.partition == partition_for_key(r.key, 4) for r in got)  # the Java partitioner


def test_sink_round_trip_on_the_cluster(cluster: StandaloneCluster, topics: Any) -> None:
    from pyspark.sql import SparkSession

    from tidelog.analytics.replay import spark_session

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    spark = spark_session(cluster.url, app="tidelog-cluster-round-trip")
    try:
        df = (spark.read.format("tidelog").option("kafka.bootstrap.servers", topics.bootstrap)
              .option("subscribe", "in").option("includeHeaders", "true").load())  # fmt: skip
        out = df.selectExpr("key", "upper(cast(value AS STRING)) AS value", "headers")
        w = out.write.format("tidelog").mode("append").option("topic", "out")
        w.option("kafka.bootstrap.servers", topics.bootstrap).save()
        assert spark.sparkContext.master == cluster.url
    finally:
        spark.stop()
    got = read_to_end(topics.bootstrap, "out", 4)
    want = Counter((b"k%d" % (i % 23), b"V%d" % i, (("i", b"%d" % i),)) for i in range(N))
    assert Counter((r.key, r.value, tuple(r.headers)) for r in got) == want
    assert all(r.partition == partition_for_key(r.key, 4) for r in got)


@pytest.mark.parametrize("way", ["wire", "files"])
def test_replay_on_the_cluster(cluster: StandaloneCluster, topics: Any, tmp_path: Path,
                               way: str) -> None:  # fmt: skip
    import pyarrow.parquet as pq

    source = (["--bootstrap-server", topics.bootstrap] if way == "wire"
              else ["--log-dir", str(topics.log_dir)])  # fmt: skip
    cmd = [sys.executable, "-m", "tidelog", "replay", *source, "--topics", "in",
           "--master", cluster.url, "--output", str(tmp_path / "out"), "--no-report"]  # fmt: skip
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"replayed {N:,} records" in done.stdout
    table = pq.read_table(tmp_path / "out" / "records")
    assert table.num_rows == N
    assert sorted(table.column("value").to_pylist()) == sorted(b"v%d" % i for i in range(N))


def test_orders_pipeline_by_spark_submit(cluster: StandaloneCluster, topics: Any,
                                         tmp_path: Path) -> None:  # fmt: skip
    orders = make_orders(1200)
    produce_orders(topics.bootstrap, "orders", orders)
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url,
           "--conf", "spark.executor.memory=512m", str(ROOT / "scripts" / "orders_pipeline.py"),
           "--bootstrap-server", topics.bootstrap, "--checkpoint", str(tmp_path / "cp"),
           "--available-now", "--at-least-once"]  # fmt: skip
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    want = expected_windows(orders)
    got = read_windows(topics.bootstrap, "orders-by-minute", "read_uncommitted", len(want))
    assert Counter((c, w) for c, w, _, _ in got) == Counter(want.keys())  # no failure: once
    assert {(c, w): (n, a) for c, w, n, a in got} == want
