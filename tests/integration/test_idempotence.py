"""Idempotent producers against a live broker: real clients, raw wire requests, crashes.

- kafka-python's default producer (idempotence on) and confluent-kafka with
  ``enable.idempotence=true``: every batch is stamped with a producer id; what a consumer reads
  back has no duplicates and no gaps.
- Raw requests built with kio: a batch sent twice (same producer id, epoch and sequence) is
  written once and both answers carry the same base offset; a sequence gap is refused with
  OUT_OF_ORDER_SEQUENCE_NUMBER; an old epoch with INVALID_PRODUCER_EPOCH.
- The broker SIGKILLed (or stopped) between a batch and its retry: the retry is still
  recognised as a duplicate, and producer ids are never handed out twice.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kio.serial import entity_reader, entity_writer

from tests.support.fault_wire import create_topic_at
from tests.support.kafka_wire import read_frame
from tidelog.protocol import codec
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import request_types
from tidelog.storage.batch import RecordBatchHeader, iter_batches
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord

pytestmark = pytest.mark.integration

INIT_PRODUCER_ID, PRODUCE = 22, 0


class WireClient:
    """One connection; sends kio requests and reads the answers, in order."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, api_key: int, version: int, request: Any) -> Any:
        self.correlation += 1
        client_id = b"idempotence-test"
        header = struct.pack(">hhih", api_key, version, self.correlation, len(client_id))
        header += client_id
        if codec.request_header_version(api_key, version) >= 2:
            header += b"\x00"
        body = io.BytesIO()
        entity_writer(type(request))(body, request)
        frame = header + body.getvalue()
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        answer = read_frame(self.sock)
        (correlation,) = struct.unpack_from(">i", answer, 0)
        assert correlation == self.correlation
        offset = 4 + (1 if codec.response_header_version(api_key, version) == 1 else 0)
        response, _ = entity_reader(codec.response_schema(api_key, version))(answer, offset)
        return response

    def init_producer_id(self, version: int = 4, transactional_id: str | None = None) -> Any:
        t = request_types(INIT_PRODUCER_ID, version)
        kwargs: dict[str, Any] = {}
        if version >= 3:
            kwargs = {"producer_id": -1, "producer_epoch": -1}
        return self.call(
            INIT_PRODUCER_ID,
            version,
            t.InitProducerIdRequest(
                transactional_id=transactional_id,
                transaction_timeout=timedelta(seconds=60),
                **kwargs,
            ),
        )

    def produce(self, topic: str, records: bytes, version: int = 9, acks: int = -1) -> Any:
        """Produce to partition 0; the partition's response."""
        t = request_types(PRODUCE, version)
        request = t.ProduceRequest(
            transactional_id=None,
            acks=acks,
            timeout=timedelta(seconds=30),
            topic_data=(
                t.TopicProduceData(
                    name=topic,
                    partition_data=(t.PartitionProduceData(index=0, records=records),),
                ),
            ),
        )
        response = self.call(PRODUCE, version, request)
        return response.responses[0].partition_responses[0]


def idempotent_batch(pid: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    return encode_batch(
        [NewRecord(key=None, value=v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


def consume_all(bootstrap: str, topic: str, expected: int, partition: int = 0) -> list[bytes]:
    """Every value of the partition from offset 0 (waits for ``expected``, then a bit more)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    quiet_until: float | None = None
    try:
        while time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=300)
            for records in batch.values():
                values.extend(r.value for r in records)
            if len(values) >= expected:
                quiet_until = quiet_until or time.monotonic() + 1.0  # catch extra copies
                if time.monotonic() >= quiet_until:
                    break
    finally:
        consumer.close()
    return values


def logged_batches(log_dir: Path, topic: str, partition: int = 0) -> list[RecordBatchHeader]:
    """The batch headers in the partition's segment files, read straight from disk."""
    headers: list[RecordBatchHeader] = []
    for segment in sorted((log_dir / f"{topic}-{partition}").glob("*.log")):
        headers.extend(h for _, h in iter_batches(segment.read_bytes()))
    return headers


# -- real clients ----------------------------------------------------------------------------


def test_kafka_python_default_producer_is_idempotent(broker: Any) -> None:
    topic = "kp-idem"
    create_topic_at(broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    sent = [b"kp-%05d" % i for i in range(3000)]
    for value in sent:
        producer.send(topic, value=value, partition=0)
    producer.flush()
    producer.close()
    assert consume_all(broker.bootstrap, topic, len(sent)) == sent
    headers = logged_batches(broker.log_dir, topic)
    assert headers and all(h.producer_id >= 0 for h in headers), "idempotence was not used"
    assert len({h.producer_id for h in headers}) == 1
    sequences = [(h.base_sequence, h.records_count) for h in headers]
    expected = 0
    for base, count in sequences:
        assert base == expected
        expected += count


def test_confluent_kafka_enable_idempotence(broker: Any) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = "ck-idem"
    create_topic_at(broker.bootstrap, topic)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    errors: list[Any] = []
    sent = [b"ck-%05d" % i for i in range(3000)]
    for value in sent:
        producer.produce(
            topic, value=value, partition=0, on_delivery=lambda e, m: e and errors.append(e)
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors
    assert consume_all(broker.bootstrap, topic, len(sent)) == sent
    headers = logged_batches(broker.log_dir, topic)
    assert headers and all(h.producer_id >= 0 for h in headers), "idempotence was not used"


# -- raw wire ----------------------------------------------------------------------------------


def test_init_producer_id_every_version(broker: Any) -> None:
    client = WireClient(broker.bootstrap)
    try:
        ids = []
        for version in range(6):
            response = client.init_producer_id(version)
            assert response.error_code == ErrorCode.none
            assert response.producer_epoch == 0
            ids.append(int(response.producer_id))
        assert ids == sorted(set(ids)) and ids[0] >= 0
        # a transactional id gets an id of its own (see tests/integration/test_transactions.py)
        granted = client.init_producer_id(4, "txn-1")
        assert granted.error_code == ErrorCode.none and granted.producer_id > ids[-1]
        assert client.init_producer_id(4, "").error_code == ErrorCode.invalid_request
    finally:
        client.close()


def test_retried_batch_is_written_once_and_gaps_are_refused(broker: Any) -> None:
    topic = "wire-idem"
    create_topic_at(broker.bootstrap, topic)
    client = WireClient(broker.bootstrap)
    try:
        init = client.init_producer_id()
        pid = int(init.producer_id)
        first = idempotent_batch(pid, 0, 0, [b"a", b"b"])
        answer1 = client.produce(topic, first)
        answer2 = client.produce(topic, first)  # the same batch again, as a retry
        assert answer1.error_code == answer2.error_code == ErrorCode.none
        assert answer1.base_offset == answer2.base_offset == 0
        assert client.produce(topic, idempotent_batch(pid, 0, 2, [b"c"])).base_offset == 2
        gap = client.produce(topic, idempotent_batch(pid, 0, 5, [b"x"]))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        # a retry of an older batch (within the last five) still answers its offsets
        assert client.produce(topic, first).base_offset == 0
        # a new epoch must start at 0; after it, the old epoch is fenced
        bumped = client.produce(topic, idempotent_batch(pid, 1, 3, [b"y"]))
        assert bumped.error_code == ErrorCode.out_of_order_sequence_number
        assert client.produce(topic, idempotent_batch(pid, 1, 0, [b"d"])).base_offset == 3
        stale = client.produce(topic, idempotent_batch(pid, 0, 3, [b"z"]))
        assert stale.error_code == ErrorCode.invalid_producer_epoch
        # plain (non-idempotent) batches are untouched by all this
        plain = client.produce(topic, encode_batch([NewRecord(key=None, value=b"p")]))
        assert plain.base_offset == 4
        plain_again = client.produce(topic, encode_batch([NewRecord(key=None, value=b"p")]))
        assert plain_again.base_offset == 5
    finally:
        client.close()
    assert consume_all(broker.bootstrap, topic, 6) == [b"a", b"b", b"c", b"d", b"p", b"p"]


@pytest.mark.crash
@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_retry_after_restart_is_still_a_duplicate(broker: Any, how: str) -> None:
    topic = f"restart-idem-{how}"
    create_topic_at(broker.bootstrap, topic)
    client = WireClient(broker.bootstrap)
    pid = int(client.init_producer_id().producer_id)
    batches = [
        idempotent_batch(pid, 0, i * 2, [b"%d" % (i * 2), b"%d" % (i * 2 + 1)]) for i in range(4)
    ]
    for i, batch in enumerate(batches):
        assert client.produce(topic, batch, acks=1).base_offset == i * 2
    client.close()
    if how == "sigkill":
        broker.kill()
        broker.start()
    else:
        broker.restart()
    client = WireClient(broker.bootstrap)
    try:
        # the last batch again (its answer was "lost"): same offsets, not written twice
        again = client.produce(topic, batches[-1])
        assert again.error_code == ErrorCode.none and again.base_offset == 6
        if how == "sigkill":  # rebuilt from the log: the last five batches are known
            assert client.produce(topic, batches[0]).base_offset == 0
        nxt = client.produce(topic, idempotent_batch(pid, 0, 8, [b"8"]))
        assert nxt.error_code == ErrorCode.none and nxt.base_offset == 8
        gap = client.produce(topic, idempotent_batch(pid, 0, 10, [b"10"]))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        # producer ids are never handed out twice, even after a crash
        assert int(client.init_producer_id().producer_id) > pid
    finally:
        client.close()
    assert consume_all(broker.bootstrap, topic, 9) == [b"%d" % i for i in range(9)]
    snapshots = sorted(p.name for p in (broker.log_dir / f"{topic}-0").glob("*.snapshot"))
    assert snapshots, "a producer snapshot is written after loading and at shutdown"


def test_producer_state_survives_segment_rolls_and_restart(broker_factory: Any) -> None:
    broker = broker_factory({"log.segment.bytes": "2000"})
    topic = "roll-idem"
    create_topic_at(broker.bootstrap, topic)
    client = WireClient(broker.bootstrap)
    pid = int(client.init_producer_id().producer_id)
    value = b"v" * 300
    batches = [idempotent_batch(pid, 0, i, [value]) for i in range(40)]
    for i, batch in enumerate(batches):
        assert client.produce(topic, batch, acks=1).base_offset == i
    client.close()
    partition_dir = broker.log_dir / f"{topic}-0"
    assert len(list(partition_dir.glob("*.log"))) > 5
    assert len(list(partition_dir.glob("*.snapshot"))) > 1  # one per roll
    broker.kill()
    broker.start()
    client = WireClient(broker.bootstrap)
    try:
        assert client.produce(topic, batches[-1]).base_offset == 39
        assert client.produce(topic, idempotent_batch(pid, 0, 40, [value])).base_offset == 40
    finally:
        client.close()
