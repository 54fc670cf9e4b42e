"""Client quotas enforced on stock clients (KIP-13, KIP-124, KIP-219).

A producer (confluent-kafka) and a consumer (kafka-python) over their byte-rate quota are held to
it: bytes over wall time across the run are within 10% of the quota. They see the throttle time
in their own metrics (librdkafka's ``throttle`` window in stats_cb, kafka-python's
``throttle-time-max``), nothing is lost (every record acknowledged and stored, every offset
consumed once), and a client without a quota running at the same time is not slowed. Quotas are
set with AlterClientQuotas and survive SIGTERM and SIGKILL restarts.

The broker samples quotas over ``quota.window.num=2`` windows of one second: Kafka's default of
11 windows lets a client send ten seconds' worth at once before the first throttle, which no
test of a few seconds could measure.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.alter_client_quotas.v1 import request as alter_v1
from kio.schema.describe_client_quotas.v1 import request as describe_v1

from tests.support.broker_process import BrokerProcess
from tests.support.fault_wire import create_topic_at
from tests.support.kafka_wire import WireClient
from tests.support.net import free_port

pytestmark = pytest.mark.integration

QUOTA_WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
RATE = 200_000  # bytes/s
RUN_S = 4.5
#: Consumers go in steps of one fetch: a little longer, for more steps.
CONSUMER_RUN_S = 6.5
VALUE = b"q" * 1000
#: A consumer's fetch size: a throttled fetch answers empty after a round trip (Kafka's way), so
#: fetches of a fifth of the quota keep that round trip a small part of each cycle.
FETCH_BYTES = 16384


def set_quota(bootstrap: str, entity: list[tuple[str, str | None]], key: str, value: float) -> Any:
    with WireClient(bootstrap) as c:
        answer = c.request(
            alter_v1.AlterClientQuotasRequest(
                entries=(
                    alter_v1.EntryData(
                        entity=tuple(
                            alter_v1.EntityData(entity_type=t, entity_name=n) for t, n in entity
                        ),
                        ops=(alter_v1.OpData(key=key, value=value, remove=False),),
                    ),
                ),
                validate_only=False,
            )
        )
    assert [e.error_code for e in answer.entries] == [0], answer
    return answer


def described(bootstrap: str) -> list[tuple[tuple[tuple[str, str | None], ...], dict[str, float]]]:
    with WireClient(bootstrap) as c:
        answer = c.request(describe_v1.DescribeClientQuotasRequest(components=(), strict=False))
    assert answer.error_code == 0, answer
    return sorted(
        (
            (
                tuple((e.entity_type, e.entity_name) for e in entry.entity),
                {v.key: v.value for v in entry.values},
            )
            for entry in answer.entries
        ),
        key=repr,
    )


def held_to(bytes_sent: int, seconds: float) -> float:
    """The measured rate as a fraction of the quota."""
    return bytes_sent / seconds / RATE


class ProducerRun:
    """One confluent-kafka producer sending 1 KB records as fast as it may for ``seconds``."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, seconds: float) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.seconds = seconds
        self.acked: list[tuple[float, int]] = []
        self.errors: list[Any] = []
        self.throttle_max_ms = 0
        self.sent = 0
        self.producer: Any = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 5,
                "batch.size": 16384,
                "queue.buffering.max.kbytes": 32,
                "statistics.interval.ms": 250,
                "stats_cb": self._stats,
            }
        )

    def close(self) -> None:
        """Let the client go (it holds this object through its callbacks)."""
        self.producer = None

    def _stats(self, text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            self.throttle_max_ms = max(self.throttle_max_ms, int(broker["throttle"]["max"]))

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append((time.monotonic() - self.t0, len(msg.value())))

    def run(self) -> None:
        p = self.producer
        self.t0 = time.monotonic()
        while time.monotonic() - self.t0 < self.seconds:
            try:
                p.produce(self.topic, VALUE, on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                p.poll(0.005)
            p.poll(0)
        self.elapsed = time.monotonic() - self.t0
        assert p.flush(30) == 0
        self.bytes_in_run = sum(n for t, n in self.acked if t <= self.elapsed)
        # one more stats window for the throttle seen at the end
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and self.throttle_max_ms == 0:
            p.poll(0.05)


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def end_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "quota-check"})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(high)
    finally:
        c.close()


def test_producer_over_quota_is_held_to_it_and_others_are_not(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    metrics_port = free_port()
    b = broker_factory({**QUOTA_WINDOWS, "metrics.port": str(metrics_port)})
    for topic in ("slow-topic", "free-topic"):
        create_topic_at(b.bootstrap, topic, 1)
    set_quota(b.bootstrap, [("client-id", "slow-producer")], "producer_byte_rate", RATE)

    slow = ProducerRun(b.bootstrap, "slow-topic", "slow-producer", RUN_S)
    free = ProducerRun(b.bootstrap, "free-topic", "free-producer", RUN_S)
    scraped: list[str] = []

    def scrape() -> None:  # while the throttled producer runs: the sensors' windows are live
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        scraped.append(urllib.request.urlopen(url).read().decode())

    other = threading.Thread(target=free.run)
    scraper = threading.Timer(RUN_S - 1.0, scrape)
    other.start()
    scraper.start()
    slow.run()
    other.join()
    scraper.join()

    slow.close()
    free.close()
    assert not slow.errors and not free.errors
    ratio = held_to(slow.bytes_in_run, slow.elapsed)
    free_ratio = held_to(free.bytes_in_run, free.elapsed)
    print(
        f"throttled producer: {ratio:.3f} x its quota (throttle max {slow.throttle_max_ms} ms); "
        f"producer without a quota: {free_ratio:.1f} x"
    )
    assert 0.9 <= ratio <= 1.1, f"throttled producer ran at {ratio:.2f} x its quota"
    assert slow.throttle_max_ms > 0, "librdkafka reports the throttle time in its stats"
    # nothing lost: every record acknowledged is stored
    assert len(slow.acked) == slow.sent
    assert end_offset(b.bootstrap, "slow-topic") == slow.sent
    assert end_offset(b.bootstrap, "free-topic") == free.sent
    # the client without a quota is not slowed, nor throttled
    assert free_ratio > 5, f"unthrottled producer ran at only {free_ratio:.2f} x the quota"
    assert free.throttle_max_ms == 0

    (text,) = scraped
    series = 'client_id="slow-producer",user=""}'
    throttle = [
        line for line in text.splitlines() if line.startswith("kafka_server_Produce_throttle_time{")
    ]
    assert any(series in line and float(line.split()[-1]) > 0 for line in throttle), throttle
    assert f"kafka_server_Produce_byte_rate{{{series}" in text


def test_consumer_over_quota_is_held_to_it_and_loses_nothing(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    from kafka import KafkaConsumer, TopicPartition

    b = broker_factory(QUOTA_WINDOWS)
    create_topic_at(b.bootstrap, "fetched", 1)
    loader = ProducerRun(b.bootstrap, "fetched", "loader", 0.0)
    total = 2000
    for _ in range(total):
        while True:
            try:
                loader.producer.produce("fetched", VALUE)
                break
            except BufferError:
                loader.producer.poll(0.01)
    assert loader.producer.flush(30) == 0
    loader.close()
    set_quota(b.bootstrap, [("client-id", "slow-consumer")], "consumer_byte_rate", RATE)

    consumer = KafkaConsumer(
        bootstrap_servers=b.bootstrap,
        client_id="slow-consumer",
        enable_auto_commit=False,
        max_partition_fetch_bytes=FETCH_BYTES,
        fetch_max_bytes=FETCH_BYTES,
        fetch_max_wait_ms=100,
    )
    tp = TopicPartition("fetched", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    offsets: list[int] = []
    got: list[int] = []
    t0 = 0.0
    while not got or time.monotonic() - t0 < CONSUMER_RUN_S:  # from the first records on
        for records in consumer.poll(timeout_ms=100).values():
            if not got:
                t0 = time.monotonic()
            for r in records:
                offsets.append(r.offset)
                got.append(len(r.value))
    elapsed = time.monotonic() - t0
    throttle_max = max(
        (
            float(value)
            for group in consumer.metrics().values()
            for name, value in group.items()
            if name == "throttle-time-max" and value is not None
        ),
        default=0.0,
    )
    # the rest of the topic with the quota raised (it applies at once): every offset once,
    # in order
    set_quota(b.bootstrap, [("client-id", "slow-consumer")], "consumer_byte_rate", 1e9)
    deadline = time.monotonic() + 60
    while len(offsets) < total and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            offsets.extend(r.offset for r in records)
    consumer.close()

    ratio = held_to(sum(got), elapsed)
    print(f"throttled consumer: {ratio:.3f} x its quota, throttle-time-max {throttle_max} ms")
    assert 0.9 <= ratio <= 1.1, f"throttled consumer read at {ratio:.2f} x its quota"
    assert throttle_max > 0, "kafka-python reports the throttle time in its metrics"
    assert offsets == list(range(total))


def test_quotas_survive_sigterm_and_sigkill(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    set_quota(b.bootstrap, [("user", "alice"), ("client-id", "app")], "producer_byte_rate", 1e6)
    set_quota(b.bootstrap, [("user", None)], "request_percentage", 25.5)
    set_quota(b.bootstrap, [("client-id", None)], "consumer_byte_rate", 2048)
    expected = sorted(
        [
            ((("client-id", None),), {"consumer_byte_rate": 2048.0}),
            ((("client-id", "app"), ("user", "alice")), {"producer_byte_rate": 1e6}),
            ((("user", None),), {"request_percentage": 25.5}),
        ],
        key=repr,
    )
    assert described(b.bootstrap) == expected
    b.restart()
    assert described(b.bootstrap) == expected
    set_quota(b.bootstrap, [("client-id", None)], "consumer_byte_rate", 4096)
    b.kill()
    b.start()
    expected = [
        (entity, {"consumer_byte_rate": 4096.0} if entity == (("client-id", None),) else values)
        for entity, values in expected
    ]
    assert described(b.bootstrap) == expected


def test_request_percentage_throttles_by_handler_time(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """A client over its request-time quota gets throttle_time_ms in its answers (Metadata
    here), capped at one quota window as Kafka's ClientRequestQuotaManager caps it; another
    client id is not throttled, until its user gets a quota."""
    from kio.schema.metadata.v12 import request as metadata_v12

    b = broker_factory(QUOTA_WINDOWS)
    set_quota(b.bootstrap, [("client-id", None)], "request_percentage", 0.001)
    set_quota(b.bootstrap, [("client-id", "busy")], "request_percentage", 0.001)
    set_quota(b.bootstrap, [("client-id", "idle")], "request_percentage", 1000)
    request = metadata_v12.MetadataRequest(
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )

    def throttles(client_id: str) -> list[int]:
        with WireClient(b.bootstrap, client_id=client_id) as c:
            return [int(c.request(request).throttle_time.total_seconds() * 1000) for _ in range(5)]

    busy = throttles("busy")
    assert max(busy) > 0 and max(busy) <= 1000, busy
    assert throttles("idle") == [0] * 5
    # a quota of the user (the principal's name: ANONYMOUS on a PLAINTEXT listener) comes
    # before any client-id quota in Kafka's order, for every client id of that user
    set_quota(b.bootstrap, [("user", "ANONYMOUS")], "request_percentage", 0.001)
    assert max(throttles("idle")) > 0
