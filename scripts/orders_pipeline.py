#!/usr/bin/env python3
"""The worked pipeline: orders per customer per minute, exactly once, topic to topic.

    spark-submit [--master spark://HOST:PORT] scripts/orders_pipeline.py \\
        --bootstrap-server 127.0.0.1:9092 --checkpoint /tmp/orders-cp

Reads topic `orders` (key: customer, value: JSON {"amount": 12.5}, the record timestamp is
the event time) as a stream, counts orders and sums amounts per customer in one-minute windows
(a window is final once the watermark, the newest event time minus --lateness, passes its end),
and writes each final window once to `orders-by-minute` (key: customer, value: JSON
{"customer", "window_start", "window_end", "orders", "amount"}) with exactlyOnce=true:
read_committed consumers see every window exactly once, also after the driver is killed and
the query restarted from its checkpoint. --at-least-once drops the transactions (for brokers
without them: a restart may then repeat a window).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build(spark: Any, args: argparse.Namespace) -> Any:
    from pyspark.sql import functions as F

    orders = (
        spark.readStream.format("tidelog")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
    )
    parsed = orders.select(
        F.col("key").cast("string").alias("customer"),
        F.get_json_object(F.col("value").cast("string"), "$.amount").cast("double").alias("amount"),
        F.col("timestamp"),
    )
    windows = (
        parsed.withWatermark("timestamp", args.lateness)
        .groupBy(F.window("timestamp", args.window).alias("w"), "customer")
        .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("amount"))
    )
    value = F.to_json(
        F.struct(
            "customer",
            F.date_format("w.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            F.date_format("w.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            "orders",
            "amount",
        )
    )
    out = windows.select(F.col("customer").alias("key"), value.alias("value"))
    writer = (
        out.writeStream.format("tidelog")
        .outputMode("append")
        .queryName("orders_by_minute")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("topic", args.output)
        .option("exactlyOnce", "false" if args.at_least_once else "true")
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=f"{args.trigger_seconds} seconds")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--checkpoint", required=True, metavar="DIR", help="the query's checkpoint")
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    p.add_argument("--input", default="orders")
    p.add_argument("--output", default="orders-by-minute")
    p.add_argument("--window", default="1 minute")
    p.add_argument("--lateness", default="1 minute", help="watermark delay")
    p.add_argument("--max-offsets-per-trigger", type=int, default=10_000)
    p.add_argument("--trigger-seconds", type=int, default=5)
    p.add_argument("--available-now", action="store_true",
                   help="process what is there, then stop (default: run until killed)")  # fmt: skip
    p.add_argument("--at-least-once", action="store_true", help="no transactions")
    p.add_argument("--shuffle-partitions", type=int, default=4)
    args = p.parse_args(argv)

    from tidelog.analytics.replay import spark_session

    spark = spark_session(args.master or None, app="tidelog-orders-pipeline",
                          local_default="local[2]")  # fmt: skip
    spark.conf.set("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
    query = build(spark, args).start()
    print(f"orders pipeline: query {query.id} running ({args.input} -> {args.output}, "
          f"{'at least once' if args.at_least_once else 'exactly once'})", flush=True)  # fmt: skip
    query.awaitTermination()
    if query.exception() is not None:
        print(f"orders pipeline failed: {query.exception()}", file=sys.stderr)
        return 1
    batches = query.lastProgress["batchId"] if query.lastProgress else -1
    print(f"orders pipeline: done (last micro-batch {batches})", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
