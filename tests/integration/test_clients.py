"""Stock Kafka clients against a real tidelog broker: every codec, keys, values, headers,
timestamps over several partitions; admin, offsets by time, restarts, long poll, bad frames.

Producers are idempotent where a test is about idempotence (the broker answers InitProducerId,
see test_idempotence.py); the other tests turn it off to keep one moving part fewer.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import struct
import subprocess
import threading
import time
from typing import Any

import pytest

from tests.support.fault_wire import create_topic_at

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
COUNT = 12
BASE_TS = 1_750_000_000_000

Record = tuple[int, bytes, bytes, tuple[tuple[str, bytes], ...], int]


def expected(codec: str) -> set[Record]:
    """(partition, key, value, headers, timestamp) of what every test sends."""
    out = set()
    for i in range(COUNT):
        value = (b"value-%d-%s-" % (i, codec.encode())) + b"x" * (i * 50)  # compressible
        headers = (("h", b"hv%d" % i), ("second", b""))
        out.add((i % PARTITIONS, b"key-%d" % i, value, headers, BASE_TS + i))
    return out


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    create_topic_at(bootstrap, name, partitions)


def consume_with_kcat(bootstrap: str, topic: str, n: int) -> set[Record]:
    result = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-c",
            str(n),
            "-f",
            "%p\\t%k\\t%s\\t%h\\t%T\\n",
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    records = set()
    for line in result.stdout.decode().splitlines():
        p, k, v, h, ts = line.split("\t")
        headers = (
            tuple(
                (name, value.encode())
                for name, _, value in (x.partition("=") for x in h.split(","))
            )
            if h
            else ()
        )
        records.add((int(p), k.encode(), v.encode(), headers, int(ts)))
    return records


# --------------------------------------------------------------------------- kafka-python


def test_kafka_python_every_codec(module_broker: Any) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    for codec in CODECS:
        topic = f"kp-{codec}"
        create_topic(module_broker.bootstrap, topic)
        producer = KafkaProducer(
            bootstrap_servers=module_broker.bootstrap,
            acks="all",
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
        )
        for p, k, v, h, ts in sorted(expected(codec)):
            producer.send(topic, key=k, value=v, headers=list(h), timestamp_ms=ts, partition=p)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(
            bootstrap_servers=module_broker.bootstrap, enable_auto_commit=False, group_id=None
        )
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        got: set[Record] = set()
        deadline = time.monotonic() + 20
        while len(got) < COUNT and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    got.add((r.partition, r.key, r.value, tuple(r.headers), r.timestamp))
        consumer.close()
        assert got == expected(codec), codec
    # librdkafka 2.0.2 reads what kafka-python wrote (one codec is enough here)
    assert consume_with_kcat(module_broker.bootstrap, "kp-zstd", COUNT) == expected("zstd")


def test_kafka_python_admin_and_offsets_for_times(module_broker: Any) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    admin.create_topics([NewTopic("kp-admin", 4, 1, topic_configs={"retention.ms": "3600000"})])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("kp-admin", 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap, enable_idempotence=False)
    for i in range(10):
        producer.send("kp-admin", value=b"%d" % i, timestamp_ms=BASE_TS + 1000 * i, partition=3)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=module_broker.bootstrap, group_id=None)
    assert consumer.partitions_for_topic("kp-admin") == {0, 1, 2, 3}
    tp = TopicPartition("kp-admin", 3)
    found = consumer.offsets_for_times({tp: BASE_TS + 4500})[tp]
    assert (found.offset, found.timestamp) == (5, BASE_TS + 5000)
    assert consumer.offsets_for_times({tp: BASE_TS + 99_000})[tp] is None
    assert consumer.end_offsets([tp]) == {tp: 10}
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    consumer.close()


# --------------------------------------------------------------------------- aiokafka


def test_aiokafka_every_codec(module_broker: Any) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run(codec: str) -> set[Record]:
        topic = f"ak-{codec}"
        create_topic(module_broker.bootstrap, topic)
        producer = AIOKafkaProducer(
            bootstrap_servers=module_broker.bootstrap,
            compression_type=None if codec == "none" else codec,
            enable_idempotence=True,
            acks="all",
        )
        await producer.start()
        try:
            futures = [
                await producer.send(
                    topic, key=k, value=v, headers=list(h), timestamp_ms=ts, partition=p
                )
                for p, k, v, h, ts in sorted(expected(codec))
            ]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=module_broker.bootstrap, enable_auto_commit=False
        )
        await consumer.start()
        got: set[Record] = set()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 20
            while len(got) < COUNT and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    for r in records:
                        got.add((r.partition, r.key, r.value, tuple(r.headers), r.timestamp))
        finally:
            await consumer.stop()
        return got

    for codec in CODECS:
        assert asyncio.run(run(codec)) == expected(codec), codec


# --------------------------------------------------------------------------- confluent-kafka


def _confluent_produce(bootstrap: str, topic: str, codec: str) -> None:
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": codec,
            "message.timeout.ms": 10000,
            "linger.ms": 5,
        }
    )
    for p, k, v, h, ts in sorted(expected(codec)):
        producer.produce(
            topic,
            key=k,
            value=v,
            headers=list(h),
            timestamp=ts,
            partition=p,
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
    assert producer.flush(15) == 0
    assert errors == []


def _confluent_consume(bootstrap: str, topic: str, n: int) -> set[Record]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: set[Record] = set()
    deadline = time.monotonic() + 20
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        headers = tuple((name, value or b"") for name, value in (msg.headers() or []))
        got.add((msg.partition(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
    consumer.close()
    return got


def test_confluent_every_codec(module_broker: Any) -> None:
    for codec in CODECS:
        topic = f"ck-{codec}"
        create_topic(module_broker.bootstrap, topic)
        _confluent_produce(module_broker.bootstrap, topic, codec)
        assert _confluent_consume(module_broker.bootstrap, topic, COUNT) == expected(codec)


def test_confluent_admin_and_offsets_for_times(module_broker: Any) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    futures = admin.create_topics(
        [NewTopic("ck-admin", 2, 1, config={"cleanup.policy": "delete"}), NewTopic("bad name", 1)]
    )
    assert futures["ck-admin"].result() is None
    with pytest.raises(KafkaException):
        futures["bad name"].result()
    with pytest.raises(KafkaException):
        admin.create_topics([NewTopic("ck-admin", 1, 1)])["ck-admin"].result()
    assert len(admin.list_topics(timeout=10).topics["ck-admin"].partitions) == 2
    producer = Producer({"bootstrap.servers": module_broker.bootstrap, "enable.idempotence": False})
    for i in range(10):
        producer.produce("ck-admin", value=b"%d" % i, timestamp=BASE_TS + 1000 * i, partition=1)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "ck-admin"})
    found = consumer.offsets_for_times([TopicPartition("ck-admin", 1, BASE_TS + 2500)], 10)
    assert found[0].offset == 3
    low, high = consumer.get_watermark_offsets(TopicPartition("ck-admin", 1), timeout=10)
    assert (low, high) == (0, 10)
    consumer.close()


# --------------------------------------------------------------------------- kcat


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_every_codec(module_broker: Any) -> None:
    for codec in CODECS:
        topic = f"kc-{codec}"
        create_topic(module_broker.bootstrap, topic)
        before = int(time.time() * 1000)
        for partition in range(PARTITIONS):
            lines = b"".join(
                b"%s:%s\n" % (k, v) for p, k, v, _, _ in sorted(expected(codec)) if p == partition
            )
            subprocess.run(
                [
                    "kcat",
                    "-b",
                    module_broker.bootstrap,
                    "-P",
                    "-t",
                    topic,
                    "-p",
                    str(partition),
                    "-K:",
                    "-z",
                    codec,
                    "-H",
                    "h=kcat",
                    "-X",
                    "message.timeout.ms=10000",
                ],
                input=lines,
                check=True,
                timeout=60,
            )
        after = int(time.time() * 1000)
        got = consume_with_kcat(module_broker.bootstrap, topic, COUNT)
        assert {(p, k, v) for p, k, v, _, _ in got} == {
            (p, k, v) for p, k, v, _, _ in expected(codec)
        }
        assert all(h == (("h", b"kcat"),) for _, _, _, h, _ in got)
        assert all(before - 1000 <= ts <= after + 1000 for *_, ts in got)  # CreateTime: now
        # and kafka-python reads what librdkafka 2.0.2 wrote
        if codec == "zstd":
            from kafka import KafkaConsumer, TopicPartition

            consumer = KafkaConsumer(bootstrap_servers=module_broker.bootstrap, group_id=None)
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()
            seen = 0
            deadline = time.monotonic() + 20
            while seen < COUNT and time.monotonic() < deadline:
                seen += sum(len(r) for r in consumer.poll(timeout_ms=500).values())
            consumer.close()
            assert seen == COUNT


# --------------------------------------------------------------------------- broker behaviour


def test_restart_between_produce_and_consume_loses_nothing(broker_factory: Any) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, "durable")
    _confluent_produce(b.bootstrap, "durable", "lz4")
    b.restart()
    assert _confluent_consume(b.bootstrap, "durable", COUNT) == expected("lz4")
    assert consume_with_kcat(b.bootstrap, "durable", COUNT) == expected("lz4")


def test_long_poll_fetch_returns_promptly_when_data_arrives(module_broker: Any) -> None:
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    create_topic(module_broker.bootstrap, "longpoll", 1)
    consumer = Consumer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "group.id": "longpoll",
            "fetch.wait.max.ms": 10000,
            "fetch.min.bytes": 1,
        }
    )
    consumer.assign([TopicPartition("longpoll", 0, OFFSET_END)])
    for _ in range(6):  # let the consumer reach the end and park a long poll
        consumer.poll(0.5)
    producer = Producer(
        {"bootstrap.servers": module_broker.bootstrap, "enable.idempotence": False, "linger.ms": 0}
    )
    sent_at: dict[str, float] = {}

    def send_later() -> None:
        time.sleep(0.5)
        sent_at["t"] = time.monotonic()
        producer.produce("longpoll", value=b"ping")
        producer.flush(5)

    thread = threading.Thread(target=send_later)
    thread.start()
    msg = None
    deadline = time.monotonic() + 15
    while msg is None and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
    received_at = time.monotonic()
    thread.join()
    consumer.close()
    assert msg is not None and msg.value() == b"ping"
    # With fetch.wait.max.ms=10000 the answer would take ~10 s without the HW wake-up.
    assert received_at - sent_at["t"] < 2.0


def test_garbage_frame_closes_only_its_own_connection(module_broker: Any) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap, enable_idempotence=False)
    create_topic(module_broker.bootstrap, "survivor", 1)
    assert producer.send("survivor", b"before").get(timeout=10).offset == 0
    with socket.create_connection((module_broker.host, module_broker.port), timeout=5) as bad:
        bad.sendall(struct.pack(">i", 12) + b"\xde\xad\xbe\xef" * 3)
        assert bad.recv(1) == b""  # closed by the broker
    assert producer.send("survivor", b"after").get(timeout=10).offset == 1
    producer.close()
