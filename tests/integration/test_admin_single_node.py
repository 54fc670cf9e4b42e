"""Admin APIs answered as a single-node Kafka answers them, through kafka-python 3's admin.

DescribeLogDirs (sizes per partition), ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, DescribeTopicPartitions (KIP-966) and ListGroups v5 filters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import request as fc3

from tests.support.kafka_wire import WireClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def admin(module_broker: Any) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    client.create_topics([NewTopic("sized", 3, 1), NewTopic("paged", 5, 1), NewTopic("tiny", 1, 1)])
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap)
    for _ in range(20):
        producer.send("sized", b"x" * 100, partition=1)
    producer.flush()
    producer.close()
    yield client
    client.close()


def test_describe_log_dirs_reports_partition_sizes(
    admin: KafkaAdminClient, module_broker: Any
) -> None:
    size = (module_broker.log_dir / "sized-1" / f"{0:020d}.log").stat().st_size
    assert size > 2000
    with WireClient(module_broker.bootstrap) as wire:  # makes __transaction_state, as in Kafka
        found = wire.request(fc3.FindCoordinatorRequest(key="tx", key_type=1))
        assert found.error_code == ErrorCode.none
    (per_broker,) = admin.describe_log_dirs()
    (log_dir,) = per_broker["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(module_broker.log_dir.resolve())
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    sizes = {
        (t["name"], p["partition_index"]): p["partition_size"]
        for t in log_dir["topics"]
        for p in t["partitions"]
    }
    assert sizes[("sized", 1)] == size
    assert sizes[("sized", 0)] == sizes[("tiny", 0)] == 0
    # internal topics are listed too (each is made by the first FindCoordinator of its type, as
    # in Kafka: __transaction_state above)
    assert ("__transaction_state", 0) in sizes
    (only,) = admin.describe_log_dirs({"sized": [1], "nope": [0]})
    assert only["log_dirs"][0]["topics"] == [
        {
            "name": "sized",
            "partitions": [
                {
                    "partition_index": 1,
                    "partition_size": size,
                    "offset_lag": 0,
                    "is_future_key": False,
                }
            ],
        }
    ]


def test_elect_leaders_is_never_needed(admin: KafkaAdminClient) -> None:
    answer = admin.elect_leaders(0, {"sized": [0, 1], "nope": [0]}, raise_errors=False)
    assert answer.error_code == 0
    got = {
        (r.topic, p.partition_id): (p.error_code, p.error_message)
        for r in answer.replica_election_results
        for p in r.partition_result
    }
    not_needed = (84, "Leader election not needed for topic partition.")
    assert got == {
        ("sized", 0): not_needed,
        ("sized", 1): not_needed,
        ("nope", 0): (3, "No such topic as nope"),
    }


def test_partition_reassignments(admin: KafkaAdminClient) -> None:
    node = admin.describe_cluster()["controller_id"]
    tp = TopicPartition("sized", 0)
    assert admin.alter_partition_reassignments({tp: [node]}) == {tp: None}
    assert admin.alter_partition_reassignments({tp: [node + 1]}) == {
        tp: InvalidReplicationAssignmentError
    }
    assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
    assert admin.list_partition_reassignments() == {}


def test_describe_topic_partitions_pages_with_a_cursor(admin: KafkaAdminClient) -> None:
    first = admin.describe_topic_partitions(["paged", "tiny"], response_partition_limit=4)
    assert [(t["name"], len(t["partitions"])) for t in first["topics"]] == [("paged", 4)]
    assert first["next_cursor"] == {"topic_name": "paged", "partition_index": 4}
    rest = admin.describe_topic_partitions(
        ["paged", "tiny"], response_partition_limit=4, cursor=first["next_cursor"]
    )
    partitions = [
        (t["name"], p["partition_index"]) for t in rest["topics"] for p in t["partitions"]
    ]
    assert partitions == [("paged", 4), ("tiny", 0)]
    assert rest["next_cursor"] is None


def test_list_groups_v5_type_filter(admin: KafkaAdminClient, module_broker: Any) -> None:
    consumer = KafkaConsumer(
        "tiny", bootstrap_servers=module_broker.bootstrap, group_id="classic-one"
    )
    try:
        for _ in range(50):
            consumer.poll(timeout_ms=100)
            if consumer.assignment():
                break
        classic = admin.list_groups(types_filter=["Classic"])
        assert "classic-one" in repr(classic), classic
        assert "classic-one" not in repr(admin.list_groups(types_filter=["consumer"]))
    finally:
        consumer.close()
