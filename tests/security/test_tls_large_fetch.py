"""Large fetch answers on a TLS listener keep the read-and-encrypt path (no sendfile there)."""

from __future__ import annotations

import random
import uuid
from typing import Any

from tests.broker.test_wire_data_path import create, produce
from tests.security.certs import CertFiles, ssl_settings
from tests.security.secure_broker import start
from tests.support.kafka_wire import WireClient, make_batch
from tests.support.net import free_port


def test_large_batches_read_over_tls_equal_what_was_produced(
    broker_factory: Any, certs: CertFiles
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    ssl_port, plain_port = free_port(), free_port()
    start(broker_factory, {"SSL": ssl_port, "PLAINTEXT": plain_port}, ssl_settings(certs))
    topic = f"tls-large-{uuid.uuid4().hex[:8]}"
    rng = random.Random(3)
    # ~300 KiB batches: over the sendfile threshold and the worker-thread read threshold
    values = [[rng.randbytes(7_500) for _ in range(40)] for _ in range(6)]
    with WireClient(f"127.0.0.1:{plain_port}") as c:
        assert create(c, topic).error_code == 0
        for batch in values:
            assert produce(c, topic, make_batch(batch)).error_code == 0
    expected = [v for batch in values for v in batch]

    consumer = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{ssl_port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca),
            "group.id": "tls-large-readers",
            "enable.auto.commit": False,
            "check.crcs": True,
            "fetch.max.bytes": 4 * 1024 * 1024,
            "max.partition.fetch.bytes": 4 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    for _ in range(120):
        for m in consumer.consume(500, 0.5):
            assert m.error() is None, m.error()
            value = m.value()
            assert value is not None
            got.append(value)
        if len(got) >= len(expected):
            break
    consumer.close()
    assert got == expected
