"""The way out (and in), as docs/moving-to-kafka.md tells it: MirrorMaker 2 (``connect-mirror``
of tests/jvm/connect) copies topics, their configs and a consumer group's offsets from tidelog to
Apache Kafka, and the application's group resumes on Kafka where it stopped on tidelog: nothing
lost, nothing repeated. The same MirrorMaker copies a Kafka topic into tidelog (a laptop copy).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.broker_process import BrokerProcess
from tests.support.jvm import jvm_set_classpath
from tests.support.kafka_reference import KafkaProcess
from tests.support.migration import (
    committed_offsets,
    consume_n,
    end_offsets,
    make_topic,
    produce_numbered,
    wait_for,
)
from tests.support.mirror_maker import MirrorMaker2

pytestmark = pytest.mark.integration

OUT, IN = "mig-out", "mig-in"  # tidelog -> Kafka, Kafka -> tidelog
APP, LAPTOP = "mig-app", "mig-laptop"


def _retention(bootstrap: str, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    return str(configs["retention.ms"].value)


@pytest.fixture(scope="module")
def migrated(
    kafka_broker: KafkaProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, KafkaProcess, list[int]]]:
    base = tmp_path_factory.mktemp("migration")
    (base / "data").mkdir()
    tidelog = BrokerProcess(base / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
    # the application on tidelog: a topic with a config, records, a group that read them all
    make_topic(tidelog.bootstrap, OUT, 2, **{"retention.ms": "86400000"})
    produce_numbered(tidelog.bootstrap, OUT, 0, 100)
    seen = consume_n(tidelog.bootstrap, OUT, APP, None)
    # and a topic on Kafka to bring home
    make_topic(kafka_broker.bootstrap, IN, 1, **{"retention.ms": "3600000"})
    produce_numbered(kafka_broker.bootstrap, IN, 0, 30)
    suffix = str(int(time.time()))  # new aliases: MM2's internal topics start empty
    mm2 = MirrorMaker2(
        jvm_set_classpath("connect"),
        base / "mm2",
        {f"tidelog{suffix}": tidelog.bootstrap, f"kafka{suffix}": kafka_broker.bootstrap},
        {
            (f"tidelog{suffix}", f"kafka{suffix}"): (OUT, APP),
            (f"kafka{suffix}", f"tidelog{suffix}"): (IN, "none"),
        },
    ).start()
    try:
        source_ends = end_offsets(tidelog.bootstrap, OUT, 2)
        wanted = committed_offsets(tidelog.bootstrap, APP)
        assert wanted == source_ends  # the group read everything (drained, as the doc says)
        wait_for(
            "the copy", lambda: end_offsets(kafka_broker.bootstrap, OUT, 2) == source_ends, 240
        )
        wait_for(
            "the group's offsets",
            lambda: committed_offsets(kafka_broker.bootstrap, APP) == wanted,
            180,
        )
        wait_for("the way in", lambda: end_offsets(tidelog.bootstrap, IN, 1) == {(IN, 0): 30}, 120)
    except AssertionError:
        raise AssertionError(mm2.log_text()[-6000:]) from None
    finally:
        mm2.stop()
    yield tidelog, kafka_broker, seen
    assert tidelog.stop() == 0


def test_group_resumes_on_kafka(migrated: tuple[BrokerProcess, KafkaProcess, list[int]]) -> None:
    _tidelog, kafka, seen = migrated
    assert sorted(seen) == list(range(100))
    # the producers move to Kafka and write on; the group carries on there
    produce_numbered(kafka.bootstrap, OUT, 100, 20)
    rest = consume_n(kafka.bootstrap, OUT, APP, None)
    assert sorted(rest) == list(range(100, 120))  # nothing lost, nothing repeated


def test_topic_configs_are_copied(migrated: tuple[BrokerProcess, KafkaProcess, list[int]]) -> None:
    tidelog, kafka, _ = migrated
    assert _retention(kafka.bootstrap, OUT) == "86400000"
    assert _retention(tidelog.bootstrap, IN) == "3600000"


def test_kafka_topic_comes_home(migrated: tuple[BrokerProcess, KafkaProcess, list[int]]) -> None:
    tidelog, _, _ = migrated
    assert sorted(consume_n(tidelog.bootstrap, IN, LAPTOP, None)) == list(range(30))
