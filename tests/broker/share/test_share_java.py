"""The Java ``KafkaShareConsumer`` (kafka-clients 4.4.0 from Maven Central) against tidelog.

``tests/jvm/share/`` holds the pom, ``ShareSmoke.java`` and ``ShareModes.java``;
``scripts/jvm-deps`` resolves them into ``$JVM_DEPS_CACHE/share`` (lib/ and classes/). Skipped
with one line when Java or the fetched set is missing. The same programs run against Apache
Kafka 4.4 in ``tests/kafkaref/test_share_differential.py``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.share.share_support import (
    create_topic,
    produce,
    set_group_configs,
    start_share_broker,
)
from tests.support import share_behaviour
from tests.support.broker_process import BrokerProcess
from tests.support.jvm import jvm_set_classpath


@pytest.fixture(scope="module")
def share_classpath() -> str:
    return jvm_set_classpath("share")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module, allowing 1 s acquisition locks."""
    yield from start_share_broker(Path(tmp_path_factory.mktemp("share-java")))


def test_kafka_share_consumer_reads_releases_and_accepts(
    broker: BrokerProcess, share_classpath: str
) -> None:
    create_topic(broker.bootstrap, "java-share")
    set_group_configs(broker.bootstrap, "java-g", {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap, "java-share", [f"j{i}".encode() for i in range(10)])
    done = subprocess.run(
        ["java", "-cp", share_classpath, "ShareSmoke", broker.bootstrap, "java-share", "java-g",
         "10"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    accepted = dict(line.split(":") for line in done.stdout.split())
    assert sorted(int(o) for o in accepted) == list(range(10))
    assert accepted["0"] == "2"  # released once, then delivered again
    assert {accepted[str(i)] for i in range(1, 10)} == {"1"}


def test_renew_holds_a_record_past_its_lock(broker: BrokerProcess, share_classpath: str) -> None:
    # KIP-1222: four RENEW acknowledgements 1 s apart keep offset 0 with the consumer for 4 s
    # under a 2 s lock; it is never redelivered and its ACCEPT succeeds
    seen = share_behaviour.java_share_modes(
        share_classpath, broker.bootstrap, "java-renew", "renew", 5, 2000
    )
    assert seen["renewals"] == "4" and seen["errors"] == "0", seen
    assert seen["accepted"] == dict.fromkeys(range(5), 1), seen


def test_record_limit_acquire_mode(broker: BrokerProcess, share_classpath: str) -> None:
    # KIP-1206: share.acquire.mode=record_limit, max.poll.records=3 over one batch of 10
    seen = share_behaviour.java_share_modes(
        share_classpath, broker.bootstrap, "java-limit", "record_limit", 10, 15000
    )
    assert seen["polls"] == "3,3,3,1" and seen["errors"] == "0", seen
    assert seen["accepted"] == dict.fromkeys(range(10), 1), seen


def test_a_closing_consumers_last_acknowledgements_count(
    broker: BrokerProcess, share_classpath: str
) -> None:
    # close() sends its last ShareAcknowledge (epoch -1) and the leave heartbeat together; the
    # leave does not end the share session, so no accepted record comes back
    assert (
        share_behaviour.acks_of_a_closing_consumer(broker.bootstrap, "java-close", share_classpath)
        == 0
    )
