"""Appended batches carry the partition leader epoch (0), and OffsetForLeaderEpoch answers."""

from __future__ import annotations

import struct
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import crc32c
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4 import request as ofle
from kio.schema.produce.v9 import request as produce

from tests.support.kafka_wire import WireClient
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord


def _create(broker: Any, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        admin.close()


def _produce(client: WireClient, topic: str, batch: bytes) -> int:
    request = produce.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=timedelta(seconds=10),
        topic_data=(
            produce.TopicProduceData(
                name=topic,
                partition_data=(produce.PartitionProduceData(index=0, records=batch),),
            ),
        ),
    )
    answer = client.request(request)
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none, part
    return int(part.base_offset)


def _segment_batches(log_dir: Path, topic: str) -> list[bytes]:
    data = (log_dir / f"{topic}-0" / f"{0:020d}.log").read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append(data[pos : pos + 12 + length])
        pos += 12 + length
    return out


def test_appended_batches_are_stamped_with_leader_epoch_zero(broker: Any) -> None:
    _create(broker, "epochs")
    with WireClient(broker.bootstrap) as client:
        # The Java producer writes -1 and expects the broker to stamp it; librdkafka writes 0.
        for epoch in (-1, 0, 7):
            batch = encode_batch([NewRecord(b"k", b"v%d" % epoch)], partition_leader_epoch=epoch)
            _produce(client, "epochs", batch)
    batches = _segment_batches(broker.log_dir, "epochs")
    assert len(batches) == 3
    for raw in batches:
        (epoch,) = struct.unpack_from(">i", raw, 12)
        assert epoch == 0
        # The CRC-32C covers attributes onward, not the leader epoch: it stays valid unchanged.
        (crc,) = struct.unpack_from(">I", raw, 17)
        assert crc == crc32c.crc32c(raw[21:])
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, check_crcs=True)
    try:
        tp = TopicPartition("epochs", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        for _ in range(50):
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
            if len(got) == 3:
                break
        assert got == [b"v-1", b"v0", b"v7"]
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("current", "asked", "expected"),
    [
        (-1, 0, (ErrorCode.none, 0, 5)),
        (0, 0, (ErrorCode.none, 0, 5)),
        (-1, 3, (ErrorCode.none, -1, -1)),
        (-1, -1, (ErrorCode.none, -1, -1)),
        (1, 0, (ErrorCode.unknown_leader_epoch, -1, -1)),
    ],
)
def test_offset_for_leader_epoch(
    module_broker: Any, current: int, asked: int, expected: tuple[int, int, int]
) -> None:
    topic = f"ofle-{uuid.uuid4().hex[:8]}"
    _create(module_broker, topic)
    with WireClient(module_broker.bootstrap) as client:
        _produce(client, topic, encode_batch([NewRecord(b"k", b"v")] * 5))
        request = ofle.OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=(
                ofle.OffsetForLeaderTopic(
                    topic=topic,
                    partitions=(
                        ofle.OffsetForLeaderPartition(
                            partition=0, current_leader_epoch=current, leader_epoch=asked
                        ),
                        ofle.OffsetForLeaderPartition(
                            partition=9, current_leader_epoch=-1, leader_epoch=0
                        ),
                    ),
                ),
            ),
        )
        answer = client.request(request)
    found, missing = answer.topics[0].partitions
    assert (found.error_code, found.leader_epoch, found.end_offset) == expected
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
