"""Spark's own ``from_avro`` (``org.apache.spark:spark-avro_2.13``, fetched by scripts/jvm-deps
into tests/jvm/spark-avro) over records a registry serializer wrote through tidelog: the
registry's 5-byte header cut off, the schema fetched from tidelog's registry by id. The rows
equal the typed replay's. Skips with one line when the artifact is not fetched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.schema_registry.conftest import start_registry
from tests.support.jvm import spark_avro_fetched

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_from_avro_reads_registry_framed_records(spark: Any, broker_factory: Any) -> None:
    if not spark_avro_fetched():
        pytest.skip("JVM test: spark-avro_2.13 is not fetched (run scripts/jvm-deps)")
    import requests
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    from tidelog.analytics.schemas import SchemaCatalog, TopicDecoder, decode

    registry = start_registry(broker_factory)
    schema = {
        "type": "record",
        "name": "Click",
        "fields": [
            {"name": "page", "type": "string"},
            {"name": "ms", "type": "long"},
            {"name": "ref", "type": ["null", "string"], "default": None},
        ],
    }
    client = SchemaRegistryClient({"url": registry.url})
    serializer = AvroSerializer(client, json.dumps(schema))
    producer = Producer({"bootstrap.servers": registry.broker.bootstrap})
    ctx = SerializationContext("clicks", MessageField.VALUE)
    rows = [{"page": f"/p{i}", "ms": i * 10, "ref": None if i % 2 else "x"} for i in range(5)]
    for row in rows:
        producer.produce("clicks", value=serializer(row, ctx))
    assert producer.flush(30) == 0

    df = (
        spark.read.format("tidelog")
        .option("kafka.bootstrap.servers", registry.broker.bootstrap)
        .option("subscribe", "clicks")
        .load()
    )
    latest = requests.get(f"{registry.url}/subjects/clicks-value/versions/latest", timeout=30)
    writer_schema = latest.json()["schema"]
    # Spark's from_avro knows no registry header: cut the magic byte and the 4-byte id off
    decoded = df.select(
        "offset", from_avro(F.expr("substring(value, 6)"), writer_schema).alias("click")
    )
    got = [r.asDict(recursive=True)["click"] for r in decoded.orderBy("offset").collect()]
    assert got == rows
    ours, bad = decode(
        df, TopicDecoder.for_topic(SchemaCatalog.from_url(registry.url), "clicks", "decoded")
    )
    assert bad.count() == 0
    assert [r.asDict(recursive=True)["value"] for r in ours.orderBy("offset").collect()] == got
