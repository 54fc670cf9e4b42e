"""confluent-kafka's ``SchemaRegistryClient`` and its Avro, Protobuf and JSON Schema
serializers against tidelog's registry: records produced through tidelog with the registry's
framing come back equal through the deserializers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.schema_registry.conftest import Registry
from tests.schema_registry.typed_data import order_class

pytestmark = pytest.mark.integration

sr = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402


def roundtrip(
    registry: Registry, topic: str, values: list[Any], serializer: Any, deserializer: Any
) -> list[Any]:
    producer = Producer({"bootstrap.servers": registry.broker.bootstrap})
    for value in values:
        ctx = SerializationContext(topic, MessageField.VALUE)
        producer.produce(topic, value=serializer(value, ctx))
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": registry.broker.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    out: list[Any] = []
    try:
        for _ in range(200):
            if len(out) == len(values):
                break
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            raw = msg.value()
            assert raw[0] == 0  # the registry framing: magic 0, then the 4-byte id
            out.append(deserializer(raw, SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return out


def test_client_calls(module_registry: Registry) -> None:
    client = sr.SchemaRegistryClient({"url": module_registry.url})
    schema = sr.Schema(
        json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}),
        "AVRO",
    )
    schema_id = client.register_schema("calls-value", schema)
    assert client.get_schema(schema_id).schema_type == "AVRO"
    latest = client.get_latest_version("calls-value")
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    assert client.lookup_schema("calls-value", schema).version == 1
    assert client.get_subjects() == ["calls-value"] or "calls-value" in client.get_subjects()
    assert client.get_versions("calls-value") == [1]
    assert client.set_compatibility("calls-value", "FULL")["compatibility"] == "FULL"
    assert client.get_compatibility("calls-value") == "FULL"
    wider = sr.Schema(
        json.dumps(
            {
                "type": "record",
                "name": "R",
                "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}],
            }
        ),
        "AVRO",
    )
    assert client.test_compatibility("calls-value", wider) is False
    with pytest.raises(sr.error.SchemaRegistryError) as caught:
        client.register_schema("calls-value", wider)
    assert caught.value.http_status_code == 409 and caught.value.error_code == 409
    with pytest.raises(sr.error.SchemaRegistryError) as caught:
        client.get_version("calls-value", 5)
    assert caught.value.error_code == 40402
    assert client.delete_version("calls-value", 1) == 1
    assert client.delete_subject("calls-value", permanent=True) == [1]


def test_avro_serializer(module_registry: Registry) -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    client = sr.SchemaRegistryClient({"url": module_registry.url})
    schema = json.dumps(
        {
            "type": "record",
            "name": "Payment",
            "fields": [
                {"name": "id", "type": "string"},
                {"name": "cents", "type": "long"},
                {"name": "note", "type": ["null", "string"], "default": None},
                {"name": "tags", "type": {"type": "array", "items": "string"}},
            ],
        }
    )
    values = [
        {"id": "p1", "cents": 1250, "note": None, "tags": []},
        {"id": "p2", "cents": -3, "note": "refund", "tags": ["x", "y"]},
    ]
    got = roundtrip(
        module_registry,
        "payments-avro",
        values,
        AvroSerializer(client, schema),
        AvroDeserializer(client),
    )
    assert got == values
    assert client.get_latest_version("payments-avro-value").version == 1


def test_json_serializer(module_registry: Registry) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    client = sr.SchemaRegistryClient({"url": module_registry.url})
    schema = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Reading",
            "type": "object",
            "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}},
            "required": ["sensor"],
        }
    )
    values = [{"sensor": "s1", "value": 1.5}, {"sensor": "s2", "value": -2}]
    got = roundtrip(
        module_registry,
        "readings-json",
        values,
        JSONSerializer(schema, client),
        JSONDeserializer(schema, schema_registry_client=client),
    )
    assert got == values


def test_protobuf_serializer(module_registry: Registry) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    client = sr.SchemaRegistryClient({"url": module_registry.url})
    order = order_class()
    values = [order(id="o1", cents=990, skus=["a"]), order(id="o2", cents=5, skus=[])]
    got = roundtrip(
        module_registry,
        "orders-proto",
        values,
        ProtobufSerializer(order, client, {"use.deprecated.format": False}),
        ProtobufDeserializer(order, {"use.deprecated.format": False}, client),
    )
    assert [(o.id, o.cents, list(o.skus)) for o in got] == [("o1", 990, ["a"]), ("o2", 5, [])]
    text = client.get_latest_version("orders-proto-value").schema.schema_str
    assert "message Order" in text and "repeated string skus = 3;" in text


def test_protobuf_references_and_well_known_imports(module_registry: Registry) -> None:
    """An import of another file becomes a reference (registered under its own subject by
    the serializer); google/protobuf/*.proto imports resolve without one."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    pool = descriptor_pool.DescriptorPool()
    well_known = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(well_known)
    pool.Add(well_known)
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop")
    money.syntax = "proto3"
    money.message_type.add(name="Money").field.add(name="cents", number=1, type=3, label=1)
    pool.Add(money)
    order = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop")
    order.syntax = "proto3"
    order.dependency.extend(["google/protobuf/timestamp.proto", "shop/money.proto"])
    message = order.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=9, label=1)
    message.field.add(name="at", number=2, type=11, label=1, type_name=".google.protobuf.Timestamp")
    message.field.add(name="total", number=3, type=11, label=1, type_name=".shop.Money")
    pool.Add(order)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    value = cls(id="x")
    value.at.seconds = 1_700_000_000
    value.total.cents = 5
    client = sr.SchemaRegistryClient({"url": module_registry.url})
    conf = {"use.deprecated.format": False}
    got = roundtrip(
        module_registry,
        "refs-proto",
        [value],
        ProtobufSerializer(cls, client, conf),
        ProtobufDeserializer(cls, conf, client),
    )
    assert [(v.id, v.at.seconds, v.total.cents) for v in got] == [("x", 1_700_000_000, 5)]
    latest = client.get_latest_version("refs-proto-value")
    assert [(r.name, r.subject) for r in latest.schema.references] == [
        ("shop/money.proto", "shop/money.proto")
    ]
    # the referenced schema cannot go while the reference exists
    with pytest.raises(sr.error.SchemaRegistryError) as caught:
        client.delete_subject("shop/money.proto")
    assert caught.value.error_code == 42206
