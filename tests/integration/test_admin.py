"""The admin APIs with stock clients against a real broker process.

kafka-python's KafkaAdminClient and confluent-kafka's AdminClient (librdkafka) drive
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, CreatePartitions, DeleteRecords,
DeleteTopics and DescribeCluster; producers, consumers and kcat check the effects.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KNewPartitions
from kafka.admin import NewTopic as KNewTopic
from kafka.errors import InvalidPartitionsError, UnknownTopicOrPartitionError

from tidelog.config import TOPIC_CONFIGS

pytestmark = pytest.mark.integration

TIMEOUT_S = 15


@pytest.fixture(scope="module")
def kadmin(module_broker: Any) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, client_id="admin-test")
    yield client
    client.close()


@pytest.fixture(scope="module")
def cadmin(module_broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": module_broker.bootstrap})


def results(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(TIMEOUT_S) for key, future in futures.items()}


def kcat(*args: str) -> str:
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (scripts/test installs it)")
    done = subprocess.run(
        ["kcat", *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=True
    )
    return done.stdout


def c_topic_configs(cadmin: AdminClient, topic: str) -> dict[str, Any]:
    (configs,) = results(
        cadmin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    ).values()
    return dict(configs)


def produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, b"value-%d" % i, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0


def read_from_beginning(bootstrap: str, tp: KTopicPartition, count: int) -> list[Any]:
    """kafka-python: assign ``tp``, seek to the beginning, read ``count`` records (or time out)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        records: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(records) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


# ---------------------------------------------------------------------------- DescribeConfigs


def test_kafka_python_describe_configs_lists_every_config(
    module_broker: Any, kadmin: KafkaAdminClient
) -> None:
    kadmin.create_topics([KNewTopic("kp-configs", 2, 1, topic_configs={"retention.ms": "3600000"})])
    described = kadmin.describe_configs(
        [KConfigResource(ConfigResourceType.TOPIC, "kp-configs")], config_filter="all"
    )
    configs = described["topic"]["kp-configs"]
    assert set(configs) == set(TOPIC_CONFIGS)
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["value"] == str(1024**3)
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    # The default filter ("modified") keeps only what was set on the topic.
    modified = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp-configs")])
    assert set(modified["topic"]["kp-configs"]) == {"retention.ms"}
    broker = kadmin.describe_configs(
        [KConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all"
    )["broker"]["1"]
    assert broker["log.dirs"]["value"] == str(module_broker.log_dir)
    assert broker["log.dirs"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert broker["num.partitions"]["config_source"] == "DEFAULT_CONFIG"


def test_confluent_describe_configs(module_broker: Any, cadmin: AdminClient) -> None:
    results(cadmin.create_topics([NewTopic("ck-configs", 1, 1, config={"segment.ms": "600000"})]))
    configs = c_topic_configs(cadmin, "ck-configs")
    assert set(configs) == set(TOPIC_CONFIGS)
    segment_ms = configs["segment.ms"]
    assert (segment_ms.value, segment_ms.is_default) == ("600000", False)
    assert segment_ms.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    retention = configs["retention.ms"]
    assert (retention.value, retention.is_default) == (str(7 * 24 * 3600 * 1000), True)
    assert retention.source == ConfigSource.DEFAULT_CONFIG.value
    (broker,) = results(
        cadmin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    ).values()
    assert broker["listeners"].value == f"PLAINTEXT://{module_broker.bootstrap}"
    assert broker["listeners"].is_read_only


# ---------------------------------------------------------------------------- Alter


def test_alter_configs_apply_at_once_and_survive_a_restart(broker_factory: Any) -> None:
    b = broker_factory({"offsets.topic.num.partitions": "1"})
    kadmin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        kadmin.create_topics([KNewTopic("altered", 1, 1, topic_configs={"segment.ms": "600000"})])
        resource = KConfigResource(ConfigResourceType.TOPIC, "altered")
        # IncrementalAlterConfigs SET (kafka-python's default on a broker that offers it).
        resource.configs = {"max.message.bytes": "1024", "retention.ms": "86400000"}
        assert kadmin.alter_configs([resource]) == {"topic": {"altered": "OK"}}
    finally:
        kadmin.close()
    # Applied to the live partition: a 2000-byte record is now too large.
    producer = Producer({"bootstrap.servers": b.bootstrap, "retries": 0})
    errors: list[Any] = []
    producer.produce("altered", b"x" * 2000, partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(TIMEOUT_S)
    assert errors and errors[0] is not None and errors[0].name() == "MSG_SIZE_TOO_LARGE"
    cadmin = AdminClient({"bootstrap.servers": b.bootstrap})
    resource_c = ConfigResource(
        ResourceType.TOPIC,
        "altered",
        incremental_configs=[
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
            ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    results(cadmin.incremental_alter_configs([resource_c]))
    b.restart()
    configs = c_topic_configs(AdminClient({"bootstrap.servers": b.bootstrap}), "altered")
    assert configs["max.message.bytes"].value == "1024"
    assert configs["retention.ms"].value == "86400000"
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["segment.ms"].is_default
    # Legacy AlterConfigs replaces the whole set: what is not named goes back to the default.
    kadmin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        resource = KConfigResource(ConfigResourceType.TOPIC, "altered", {"retention.ms": "5000"})
        kadmin.alter_configs([resource], incremental=False, raise_on_unknown=False)
        modified = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "altered")])
    finally:
        kadmin.close()
    # kafka-python re-sends the other modified keys itself before a legacy AlterConfigs.
    assert {k: v["value"] for k, v in modified["topic"]["altered"].items()} == {
        "retention.ms": "5000",
        "max.message.bytes": "1024",
        "cleanup.policy": "delete,compact",
    }


def test_bad_config_is_invalid_config_naming_the_key(
    kadmin: KafkaAdminClient, cadmin: AdminClient
) -> None:
    results(cadmin.create_topics([NewTopic("bad-configs", 1, 1)]))
    resource = KConfigResource(ConfigResourceType.TOPIC, "bad-configs", {"retention.mss": "1"})
    answer = kadmin.alter_configs([resource], raise_on_unknown=False)["topic"]["bad-configs"]
    assert "InvalidConfigurationError" in answer and "retention.mss" in answer
    bad = ConfigResource(
        ResourceType.TOPIC,
        "bad-configs",
        incremental_configs=[
            ConfigEntry("segment.bytes", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as caught:
        results(cadmin.incremental_alter_configs([bad]))
    error = caught.value.args[0]
    assert error.name() == "INVALID_CONFIG" and "segment.bytes" in error.str()
    assert c_topic_configs(cadmin, "bad-configs")["segment.bytes"].is_default


# ---------------------------------------------------------------------------- CreatePartitions


def test_create_partitions_grows_and_refuses_to_shrink(
    module_broker: Any, kadmin: KafkaAdminClient, cadmin: AdminClient
) -> None:
    kadmin.create_topics([KNewTopic("growing", 2, 1)])
    kadmin.create_partitions({"growing": KNewPartitions(4)})
    assert "partition 3, leader 1" in kcat("-b", module_broker.bootstrap, "-L", "-t", "growing")
    # Plain acks=all producer: what is under test is the new partition, not idempotence
    # (tests/integration/test_idempotence.py covers that).
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap)
    producer.send("growing", b"in-the-new-partition", partition=3).get(TIMEOUT_S)
    producer.close()
    (record,) = read_from_beginning(module_broker.bootstrap, KTopicPartition("growing", 3), 1)
    assert record.value == b"in-the-new-partition"
    with pytest.raises(InvalidPartitionsError, match="4 partition"):
        kadmin.create_partitions({"growing": KNewPartitions(3)})
    with pytest.raises(KafkaException) as caught:
        results(cadmin.create_partitions([NewPartitions("growing", 4)]))
    assert caught.value.args[0].name() == "INVALID_PARTITIONS"
    results(cadmin.create_partitions([NewPartitions("growing", 6)]))
    assert "partition 5, leader 1" in kcat("-b", module_broker.bootstrap, "-L", "-t", "growing")


# ---------------------------------------------------------------------------- DeleteRecords


def test_delete_records_raises_the_low_watermark(
    module_broker: Any, kadmin: KafkaAdminClient, cadmin: AdminClient
) -> None:
    results(cadmin.create_topics([NewTopic("trimmed", 2, 1)]))
    produce(module_broker.bootstrap, "trimmed", 0, 10)
    produce(module_broker.bootstrap, "trimmed", 1, 5)
    answer = kadmin.delete_records({KTopicPartition("trimmed", 0): 6})
    assert answer[KTopicPartition("trimmed", 0)]["low_watermark"] == 6
    (deleted,) = results(cadmin.delete_records([TopicPartition("trimmed", 1, -1)])).values()
    assert deleted.low_watermark == 5
    records = read_from_beginning(module_broker.bootstrap, KTopicPartition("trimmed", 0), 4)
    assert [r.offset for r in records] == [6, 7, 8, 9]
    assert "offset 6" in kcat("-b", module_broker.bootstrap, "-Q", "-t", "trimmed:0:-2")
    c_consumer = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "trim"})
    assert c_consumer.get_watermark_offsets(TopicPartition("trimmed", 1), TIMEOUT_S) == (5, 5)
    c_consumer.close()
    with pytest.raises(KafkaException) as caught:
        results(cadmin.delete_records([TopicPartition("trimmed", 0, 11)]))
    assert caught.value.args[0].name() == "OFFSET_OUT_OF_RANGE"


# ---------------------------------------------------------------------------- DeleteTopics


def test_delete_topics(module_broker: Any, kadmin: KafkaAdminClient, cadmin: AdminClient) -> None:
    kadmin.describe_groups(["probe"])  # a group lookup creates __consumer_offsets
    results(cadmin.create_topics([NewTopic("doomed-a", 2, 1), NewTopic("doomed-b", 1, 1)]))
    produce(module_broker.bootstrap, "doomed-a", 0, 3)
    kadmin.delete_topics(["doomed-a"])
    results(cadmin.delete_topics(["doomed-b"]))
    listed = cadmin.list_topics(timeout=TIMEOUT_S).topics
    assert "doomed-a" not in listed and "doomed-b" not in listed
    assert "doomed-a" not in kadmin.list_topics()
    metadata = kcat("-b", module_broker.bootstrap, "-L")
    assert "doomed-" not in metadata and "__consumer_offsets" in metadata
    names = [p.name for p in module_broker.log_dir.iterdir()]
    assert not any(n in ("doomed-a-0", "doomed-a-1", "doomed-b-0") for n in names)
    renamed = sorted(n.split(".")[0] for n in names if n.endswith("-delete"))
    assert {"doomed-a-0", "doomed-a-1", "doomed-b-0"} <= set(renamed)
    with pytest.raises(UnknownTopicOrPartitionError):
        kadmin.delete_topics(["doomed-a"])


# ---------------------------------------------------------------------------- DescribeCluster


def test_describe_cluster(
    module_broker: Any, kadmin: KafkaAdminClient, cadmin: AdminClient
) -> None:
    k = kadmin.describe_cluster()
    assert k["controller_id"] == 1 and len(k["cluster_id"]) == 22
    assert k["brokers"] == [
        {"broker_id": 1, "host": "127.0.0.1", "port": module_broker.port, "rack": None}
    ]
    c = cadmin.describe_cluster().result(TIMEOUT_S)
    assert c.cluster_id == k["cluster_id"]
    assert (c.controller.id, c.controller.host, c.controller.port) == (
        1,
        "127.0.0.1",
        module_broker.port,
    )
    assert [n.id for n in c.nodes] == [1]
