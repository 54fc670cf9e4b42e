#!/usr/bin/env python3
"""Benchmark the Spark replay: N records of S bytes, read from files and over the wire by the
`tidelog` data source, next to one plain kafka-python consumer reading the same records.

    .venv/bin/python scripts/bench/replay.py                 # starts its own broker
    .venv/bin/python scripts/bench/replay.py --records 200000
    .venv/bin/python scripts/bench/replay.py --bootstrap-server H:P --log-dir DIR  # a running one

Prints records/s for each way in and the ratios to the plain consumer (target: files >= 3x).
Spark's start-up is not timed; planning and reading are (each timed run reads every column of
every record: a `noop` write).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tidelog.analytics.logdir import read_checkpoint  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_broker import start_broker  # noqa: E402

TOPIC = "bench-replay"


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def produce(bootstrap: str, n: int, size: int, partitions: int) -> None:
    import confluent_kafka as ck
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])
    admin.close()
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    body = os.urandom(size)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, body, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    if p.flush(120):
        raise SystemExit("bench: produce did not finish")
    log(f"produced {n:,} records of {size} B in {time.perf_counter() - t0:.1f} s")


def wait_checkpoint(log_dir: Path, n: int, partitions: int) -> None:
    deadline = time.monotonic() + 90  # a broker's default checkpoint interval is 60 s
    while time.monotonic() < deadline:
        hw = read_checkpoint(log_dir / "replication-offset-checkpoint")
        if sum(hw.get((TOPIC, p), 0) for p in range(partitions)) >= n:
            return
        time.sleep(0.5)
    raise SystemExit(f"bench: the HW checkpoint in {log_dir} never covered {n} records")


def plain_consumer(bootstrap: str, n: int, partitions: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning()
    got = size = 0
    t0 = time.perf_counter()
    while got < n:
        for recs in c.poll(timeout_ms=1000).values():
            got += len(recs)
            size += sum(len(r.value) for r in recs)
    dt = time.perf_counter() - t0
    c.close()
    return got / dt


def spark_run(spark: Any, options: dict[str, str], n: int, runs: int) -> float:
    """Best of `runs` (the first run also warms the JVM's JIT)."""
    best = float("inf")
    for _ in range(runs):
        df = spark.read.format("tidelog").options(**options).load()
        t0 = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        best = min(best, time.perf_counter() - t0)
    dt = best
    got = spark.read.format("tidelog").options(**options).load().count()
    if got != n:
        raise SystemExit(f"bench: read {got} records, expected {n}")
    return n / dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100, help="value bytes (default 100)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--split", type=int, default=125_000, help="maxRecordsPerPartition")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--runs", type=int, default=2, help="timed runs per way in; best counts")
    ap.add_argument("--bootstrap-server", help="use this broker (with --log-dir) ...")
    ap.add_argument("--log-dir", help="... whose log dir this is; the topic must not exist")
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    proc = None
    if args.bootstrap_server and args.log_dir:
        bootstrap, log_dir = args.bootstrap_server, Path(args.log_dir)
    else:
        log_dir = Path(tempfile.mkdtemp(prefix="tidelog-bench-"))
        proc, bootstrap = start_broker(
            log_dir, ["log.flush.offset.checkpoint.interval.ms=1000"], timeout_s=30
        )
        log(f"broker at {bootstrap}, log dir {log_dir}")
    try:
        produce(bootstrap, args.records, args.size, args.partitions)
        wait_checkpoint(log_dir, args.records, args.partitions)
        log("plain kafka-python consumer ...")
        plain = max(
            plain_consumer(bootstrap, args.records, args.partitions) for _ in range(args.runs)
        )
        from pyspark.sql import SparkSession

        import tidelog.analytics as analytics

        spark = (
            SparkSession.builder.master(args.master)
            .appName("tidelog-bench")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        analytics.register(spark)
        common = {"subscribe": TOPIC, "maxRecordsPerPartition": str(args.split)}
        files = {"path": str(log_dir), **common}
        wire = {"kafka.bootstrap.servers": bootstrap, **common}
        warm = {
            "path": str(log_dir),
            "subscribe": TOPIC,
            "endingOffsets": json.dumps({TOPIC: {"0": 10}}),
        }
        spark.read.format("tidelog").options(**warm).load().count()  # start Python workers
        log("Spark replay from files ...")
        from_files = spark_run(spark, files, args.records, args.runs)
        log("Spark replay over the wire ...")
        over_wire = spark_run(spark, wire, args.records, args.runs)
        cores = spark.sparkContext.defaultParallelism
        spark.stop()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    load = os.getloadavg()[0]
    print(
        f"\nreplay benchmark: {args.records:,} records of {args.size} B, "
        f"{args.partitions} partitions, Spark {args.master} ({cores} cores), best of "
        f"{args.runs}, load average {load:.1f}"
    )
    print(f"  plain kafka-python consumer : {plain:>10,.0f} records/s")
    print(
        f"  Spark replay from files     : {from_files:>10,.0f} records/s  "
        f"({from_files / plain:.1f}x the plain consumer)"
    )
    print(
        f"  Spark replay over the wire  : {over_wire:>10,.0f} records/s  "
        f"({over_wire / plain:.1f}x the plain consumer)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
