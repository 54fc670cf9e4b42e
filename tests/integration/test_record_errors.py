"""KIP-467: a batch refused for some of its records names them (Produce ``record_errors``).

Keyless records on a compacted topic: the broker answers INVALID_RECORD with the index and
Kafka's message for each keyless record, so librdkafka fails those records with INVALID_RECORD
and the rest of the batch with _INVALID_DIFFERENT_RECORD (they may be sent again).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as produce

from tests.support.kafka_wire import WireClient
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord

pytestmark = pytest.mark.integration

KEY_MESSAGE = "Compacted topic cannot accept message without key in topic partition {}-0"


def _create_compacted(broker: Any, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(
                name, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"}
            )
        ]
    )
    futures[name].result(timeout=30)


def test_confluent_kafka_fails_only_the_keyless_records(module_broker: Any) -> None:
    _create_compacted(module_broker, "kip467")
    producer = Producer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "linger.ms": 500,  # one batch for all five records
            "batch.num.messages": 100,
            "retries": 0,
        }
    )
    reports: dict[int, KafkaError | None] = {}

    def on_delivery(err: KafkaError | None, msg: object, i: int) -> None:
        reports[i] = err

    keys = [b"k0", None, b"k2", None, b"k4"]
    for i, key in enumerate(keys):
        producer.produce(
            "kip467", value=b"v%d" % i, key=key, on_delivery=lambda e, m, i=i: on_delivery(e, m, i)
        )
    assert producer.flush(30) == 0
    assert sorted(reports) == [0, 1, 2, 3, 4]
    codes = {i: (e.code() if e is not None else None) for i, e in reports.items()}
    assert codes[1] == codes[3] == KafkaError.INVALID_RECORD
    assert codes[0] == codes[2] == codes[4] == KafkaError._INVALID_DIFFERENT_RECORD
    # The keyed records can be sent again on their own and are then accepted.
    for i in (0, 2, 4):
        producer.produce("kip467", value=b"again", key=keys[i])
    assert producer.flush(30) == 0


@pytest.mark.parametrize("version", [8, 9])
def test_record_errors_on_the_wire(module_broker: Any, version: int) -> None:
    topic = f"kip467-wire-{version}"
    _create_compacted(module_broker, topic)
    batch = encode_batch([NewRecord(k, b"v") for k in (None, b"a", None, None, None, b"b")])
    module = (
        produce
        if version == 9
        else __import__("kio.schema.produce.v8.request", fromlist=["ProduceRequest"])
    )
    request = module.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=timedelta(seconds=10),
        topic_data=(
            module.TopicProduceData(
                name=topic,
                partition_data=(module.PartitionProduceData(index=0, records=batch),),
            ),
        ),
    )
    with WireClient(module_broker.bootstrap) as client:
        answer = client.request(request)
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.invalid_record
    assert part.base_offset == -1
    assert part.log_start_offset == 0  # as Kafka: a refused append reports the log start
    assert [e.batch_index for e in part.record_errors] == [0, 2, 3, 4]
    message = KEY_MESSAGE.format(topic)
    assert all(e.batch_index_error_message == message for e in part.record_errors)
    assert part.error_message == (
        "One or more records have been rejected due to 4 record errors in total, and only "
        "showing the first three errors at most: ["
        + ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in (0, 2, 3))
        + "]"
    )
