"""The steps of the migration procedure of docs/moving-to-kafka.md, as the tests run them: an
application's producer and consumer group on one broker, MirrorMaker 2 copying to another, the
group resuming there."""

from __future__ import annotations

import time

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

__all__ = (
    "committed_offsets",
    "consume_n",
    "end_offsets",
    "make_topic",
    "produce_numbered",
    "wait_for",
)


def make_topic(bootstrap: str, topic: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config)
    admin.create_topics([new])[topic].result(60)


def produce_numbered(bootstrap: str, topic: str, first: int, count: int) -> None:
    """Records ``first .. first+count-1``: key and value ``n`` (murmur2 partitioning)."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for n in range(first, first + count):
        producer.produce(topic, key=str(n).encode(), value=str(n).encode())
    assert producer.flush(30) == 0


def consume_n(bootstrap: str, topic: str, group: str, n: int | None) -> list[int]:
    """The application: consume ``n`` records (or to the end of every partition when None)
    in group ``group``, commit what it consumed, leave. Returns the values consumed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    got: list[int] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 90
    try:
        while n is None or len(got) < n:
            assert time.monotonic() < deadline, f"consumed {len(got)} of {n}"
            msg = consumer.poll(1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    eof.add(msg.partition())
                    assignment = consumer.assignment()
                    if n is None and assignment and eof >= {tp.partition for tp in assignment}:
                        break
                    continue
                raise AssertionError(msg.error())
            eof.discard(msg.partition())
            got.append(int(msg.value()))
        if got:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group)]
    try:
        result = admin.list_consumer_group_offsets(request)[group].result(30)
    except Exception:  # the group is not there yet
        return {}
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.topic_partitions
        if tp.offset >= 0 and not tp.error
    }


def wait_for(what: str, check: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    """The end offsets of ``topic``; {} while it does not exist."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return {
            (topic, p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    except KafkaException:
        return {}
    finally:
        consumer.close()
