"""Metadata answers of every version (0-13) for many partitions, as clients read them (issue 20).

Described-topic answers are encoded by ``protocol.fast.metadata`` (pre-encoded, shared partition
arrays); answers with an error entry still go through kio. Both must read back, through kio's
reader of that exact version, as the same answer kio would have written: these tests decode what
the router sends and re-encode it with kio's writer, byte for byte. Then kafka-python,
confluent-kafka and aiokafka list the topics of a real ``tidelog serve``.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.broker_process import BrokerProcess
from tests.support.router_broker import AdminHarness
from tidelog.broker.topics import LEADER_EPOCH
from tidelog.protocol import codec

METADATA = 3
VERSIONS = range(14)
#: counts around the one-byte compact-array limit (a compact array of n stores n + 1)
COUNTS = {"tiny": 1, "edge-126": 126, "edge-127": 127, "big": 1300}
UNSET = -(2**31)
ZERO = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminHarness]:
    harness = AdminHarness(
        tmp_path_factory.mktemp("metadata") / "data", ("auto.create.topics.enable=false",)
    )
    for name, count in COUNTS.items():
        harness.create_topic(name, count)
    yield harness
    harness.close()


def _request(h: AdminHarness, version: int, names: list[str] | None, **flags: bool) -> Any:
    topics: Any = None
    if names is not None:
        topics = tuple(
            h.nested(METADATA, version, "MetadataRequestTopic", name=n, topic_id=ZERO)
            for n in names
        )
    elif version == 0:
        topics = ()  # v0: an empty list means every topic
    return h.request(
        METADATA,
        version,
        "MetadataRequest",
        topics=topics,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=flags.get("topic_ops", False),
        include_cluster_authorized_operations=flags.get("cluster_ops", False),
    )


def _answer(h: AdminHarness, version: int, request: Any) -> tuple[Any, bytes]:
    """The decoded answer and the framed bytes the router sent."""
    outcome = h.send(METADATA, version, request)
    if asyncio.iscoroutine(outcome):
        outcome = h.loop.run_until_complete(outcome)
    if isinstance(outcome, list):
        outcome = b"".join(bytes(chunk) for chunk in outcome)
    assert isinstance(outcome, bytes)
    return h.decode(METADATA, version, outcome), outcome


def _same_as_kio(version: int, decoded: Any, framed: bytes) -> None:
    (correlation_id,) = struct.unpack_from(">i", framed, 4)
    assert codec.encode_response(METADATA, version, correlation_id, decoded) == framed


def _check_described(version: int, topic: Any, count: int, node_id: int) -> None:
    assert topic.error_code == ErrorCode.none
    assert [p.partition_index for p in topic.partitions] == list(range(count))
    for p in topic.partitions:
        assert p.error_code == ErrorCode.none
        assert p.leader_id == node_id
        assert tuple(p.replica_nodes) == (node_id,) and tuple(p.isr_nodes) == (node_id,)
        if version >= 5:
            assert tuple(p.offline_replicas) == ()
        if version >= 7:
            assert p.leader_epoch == LEADER_EPOCH


@pytest.mark.parametrize("version", VERSIONS)
def test_every_topic_at_every_version(h: AdminHarness, version: int) -> None:
    answer, framed = _answer(h, version, _request(h, version, None))
    _same_as_kio(version, answer, framed)
    node_id = h.broker.node_id
    by_name = {t.name: t for t in answer.topics}
    assert set(COUNTS) <= set(by_name)
    for name, count in COUNTS.items():
        _check_described(version, by_name[name], count, node_id)
        if version >= 10:
            info = h.broker.topics.get(name)
            assert info is not None and by_name[name].topic_id == info.topic_id
        if version >= 8:
            assert by_name[name].topic_authorized_operations == UNSET
    (broker,) = answer.brokers
    assert broker.node_id == node_id
    if version >= 1:
        assert answer.controller_id == node_id
    if version >= 2:
        assert answer.cluster_id == h.broker.cluster_id


@pytest.mark.parametrize("version", [1, 4, 8, 9, 10, 12, 13])
def test_named_topics_with_an_unknown_one_keep_kio_and_the_order(
    h: AdminHarness, version: int
) -> None:
    asked = ["edge-127", "no-such", "tiny", "bad name!"]
    answer, framed = _answer(h, version, _request(h, version, asked))
    _same_as_kio(version, answer, framed)
    assert [t.name for t in answer.topics] == asked
    _check_described(version, answer.topics[0], 127, h.broker.node_id)
    assert answer.topics[1].error_code == ErrorCode.unknown_topic_or_partition
    assert answer.topics[1].partitions == ()
    _check_described(version, answer.topics[2], 1, h.broker.node_id)
    assert answer.topics[3].error_code == ErrorCode.invalid_topic_exception
    assert h.broker.topics.get("no-such") is None


@pytest.mark.parametrize("version", [8, 9, 10])
def test_authorized_operations_when_asked(h: AdminHarness, version: int) -> None:
    request = _request(h, version, ["tiny"], topic_ops=True, cluster_ops=True)
    answer, framed = _answer(h, version, request)
    _same_as_kio(version, answer, framed)
    (topic,) = answer.topics
    # no authorizer: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE/ALTER_CONFIGS
    assert topic.topic_authorized_operations == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    assert answer.cluster_authorized_operations not in (UNSET, 0)


def test_answers_follow_created_grown_and_deleted_topics(tmp_path: Path) -> None:
    """Nothing stale: the shared arrays are keyed by what they encode (the count, the leader)."""
    h = AdminHarness(tmp_path / "data")
    try:
        h.create_topic("grows", 3)
        h.create_topic("goes", 3)
        for version in (5, 13):
            answer, _ = _answer(h, version, _request(h, version, None))
            counts = {t.name: len(t.partitions) for t in answer.topics}
            assert (counts["grows"], counts["goes"]) == (3, 3)
        h.broker.topics.add_partitions("grows", 130)
        h.broker.topics.delete_topic("goes")
        h.create_topic("new", 2)
        for version in (5, 13):
            answer, framed = _answer(h, version, _request(h, version, None))
            _same_as_kio(version, answer, framed)
            counts = {t.name: len(t.partitions) for t in answer.topics}
            assert "goes" not in counts
            assert counts["grows"] == 130 and counts["new"] == 2
            grows = next(t for t in answer.topics if t.name == "grows")
            _check_described(version, grows, 130, h.broker.node_id)
    finally:
        h.close()


# --------------------------------------------------------------------------- real clients

#: topic -> partitions for the client tests
CLIENT_TOPICS = {"list-a": 1, "list-b": 700}


@pytest.fixture(scope="module")
def served(module_broker: BrokerProcess) -> BrokerProcess:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, n, 1) for name, n in CLIENT_TOPICS.items()], request_timeout=120
    )
    for future in futures.values():
        assert future.result(timeout=120) is None
    return module_broker


@pytest.mark.integration
def test_confluent_kafka_lists_every_topic(served: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": served.bootstrap}).list_topics(timeout=30)
    for name, count in CLIENT_TOPICS.items():
        topic = metadata.topics[name]
        assert topic.error is None
        assert sorted(topic.partitions) == list(range(count))
        (node_id,) = metadata.brokers
        for p in topic.partitions.values():
            assert (p.leader, p.replicas, p.isrs) == (node_id, [node_id], [node_id])


@pytest.mark.integration
def test_kafka_python_lists_every_topic(served: BrokerProcess) -> None:
    from kafka import KafkaConsumer
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=served.bootstrap)
    try:
        assert set(CLIENT_TOPICS) <= set(admin.list_topics())
        # Metadata for every topic, as kafka-python's dicts (the schema's field names)
        described = {t["name"]: t for t in admin.describe_topics()}
        for name, count in CLIENT_TOPICS.items():
            assert described[name]["error_code"] == 0
            partitions = described[name]["partitions"]
            assert sorted(p["partition_index"] for p in partitions) == list(range(count))
            assert {p["leader_id"] for p in partitions} == {
                p["replica_nodes"][0] for p in partitions
            }
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=served.bootstrap, group_id=None)
    try:
        topics = consumer.topics()  # Metadata for every topic
        assert set(CLIENT_TOPICS) <= topics
        for name, count in CLIENT_TOPICS.items():
            assert consumer.partitions_for_topic(name) == set(range(count))
    finally:
        consumer.close()


@pytest.mark.integration
def test_aiokafka_lists_every_topic(served: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=served.bootstrap)
        await admin.start()
        try:
            assert set(CLIENT_TOPICS) <= set(await admin.list_topics())
            described = {t["topic"]: t for t in await admin.describe_topics()}  # every topic
            for name, count in CLIENT_TOPICS.items():
                assert described[name]["error_code"] == 0
                partitions = described[name]["partitions"]
                assert sorted(p["partition"] for p in partitions) == list(range(count))
        finally:
            await admin.close()
        consumer = AIOKafkaConsumer(bootstrap_servers=served.bootstrap)
        await consumer.start()
        try:
            assert set(CLIENT_TOPICS) <= await consumer.topics()  # Metadata for every topic
        finally:
            await consumer.stop()

    asyncio.run(run())
