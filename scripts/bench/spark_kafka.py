#!/usr/bin/env python3
"""Benchmark Spark's own Kafka connector (`format("kafka")`, spark-sql-kafka-0-10 from
tests/jvm/spark-kafka, fetched by scripts/jvm-deps) against tidelog, next to the `tidelog` data
source and sink on the same records: batch read (a `noop` write of every column) and batch write.

    .venv/bin/python scripts/bench/spark_kafka.py                   # starts its own broker
    .venv/bin/python scripts/bench/spark_kafka.py --records 200000 --master local[2]

Prints records/s for each format and way. Spark's start-up is not timed; best of --runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay import TOPIC, log, produce, start_broker  # noqa: E402

from tests.support.jvm import spark_connector_jars  # noqa: E402


def best_of(runs: int, body: Any) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        body()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100, help="value bytes (default 100)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    jars = spark_connector_jars()
    if not jars:
        raise SystemExit("bench: Spark's Kafka connector is not fetched: run scripts/jvm-deps")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log_dir = Path(tempfile.mkdtemp(prefix="tidelog-bench-"))
    proc, bootstrap = start_broker(log_dir)
    try:
        produce(bootstrap, args.records, args.size, args.partitions)
        from kafka.admin import KafkaAdminClient, NewTopic
        from pyspark.sql import SparkSession

        import tidelog.analytics as analytics

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics(
            [NewTopic(f"out-{f}", args.partitions, 1) for f in ("kafka", "tidelog")]
        )
        admin.close()
        spark = (SparkSession.builder.master(args.master).config("spark.jars", jars)
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
                 .getOrCreate())  # fmt: skip
        spark.sparkContext.setLogLevel("ERROR")
        analytics.register(spark)
        rows: dict[str, dict[str, float]] = {}
        source = (
            spark.range(args.records, numPartitions=args.partitions)
            .selectExpr(
                "CAST(CAST(id AS STRING) AS BINARY) AS key",
                f"CAST(repeat('x', {args.size}) AS BINARY) AS value",
            )
            .cache()
        )
        source.count()
        for fmt in ("kafka", "tidelog"):

            def read(fmt: str = fmt) -> None:
                df = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                      .option("subscribe", TOPIC).load())  # fmt: skip
                df.write.format("noop").mode("overwrite").save()

            def write(fmt: str = fmt) -> None:
                (source.write.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", f"out-{fmt}").mode("append").save())  # fmt: skip

            log(f"format({fmt!r}) ...")
            rows[fmt] = {"read": args.records / best_of(args.runs, read),
                         "write": args.records / best_of(args.runs, write)}  # fmt: skip
        spark.stop()
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"{args.records:,} records of {args.size} B, {args.partitions} partitions, {args.master}")
    print("| format | batch read (records/s) | batch write (records/s) |")
    print("|---|---|---|")
    for fmt, r in rows.items():
        print(f"| `{fmt}` | {r['read']:,.0f} | {r['write']:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
