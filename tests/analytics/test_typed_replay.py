"""``tidelog replay --decode``: registry-encoded topics replayed into typed Parquet columns,
several schema versions in one table with the evolved schema, undecodable records in the side
table, and the report's "Schemas over time" table (offline, from the log dir's _schemas)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import pytest

from tests.schema_registry.conftest import start_registry
from tests.schema_registry.typed_data import produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_replay_decodes_into_typed_columns(spark, broker_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    from tidelog.analytics.replay import main as replay_main

    # ``spark``: the module's session (with the connector jars) is the one replay gets, as only
    # the first session of a process puts jars on the driver's classpath

    registry = start_registry(broker_factory)
    produce(registry.broker.bootstrap, registry.url)
    assert registry.broker.stop() == 0
    out = tmp_path / "out"
    code = replay_main(
        [
            "--log-dir", str(registry.broker.log_dir), "--topics", "payments,orders",
            "--decode", "payments=decoded,orders=both", "--output", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    payments = sorted(
        pq.read_table(out / "decoded" / "payments").to_pylist(), key=lambda r: r["offset"]
    )
    assert [r["offset"] for r in payments] == [0, 1, 2, 3]
    assert [r["value_schema_id"] for r in payments] == [1, 1, 1, 2]
    assert payments[0]["value"]["id"] == "a0" and payments[0]["value"]["note"] is None
    last = payments[3]["value"]
    assert last["tags"] == [("x", 1)] and last["items"] == [{"sku": "s1"}]
    assert last["day"] == dt.date(2026, 1, 2) and last["amount"] == decimal.Decimal("12.34")
    orders = pq.read_table(out / "decoded" / "orders").to_pylist()
    assert sorted(r["value_decoded"]["id"] for r in orders) == ["o0", "o1"]
    assert all(isinstance(r["value"], bytes) for r in orders)  # "both" keeps the bytes
    side = pq.read_table(out / "undecodable").to_pylist()
    assert sorted(r["offset"] for r in side) == [4, 5]
    assert all(r["decode_error"] and r["value"] for r in side)
    versions = json.loads((out / "analytics" / "schema_versions.json").read_text())
    seen = [(v["topic"], v["subject"], v["version"], v["records"]) for v in versions]
    assert seen == [
        ("orders", "orders-value", 1, 2),
        ("payments", "payments-value", 1, 3),
        ("payments", "payments-value", 2, 1),
    ]
    decoding = json.loads((out / "analytics" / "decoding.json").read_text())
    assert {(d["topic"], d["decoded"], d["undecodable"]) for d in decoding} == {
        ("orders", 2, 0),
        ("payments", 4, 2),
    }
    assert "Schemas over time" in (out / "report.html").read_text()


def test_source_options_give_typed_columns(spark, broker_factory) -> None:  # type: ignore[no-untyped-def]
    """The ``tidelog`` source itself: ``decode`` and ``schemaRegistryUrl`` (over the wire) or
    the log dir's _schemas (files); undecodable records stay, with ``decode_error``."""
    registry = start_registry(broker_factory)
    produce(registry.broker.bootstrap, registry.url)
    df = (
        spark.read.format("tidelog")
        .option("kafka.bootstrap.servers", registry.broker.bootstrap)
        .option("subscribe", "payments")
        .option("decode", "payments=decoded")
        .option("schemaRegistryUrl", registry.url)
        .load()
    )
    assert df.schema["value"].dataType.simpleString().startswith("struct<id:string,cents:bigint")
    rows = sorted(df.collect(), key=lambda r: r["offset"])
    assert [r["value"]["id"] if r["value"] else None for r in rows] == [
        "a0", "a1", "a2", "b0", None, None,
    ]  # fmt: skip
    assert [r["value_schema_id"] for r in rows] == [1, 1, 1, 2, None, None]
    assert [bool(r["decode_error"]) for r in rows] == [False] * 4 + [True] * 2
    assert rows[5]["undecoded_value"] == b"not framed at all"
    assert registry.broker.stop() == 0
    both = (
        spark.read.format("tidelog")
        .option("path", str(registry.broker.log_dir))
        .option("subscribe", "orders")
        .option("decode", "orders=both")
        .load()
    )
    got = sorted((r["value_decoded"]["id"], r["value_schema_id"]) for r in both.collect())
    assert got == [("o0", 3), ("o1", 3)]
