#!/usr/bin/env python3
"""Benchmark the Spark sink and the orders pipeline.

    .venv/bin/python scripts/bench/sink.py --records 100000          # sink vs kafka-python
    .venv/bin/python scripts/bench/sink.py --pipeline --orders 20000 # pipeline: local[2], cluster

Sink: N records (key: one of 1,000, value: S bytes) written to a 3-partition topic by
`df.write.format("tidelog")` on local[2] (the DataFrame is cached first; Spark's start-up is not
timed), next to one kafka-python producer alone sending the same records with the same settings
(idempotent, acks=all). Pipeline: scripts/orders_pipeline.py --available-now --at-least-once
over N orders, wall time of the whole spark-submit (Spark start-up included) on local[2] and on a
standalone cluster of two 1-core workers (the cluster's own start-up not timed). Starts its own
broker; prints one JSON line per figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "analytics"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_broker import start_broker  # noqa: E402


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def create(bootstrap: str, **topics: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()])
    admin.close()


def bench_sink(bootstrap: str, n: int, size: int) -> list[dict[str, Any]]:
    from kafka import KafkaProducer

    from tidelog.analytics.replay import spark_session

    create(bootstrap, **{"bench-sink-python": 3, "bench-sink-spark": 3})
    value = b"x" * size
    keys = [b"key-%d" % (i % 1000) for i in range(n)]
    p = KafkaProducer(bootstrap_servers=bootstrap)
    t0 = time.perf_counter()
    for k in keys:
        p.send("bench-sink-python", key=k, value=value)
    p.flush()
    python_s = time.perf_counter() - t0
    p.close()
    spark = spark_session("local[2]", app="tidelog-bench-sink")
    df = spark.range(n, numPartitions=2).selectExpr(
        "CAST(concat('key-', CAST(id % 1000 AS STRING)) AS BINARY) AS key",
        f"CAST(repeat('x', {size}) AS BINARY) AS value",
    )
    df = df.cache()
    df.count()
    t0 = time.perf_counter()
    (df.write.format("tidelog").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", "bench-sink-spark").save())  # fmt: skip
    spark_s = time.perf_counter() - t0
    spark.stop()
    return [
        {"figure": "kafka-python producer alone", "records": n, "bytes": size,
         "seconds": round(python_s, 2), "records_per_s": round(n / python_s)},
        {"figure": "sink df.write.format('tidelog') local[2]", "records": n, "bytes": size,
         "seconds": round(spark_s, 2), "records_per_s": round(n / spark_s)},
    ]  # fmt: skip


def bench_pipeline(bootstrap: str, n: int, work: Path) -> list[dict[str, Any]]:
    from orders import expected_windows, make_orders, produce_orders, read_windows
    from spark_cluster import StandaloneCluster, spark_home

    orders = make_orders(n)
    want = expected_windows(orders)
    out: list[dict[str, Any]] = []
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")

    def run(master: str, name: str) -> None:
        create(bootstrap, **{f"orders-{name}": 3, f"orders-by-minute-{name}": 3})
        produce_orders(bootstrap, f"orders-{name}", orders)
        cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", master,
               "--conf", "spark.executor.memory=512m", str(ROOT / "scripts" / "orders_pipeline.py"),
               "--bootstrap-server", bootstrap, "--checkpoint", str(work / f"cp-{name}"),
               "--input", f"orders-{name}", "--output", f"orders-by-minute-{name}",
               "--available-now", "--at-least-once"]  # fmt: skip
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        wall = time.perf_counter() - t0
        got = read_windows(bootstrap, f"orders-by-minute-{name}", "read_uncommitted", len(want))
        assert {(c, w): (k, a) for c, w, k, a in got} == want, "wrong windows"
        out.append({"figure": f"orders pipeline wall time, {name}", "orders": n,
                    "windows": len(want), "seconds": round(wall, 1)})  # fmt: skip
        log(json.dumps(out[-1]))

    run("local[2]", "local2")
    with StandaloneCluster(workers=2, cores=1, memory="1g", work_dir=work / "cluster") as c:
        run(c.url, "cluster-2-workers")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--pipeline", action="store_true")
    ap.add_argument("--orders", type=int, default=20_000)
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="tidelog-bench-sink-"))
    (work / "data").mkdir()
    proc, bootstrap = start_broker(work / "data")
    try:
        rows = (bench_pipeline(bootstrap, args.orders, work) if args.pipeline
                else bench_sink(bootstrap, args.records, args.size))  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(30)
    load = os.getloadavg()[0]
    for r in rows:
        r["load_avg_1m"] = round(load, 1)
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
