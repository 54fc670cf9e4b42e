"""Helpers of the share-group tests: a share broker, topics, group configs, polling."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)

from tests.support.broker_process import BrokerProcess
from tests.support.share_behaviour import set_group_configs

__all__ = (
    "create_topic",
    "poll_until",
    "produce",
    "set_group_configs",
    "share_consumer",
    "start_share_broker",
)

#: Lets a group config lower its lock duration to 1 s (Kafka's floor is 1000 ms too).
SHARE_OVERRIDES = {"group.share.min.record.lock.duration.ms": "1000"}


def start_share_broker(base: Path, extra: dict[str, str] | None = None) -> Iterator[BrokerProcess]:
    log_dir = base / "data"
    log_dir.mkdir(parents=True)
    broker = BrokerProcess(log_dir, {**SHARE_OVERRIDES, **(extra or {})}).start()
    try:
        yield broker
    finally:
        if broker.running:
            code = broker.stop()
            assert code == 0, broker.log_text()[-4000:]


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for v in values:
        producer.produce(topic, value=v, partition=partition)
    assert producer.flush(15) == 0


def share_consumer(bootstrap: str, group: str, topic: str, explicit: bool = True) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    return consumer


def poll_until(
    consumer: ShareConsumer,
    done: Callable[[list[Message]], bool],
    timeout_s: float = 20.0,
    on_batch: Callable[[list[Message]], Any] | None = None,
) -> list[Message]:
    """Poll until ``done(all messages so far)``; each poll's data messages go to ``on_batch``
    (explicit mode must acknowledge them before the next poll)."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while not done(got):
        assert time.monotonic() < deadline, (
            f"timed out with {[(m.offset(), m.value()) for m in got]}"
        )
        batch = [m for m in consumer.poll(0.5) if m.error() is None]
        if batch and on_batch is not None:
            on_batch(batch)
        got.extend(batch)
    return got
