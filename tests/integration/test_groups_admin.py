"""Group administration through real admin clients: list, describe, offsets, delete.

kafka-python's KafkaAdminClient and confluent-kafka's AdminClient against one broker, with a
live confluent-kafka consumer group and an empty one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState, KafkaError
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import Consumer as CKConsumer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import MemberToRemove, NewTopic
from kafka.structs import OffsetAndMetadata, TopicPartition

pytestmark = pytest.mark.integration

OVERRIDES = {
    "group.initial.rebalance.delay.ms": "100",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "3",
}


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def setup(broker_factory: Any) -> Any:
    b = broker_factory(OVERRIDES)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    admin.create_topics([NewTopic("events", 4, 1), NewTopic("other", 2, 1)])
    producer = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(40):
        producer.send("events", value=b"x", partition=i % 4)
    producer.flush()
    producer.close()
    yield b, admin
    admin.close()


def test_list_describe_and_delete_groups(setup: Any) -> None:
    b, admin = setup
    ck_admin = AdminClient({"bootstrap.servers": b.bootstrap})

    # An empty group with committed offsets: a kafka-python consumer that commits and leaves.
    idle = KafkaConsumer(
        "events",
        bootstrap_servers=b.bootstrap,
        group_id="idle",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got = 0
    deadline = time.monotonic() + 30
    while got < 40 and time.monotonic() < deadline:
        got += sum(len(rs) for rs in idle.poll(timeout_ms=200).values())
    idle.commit()
    idle.close()

    # A live group: two confluent-kafka consumers.
    def live_config(i: int) -> dict[str, Any]:
        config = {
            "bootstrap.servers": b.bootstrap,
            "group.id": "live",
            "client.id": f"live-{i}",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range",
        }
        if i == 1:
            config["group.instance.id"] = "instance-1"  # a static member
        return config

    live = [CKConsumer(live_config(i)) for i in range(2)]
    try:
        for c in live:
            c.subscribe(["events"])

        def live_stable() -> bool:
            for c in live:
                c.poll(0.1)
            d = admin.describe_groups(["live"])["live"]
            return d["group_state"] == "Stable" and len(d["members"]) == 2

        wait_for(live_stable, 30, "the live group to stabilise")

        # kafka-python: ListGroups (with and without a state filter) and DescribeGroups.
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed["live"]["group_state"] == "Stable"
        assert listed["idle"]["group_state"] == "Empty"
        assert listed["live"]["protocol_type"] == "consumer"
        assert [g["group_id"] for g in admin.list_groups(states_filter=["Empty"])] == ["idle"]

        described = admin.describe_groups(["live", "idle", "never-seen"])
        live_desc = described["live"]
        assert live_desc["protocol_data"] == "range"
        members = {m["client_id"]: m for m in live_desc["members"]}
        assert set(members) == {"live-0", "live-1"}
        assert members["live-1"]["group_instance_id"] == "instance-1"
        assert members["live-0"]["client_host"] == "/127.0.0.1"
        partitions = sorted(
            p
            for m in members.values()
            for a in m["member_assignment"]["assigned_partitions"]
            for p in a["partitions"]
        )
        assert partitions == [0, 1, 2, 3]
        assert all(m["member_metadata"]["topics"] == ["events"] for m in members.values())
        assert described["idle"]["group_state"] == "Empty"
        assert described["idle"]["members"] == []
        assert described["never-seen"]["group_state"] == "Dead"

        # confluent-kafka: the same through its AdminClient.
        valid = ck_admin.list_consumer_groups().result().valid
        states = {g.group_id: g.state for g in valid}
        assert states["live"] == ConsumerGroupState.STABLE
        assert states["idle"] == ConsumerGroupState.EMPTY
        d = ck_admin.describe_consumer_groups(["live"])["live"].result()
        assert d.state == ConsumerGroupState.STABLE and d.partition_assignor == "range"
        ck_parts = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
        assert ck_parts == [0, 1, 2, 3]

        # Committed offsets, read back by both admin clients.
        offsets = admin.list_group_offsets("idle")["idle"]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {
            0: 10, 1: 10, 2: 10, 3: 10
        }  # fmt: skip
        req = ck_admin.list_consumer_group_offsets(
            [_ck_group_request("idle", [CKTopicPartition("events", p) for p in range(4)])]
        )
        res = req["idle"].result()
        assert [tp.offset for tp in res.topic_partitions] == [10, 10, 10, 10]

        # DeleteGroups: a live group is refused, an empty one goes with its offsets.
        result = admin.delete_groups(["live", "idle", "never-seen"])
        assert result["idle"] == "OK"
        assert "NonEmptyGroup" in str(result["live"])
        assert "GroupIdNotFound" in str(result["never-seen"])
        assert "idle" not in {g["group_id"] for g in admin.list_groups()}
        assert admin.list_group_offsets("idle")["idle"] == {}

        # Emptying the live group: the dynamic member leaves on close; the static one does
        # not (KIP-345) and is removed by its instance id (LeaveGroup v3+, as kafka-groups does).
        for c in live:
            c.close()
        live = []
        static = MemberToRemove(group_instance_id="instance-1")
        removed = admin.remove_group_members("live", [static])
        assert [e.__name__ for e in removed.values()] == ["NoError"]
        wait_for(
            lambda: admin.describe_groups(["live"])["live"]["group_state"] == "Empty",
            30,
            "the live group to empty",
        )
        futures = ck_admin.delete_consumer_groups(["live"])
        futures["live"].result()
        assert "live" not in {g["group_id"] for g in admin.list_groups()}
    finally:
        for c in live:
            c.close()


def _ck_group_request(group: str, partitions: list[CKTopicPartition]) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group, partitions)


def test_admin_offset_commits_and_offset_delete(setup: Any) -> None:
    b, admin = setup
    # Admin commits (generation -1) create a "simple" group, Empty, with no protocol.
    admin.alter_group_offsets(
        "manual",
        {
            TopicPartition("events", 0): OffsetAndMetadata(7, "note", -1),
            TopicPartition("other", 1): OffsetAndMetadata(3, "", -1),
        },
    )
    listed = {g["group_id"]: g for g in admin.list_groups()}
    assert listed["manual"] == {
        "group_id": "manual",
        "protocol_type": "",
        "group_state": "Empty",
        "group_type": "classic",  # ListGroups v5 (KIP-848)
    }
    offsets = admin.list_group_offsets("manual")["manual"]
    assert {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in offsets.items()} == {
        ("events", 0): (7, "note"),
        ("other", 1): (3, ""),
    }
    # OffsetDelete removes one partition's offset.
    admin.delete_group_offsets("manual", [TopicPartition("other", 1)])
    offsets = admin.list_group_offsets("manual")["manual"]
    assert [(tp.topic, tp.partition) for tp in offsets] == [("events", 0)]

    # A consumer then starts from the admin-committed position.
    consumer = CKConsumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "manual",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([CKTopicPartition("events", 0, -1001)])
    msg = None
    deadline = time.monotonic() + 20
    while msg is None and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and not m.error():
            msg = m
        elif m is not None and m.error().code() != KafkaError._PARTITION_EOF:
            raise AssertionError(str(m.error()))
    consumer.close()
    assert msg is not None and msg.offset() == 7
