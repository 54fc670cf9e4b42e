"""Analytics tables over replayed records (a DataFrame of the Kafka source's schema).

Every table is small (one row per topic, partition, minute or top key), so it is collected to
the driver and written there as Parquet and JSON. A record's size is len(key) + len(value), as
most Kafka tools count it; a tombstone is a record whose value is null.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP_KEYS = 20


@dataclass(frozen=True, slots=True)
class Tables:
    """Each table is a list of JSON-ready rows."""

    topics: list[dict[str, Any]]
    partitions: list[dict[str, Any]]
    per_minute: list[dict[str, Any]]
    record_sizes: list[dict[str, Any]]
    size_histogram: list[dict[str, Any]]
    top_keys: list[dict[str, Any]]
    key_skew: list[dict[str, Any]]
    group_lag: list[dict[str, Any]]
    #: Per topic and field: the registry subject, version and schema id of the records, with
    #: their counts and first/last offsets and times (typed replay; empty without a registry).
    schema_versions: list[dict[str, Any]] = field(default_factory=list)
    #: Per topic: records decoded and records kept in the side table (typed replay).
    decoding: list[dict[str, Any]] = field(default_factory=list)

    def named(self) -> dict[str, list[dict[str, Any]]]:
        return {f: getattr(self, f) for f in self.__slots__}

    @property
    def total_records(self) -> int:
        return sum(int(r["records"]) for r in self.topics)

    @property
    def total_bytes(self) -> int:
        return sum(int(r["bytes"]) for r in self.topics)


def render_key(key: bytes | None) -> str:
    """A key as a person reads it: text when it is printable UTF-8, else hex."""
    if key is None:
        return "(null)"
    try:
        text = key.decode("utf-8")
        if text.isprintable():
            return text
    except UnicodeDecodeError:
        pass
    return "0x" + key.hex()


_TIME_COLUMNS = ("first_timestamp", "last_timestamp", "minute")


def _rows(df: Any) -> list[dict[str, Any]]:
    """Collected rows; time columns (epoch ms from Spark) become aware UTC datetimes, so no
    local time zone of the driver gets in."""
    rows = [r.asDict() for r in df.collect()]
    for r in rows:
        for c in _TIME_COLUMNS:
            if r.get(c) is not None:
                r[c] = dt.datetime.fromtimestamp(r[c] / 1000, dt.UTC)
    return rows


def compute(
    df: Any,
    lag: list[dict[str, Any]] | None = None,
    partitions_read: Iterable[tuple[str, int]] = (),
) -> Tables:
    """All tables for `df` in three Spark jobs (persist `df` first): one grouping-sets pass for
    partitions, minutes and size buckets, one for size percentiles, one for keys.

    ``partitions_read`` names every (topic, partition) the replay read, records or not: a
    partition with no record in `df` still gets its row (zero records), so the per-partition
    tables, the skew and the charts count it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    bucket = F.when(size <= 0, 0).otherwise(F.floor(F.log2(size)) + 1).cast("int")
    r = df.select(
        "topic",
        "partition",
        "offset",
        "key",
        size.alias("size"),
        bucket.alias("bucket"),
        F.unix_millis("timestamp").alias("ts_ms"),
        F.unix_millis(F.date_trunc("minute", "timestamp")).alias("minute"),
        F.col("key").isNull().cast("long").alias("null_key"),
        F.col("value").isNull().cast("long").alias("tombstone"),
    )
    sets = [["topic", "partition"], ["topic", "minute"], ["topic", "bucket"]]
    grouped = _rows(
        r.groupingSets(sets, "topic", "partition", "minute", "bucket").agg(
            F.grouping_id().alias("gid"),
            F.count(F.lit(1)).alias("records"),
            F.sum("size").alias("bytes"),
            F.min("ts_ms").alias("first_timestamp"),
            F.max("ts_ms").alias("last_timestamp"),
            F.sum("null_key").alias("null_keys"),
            F.sum("tombstone").alias("tombstones"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
        )
    )
    part_cols = [
        "topic",
        "partition",
        "records",
        "bytes",
        "first_timestamp",
        "last_timestamp",
        "null_keys",
        "tombstones",
        "first_offset",
        "last_offset",
    ]
    rows = {
        (g["topic"], g["partition"]): {c: g[c] for c in part_cols}
        for g in grouped
        if g["partition"] is not None
    }
    for topic, partition in partitions_read:
        rows.setdefault((topic, partition), _empty_partition(topic, partition))
    partitions = [rows[k] for k in sorted(rows)]
    per_minute = sorted(
        (
            {
                "topic": g["topic"],
                "minute": g["minute"],
                "records": g["records"],
                "bytes": g["bytes"],
            }
            for g in grouped
            if g["minute"] is not None
        ),
        key=lambda g: (g["topic"], g["minute"]),
    )
    hist = []
    for g in sorted(
        (g for g in grouped if g["bucket"] is not None), key=lambda g: (g["topic"], g["bucket"])
    ):
        b = g["bucket"]  # bucket b holds sizes in [2^(b-1), 2^b)
        lo, hi = (0, 1) if b == 0 else (2 ** (b - 1), 2**b)
        hist.append({"topic": g["topic"], "records": g["records"], "size_from": lo, "size_to": hi})
    topics = _topics_of(partitions)
    qs = [0.5, 0.9, 0.99]
    sizes = []
    for row in _rows(
        r.groupBy("topic")
        .agg(
            F.min("size").alias("min"),
            F.max("size").alias("max"),
            F.avg("size").alias("mean"),
            F.percentile_approx("size", qs, 10000).alias("pct"),
        )
        .orderBy("topic")
    ):
        pct = row.pop("pct") or [None] * len(qs)
        row.update({"p50": pct[0], "p90": pct[1], "p99": pct[2]})
        row["mean"] = round(float(row["mean"] or 0), 2)
        sizes.append(row)
    key_counts = r.where(F.col("key").isNotNull()).groupBy("topic", "key").count()
    by_topic = Window.partitionBy("topic")
    ranked = _rows(
        key_counts.withColumn(
            "rank", F.row_number().over(by_topic.orderBy(F.desc("count"), F.asc("key")))
        )
        .withColumn("distinct_keys", F.count(F.lit(1)).over(by_topic))
        .withColumn("max_key_records", F.max("count").over(by_topic))
        .withColumn("mean_key_records", F.avg("count").over(by_topic))
        .where(F.col("rank") <= TOP_KEYS)
        .orderBy("topic", "rank")
    )
    totals = {t["topic"]: int(t["records"]) for t in topics}
    top_keys = [
        {
            "topic": k["topic"],
            "rank": k["rank"],
            "key": render_key(k["key"]),
            "records": k["count"],
            "share": round(k["count"] / max(totals[k["topic"]], 1), 4),
        }
        for k in ranked
    ]
    skew_by_topic = {k["topic"]: k for k in ranked if k["rank"] == 1}
    per_part: dict[str, list[int]] = {}
    for p in partitions:
        per_part.setdefault(p["topic"], []).append(int(p["records"]))
    key_skew = []
    for t in topics:
        s = skew_by_topic.get(t["topic"], {})
        mean = float(s.get("mean_key_records") or 0)
        top = int(s.get("max_key_records") or 0)
        counts = per_part.get(t["topic"], [0])
        t["distinct_keys"] = int(s.get("distinct_keys") or 0)
        key_skew.append(
            {
                "topic": t["topic"],
                "distinct_keys": t["distinct_keys"],
                "max_key_records": top,
                "mean_key_records": round(mean, 2),
                "key_skew": round(top / mean, 3) if mean else None,
                "partition_skew": round(max(counts) / (sum(counts) / len(counts)), 3)
                if sum(counts)
                else None,
            }
        )
    return Tables(topics, partitions, per_minute, sizes, hist, top_keys, key_skew, lag or [])


def _empty_partition(topic: str, partition: int) -> dict[str, Any]:
    """The row of a partition the replay read no record from."""
    return {
        "topic": topic,
        "partition": partition,
        "records": 0,
        "bytes": 0,
        "first_timestamp": None,
        "last_timestamp": None,
        "null_keys": 0,
        "tombstones": 0,
        "first_offset": None,
        "last_offset": None,
    }


def _topics_of(partitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-topic totals, summed from the per-partition rows (no Spark job)."""
    out: dict[str, dict[str, Any]] = {}
    for p in partitions:
        t = out.setdefault(
            p["topic"],
            {
                "topic": p["topic"],
                "records": 0,
                "bytes": 0,
                "first_timestamp": None,
                "last_timestamp": None,
                "null_keys": 0,
                "tombstones": 0,
                "partitions": 0,
                "distinct_keys": 0,
            },
        )
        for k in ("records", "bytes", "null_keys", "tombstones"):
            t[k] += int(p[k] or 0)
        t["partitions"] += 1
        if p["first_timestamp"] is not None:
            first, last = t["first_timestamp"], t["last_timestamp"]
            t["first_timestamp"] = (
                min(first, p["first_timestamp"]) if first else p["first_timestamp"]
            )
            t["last_timestamp"] = max(last, p["last_timestamp"]) if last else p["last_timestamp"]
    return [out[k] for k in sorted(out)]


def group_lag(
    bootstrap: str,
    group: str,
) -> tuple[list[dict[str, Any]], str | None]:
    """A consumer group's lag per partition, over the wire. Returns (rows, error or None):
    a broker without group support gives an explanation, not a crash."""
    try:
        from kafka import KafkaConsumer
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="tidelog-replay")
        try:
            if hasattr(admin, "list_group_offsets"):  # kafka-python 3
                committed = admin.list_group_offsets({group: None}).get(group, {})
            else:  # kafka-python 2
                committed = admin.list_consumer_group_offsets(group)
        finally:
            admin.close()
        if not committed:
            return [], f"group {group!r} has no committed offsets"
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        try:
            ends = consumer.end_offsets(list(committed))
        finally:
            consumer.close()
    except Exception as e:  # any client or broker failure: report it, keep the replay
        return [], f"could not read the lag of group {group!r}: {type(e).__name__}: {e}"
    rows = []
    for tp, meta in sorted(committed.items()):
        end = int(ends.get(tp, 0))
        off = int(meta.offset)
        rows.append(
            {
                "group": group,
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": off,
                "end_offset": end,
                "lag": max(end - off, 0) if off >= 0 else end,
            }
        )
    return rows, None


def _jsonable(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.UTC).isoformat() if v.tzinfo else v.isoformat() + "Z"
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, bytes):
        return render_key(v)
    return v


def _clean(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: _jsonable(v) for k, v in r.items()} for r in rows]


def write(tables: Tables, out: Path) -> list[Path]:
    """Each table as `<out>/<name>.parquet` and `<out>/<name>.json`; returns the paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rows in tables.named().items():
        clean = _clean(rows)
        (out / f"{name}.json").write_text(json.dumps(clean, indent=1) + "\n")
        table = pa.Table.from_pylist(rows) if rows else pa.table({})
        pq.write_table(table, out / f"{name}.parquet")
        paths += [out / f"{name}.parquet", out / f"{name}.json"]
    return paths
