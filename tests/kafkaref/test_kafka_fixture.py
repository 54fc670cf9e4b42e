"""The reference Apache Kafka of ``tests/support/kafka_reference.py`` starts and answers."""

from __future__ import annotations

from kio.schema.metadata.v12.request import MetadataRequest

from tests.support.kafka_reference import KafkaProcess
from tests.support.kafka_wire import WireClient


def test_kafka_answers_metadata(kafka_broker: KafkaProcess) -> None:
    with WireClient(kafka_broker.bootstrap) as client:
        answer = client.request(
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [
        (1, "127.0.0.1", kafka_broker.port)
    ]
    assert answer.controller_id == 1
