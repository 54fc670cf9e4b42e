"""Share groups as clients see them, on tidelog and on Apache Kafka 4.4 side by side.

Each scenario of ``tests/support/share_behaviour.py`` (confluent-kafka's ``ShareConsumer``, raw
ShareGroupHeartbeat/ShareFetch requests, the Java ``KafkaShareConsumer`` 4.4 of
``tests/jvm/share``) runs on both brokers; the observations must be equal, and equal to what
Kafka 4.4 is known to answer (so a change on either side shows). The pair has its own Kafka
node: both brokers allow a 1 s acquisition lock (``group.share.min.record.lock.duration.ms``),
which the RENEW scenario needs to stay short. The Java comparisons are marked ``slow`` (about a
minute together; ``tests/broker/share/test_share_java.py`` runs the same programs on tidelog in
the default profile).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import share_behaviour as sb
from tests.support.broker_process import BrokerProcess
from tests.support.jvm import jvm_set_classpath
from tests.support.kafka_reference import KafkaProcess

pytestmark = pytest.mark.integration

LOCK_FLOOR = {"group.share.min.record.lock.duration.ms": "1000"}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    base = Path(tmp_path_factory.mktemp("share-differential"))
    kafka = KafkaProcess(jvm_set_classpath("kafka"), base / "kafka", LOCK_FLOOR)
    (base / "tidelog").mkdir()
    tidelog = BrokerProcess(
        base / "tidelog", {**LOCK_FLOOR, "group.initial.rebalance.delay.ms": "0"}
    ).start()
    try:
        kafka.start()
        yield {"tidelog": tidelog.bootstrap, "kafka": kafka.bootstrap}
    finally:
        kafka.stop()
        assert tidelog.stop() == 0, tidelog.log_text()[-3000:]


def _both(brokers: dict[str, str], scenario: Callable[[str, str], Any]) -> dict[str, Any]:
    name = f"sd-{uuid.uuid4().hex[:8]}"
    return {side: scenario(bootstrap, name) for side, bootstrap in brokers.items()}


def _same(seen: dict[str, Any], kafka_answers: Any) -> None:
    assert seen["kafka"] == kafka_answers, f"Apache Kafka 4.4 answered differently: {seen}"
    assert seen["tidelog"] == seen["kafka"], seen


def test_first_fetch_of_two_partitions_answers_one(brokers: dict[str, str]) -> None:
    # librdkafka's share-consumer suite asserts this shape (50 records, not 100)
    _same(_both(brokers, sb.first_fetch_shape), [50])


def test_members_joining_together_share_the_first_assignment(brokers: dict[str, str]) -> None:
    # The first member's first heartbeat assigns nothing (share state not initialized yet); then
    # 2 + 2. Whether the second member's first answer (sent right after) already holds a
    # partition depends on how fast the initialization is written, on either broker: only the
    # first answer and the settled split are compared.
    seen = _both(brokers, sb.first_assignment_of_members_joining_together)
    shapes = {
        name: {"first": got["first"][0], "settled": got["settled"]} for name, got in seen.items()
    }
    _same(shapes, {"first": 0, "settled": [2, 2]})


def test_acknowledging_records_of_a_deleted_topic(brokers: dict[str, str]) -> None:
    _same(_both(brokers, sb.ack_after_topic_deleted), ["UNKNOWN_TOPIC_ID"])


def test_a_closing_consumers_acknowledgements_count(brokers: dict[str, str]) -> None:
    # close() sends the last ShareAcknowledge (epoch -1) and the leave heartbeat together
    _same(_both(brokers, sb.acks_of_a_closing_consumer), 0)


@pytest.mark.slow
def test_a_closing_java_consumers_acknowledgements_count(brokers: dict[str, str]) -> None:
    classpath = jvm_set_classpath("share")
    _same(_both(brokers, lambda b, t: sb.acks_of_a_closing_consumer(b, t, classpath)), 0)


def test_by_duration_starts_at_the_first_recent_record(brokers: dict[str, str]) -> None:
    _same(_both(brokers, sb.by_duration_start), [5, 6, 7, 8, 9])


@pytest.mark.parametrize(("mode", "acquired"), [(0, [10]), (1, [3])])
def test_share_acquire_mode(brokers: dict[str, str], mode: int, acquired: list[int]) -> None:
    # KIP-1206: batch_optimized acquires the whole batch, record_limit at most MaxRecords
    _same(_both(brokers, lambda b, t: sb.acquired_by_one_fetch(b, t, mode)), acquired)


@pytest.mark.slow
def test_java_renew_keeps_a_record_past_its_lock(brokers: dict[str, str]) -> None:
    classpath = jvm_set_classpath("share")
    seen = _both(brokers, lambda b, t: sb.java_share_modes(classpath, b, t, "renew", 5, 2000))
    # renewed 4 times over 4 s with a 2 s lock: never redelivered, accepted without error
    _same(
        seen,
        {
            "accepted": dict.fromkeys(range(5), 1),
            "polls": "5,1,1,1,1",
            "renewals": "4",
            "errors": "0",
        },
    )


@pytest.mark.slow
def test_java_record_limit_mode(brokers: dict[str, str]) -> None:
    classpath = jvm_set_classpath("share")
    seen = _both(
        brokers, lambda b, t: sb.java_share_modes(classpath, b, t, "record_limit", 10, 15000)
    )
    _same(
        seen,
        {
            "accepted": dict.fromkeys(range(10), 1),
            "polls": "3,3,3,1",
            "renewals": "0",
            "errors": "0",
        },
    )
