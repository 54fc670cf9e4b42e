"""Records for the typed replay tests: ``payments`` (Avro, two versions of its subject, then a
record with an unknown schema id and one without the registry's framing) and ``orders``
(Protobuf), produced through tidelog with confluent-kafka's serializers."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

PAYMENT_V1 = {
    "type": "record",
    "name": "Payment",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"}],
}
PAYMENT_V2 = {
    "type": "record",
    "name": "Payment",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "cents", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "map", "values": "int"}, "default": {}},
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [{"name": "sku", "type": "string"}],
                },
            },
            "default": [],
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}, "default": 0},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            "default": "\u0000",
        },
    ],
}
V2_RECORD = {
    "id": "b0",
    "cents": 10,
    "note": "hi",
    "tags": {"x": 1},
    "items": [{"sku": "s1"}],
    "at": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
    "day": dt.date(2026, 1, 2),
    "amount": decimal.Decimal("12.34"),
}
#: payments: offsets 0-2 under v1, 3 under v2, 4 an unknown id, 5 not framed.
BAD_VALUES = (b"\x00\x00\x00\x00\x63garbage", b"not framed at all")


def order_class() -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="typed_order.proto", package="shop")
    fdp.syntax = "proto3"
    message = fdp.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=9, label=1)
    message.field.add(name="cents", number=2, type=3, label=1)
    message.field.add(name="skus", number=3, type=9, label=3)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def produce(bootstrap: str, registry_url: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    ctx = SerializationContext("payments", MessageField.VALUE)
    v1 = AvroSerializer(client, json.dumps(PAYMENT_V1))
    for i in range(3):
        producer.produce("payments", key=b"k%d" % i, value=v1({"id": f"a{i}", "cents": i}, ctx))
        producer.flush(30)  # one batch each: the order is the offsets'
    producer.produce(
        "payments", value=AvroSerializer(client, json.dumps(PAYMENT_V2))(V2_RECORD, ctx)
    )
    producer.flush(30)
    for bad in BAD_VALUES:
        producer.produce("payments", value=bad)
        producer.flush(30)
    order = order_class()
    serializer = ProtobufSerializer(order, client, {"use.deprecated.format": False})
    octx = SerializationContext("orders", MessageField.VALUE)
    for i in range(2):
        msg = order(id=f"o{i}", cents=100 + i, skus=["a", "b"][: i + 1])
        producer.produce("orders", value=serializer(msg, octx))
    assert producer.flush(30) == 0
