"""A registry moves between clusters as its ``_schemas`` topic: records copied by a plain
consumer and producer (what MirrorMaker 2 does) into another broker's ``_schemas`` are
replayed there as they arrive, and that registry then answers the same (ids included)."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import BrokerFactory
from tests.schema_registry.conftest import start_registry

pytestmark = pytest.mark.integration


def test_copied_schemas_topic_serves_the_same_registry(broker_factory: BrokerFactory) -> None:
    from confluent_kafka import Consumer, Producer

    source, target = start_registry(broker_factory), start_registry(broker_factory)
    record = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    source.ok("POST", "/subjects/a-value/versions", {"schema": json.dumps(record)})
    source.ok("POST", "/subjects/b-value/versions", {"schema": '"string"'})
    source.ok("PUT", "/config/a-value", {"compatibility": "FULL"})
    source.ok("DELETE", "/subjects/b-value")
    consumer = Consumer(
        {
            "bootstrap.servers": source.broker.bootstrap,
            "group.id": "copy",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["_schemas"])
    producer = Producer({"bootstrap.servers": target.broker.bootstrap})
    copied = 0
    deadline = time.monotonic() + 60
    while copied < 4 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        producer.produce("_schemas", key=msg.key(), value=msg.value())
        copied += 1
    consumer.close()
    assert producer.flush(30) == 0 and copied == 4

    def same() -> bool:
        return bool(target.ok("GET", "/subjects", deleted="true") == ["a-value", "b-value"])

    deadline = time.monotonic() + 30
    while not same() and time.monotonic() < deadline:
        time.sleep(0.1)  # the target's registry replays what arrives in its _schemas
    assert same()
    for path, params in (
        ("/schemas", {"deleted": "true"}),
        ("/subjects", {}),
        ("/config/a-value", {}),
        ("/schemas/ids/2", {}),
    ):
        assert target.ok("GET", path, **params) == source.ok("GET", path, **params)
    # new ids continue after the copied ones
    assert target.ok("POST", "/subjects/c-value/versions", {"schema": '"long"'}) == {"id": 3}
