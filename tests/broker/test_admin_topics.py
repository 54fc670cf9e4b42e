"""DeleteTopics, CreatePartitions, DeleteRecords and DescribeCluster against a real broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.router_broker import AdminHarness
from tidelog.broker.group.service import GROUP_KEY_TYPE

DELETE_TOPICS, DELETE_RECORDS, CREATE_PARTITIONS, DESCRIBE_CLUSTER = 20, 21, 37, 60
ZERO = uuid.UUID(int=0)


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AdminHarness]:
    harness = AdminHarness(tmp_path / "data", ("broker.rack=r1",))
    yield harness
    harness.close()


def delete_topics(h: AdminHarness, names: list[str], version: int = 5) -> list[Any]:
    t = h.types(DELETE_TOPICS, version)
    if version >= 6:
        request = t.DeleteTopicsRequest(
            topics=tuple(t.DeleteTopicState(name=n, topic_id=ZERO) for n in names),
            timeout=timedelta(seconds=5),
        )
    else:
        request = t.DeleteTopicsRequest(topic_names=tuple(names), timeout=timedelta(seconds=5))
    return list(h.call(DELETE_TOPICS, version, request).responses)


def create_partitions(
    h: AdminHarness,
    topics: list[tuple[str, int, list[list[int]] | None]],
    version: int = 3,
    validate_only: bool = False,
) -> list[Any]:
    t = h.types(CREATE_PARTITIONS, version)
    request = t.CreatePartitionsRequest(
        topics=tuple(
            t.CreatePartitionsTopic(
                name=name,
                count=count,
                assignments=None
                if assignments is None
                else tuple(t.CreatePartitionsAssignment(broker_ids=tuple(a)) for a in assignments),
            )
            for name, count, assignments in topics
        ),
        timeout=timedelta(seconds=5),
        validate_only=validate_only,
    )
    return list(h.call(CREATE_PARTITIONS, version, request).results)


def delete_records(
    h: AdminHarness, topic: str, offsets: dict[int, int], version: int = 2
) -> dict[int, tuple[ErrorCode, int]]:
    t = h.types(DELETE_RECORDS, version)
    request = t.DeleteRecordsRequest(
        topics=(
            t.DeleteRecordsTopic(
                name=topic,
                partitions=tuple(
                    t.DeleteRecordsPartition(partition_index=p, offset=o)
                    for p, o in offsets.items()
                ),
            ),
        ),
        timeout=timedelta(seconds=5),
    )
    (result,) = h.call(DELETE_RECORDS, version, request).topics
    assert result.name == topic
    return {p.partition_index: (p.error_code, p.low_watermark) for p in result.partitions}


def user_topics(h: AdminHarness) -> list[str]:
    return [n for n in h.broker.topics.names() if not n.startswith("__")]


# ---------------------------------------------------------------------------- DeleteTopics


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
def test_delete_topics_by_name(h: AdminHarness, version: int) -> None:
    h.create_topic("doomed", 2)
    h.create_topic("kept")
    h.produce("doomed", 0, 3)
    responses = delete_topics(h, ["doomed", "never-was"], version)
    by_name = {r.name: r.error_code for r in responses}
    assert by_name == {
        "doomed": ErrorCode.none,
        "never-was": ErrorCode.unknown_topic_or_partition,
    }
    assert user_topics(h) == ["kept"]
    renamed = sorted(p.name for p in (h.log_dir).iterdir() if p.name.endswith("-delete"))
    assert len(renamed) == 2 and all(n.startswith("doomed-") for n in renamed)
    assert not (h.log_dir / "doomed-0").exists()
    h.restart()
    assert user_topics(h) == ["kept"]
    # The name is free again: a new topic starts with empty logs.
    h.create_topic("doomed", 1)
    log = h.broker.topics.get_log("doomed", 0)
    assert log is not None and log.log_end_offset == 0


def test_delete_topics_by_id_and_request_errors(h: AdminHarness) -> None:
    h.create_topic("a")
    h.create_topic("b")
    info = h.broker.topics.get("a")
    assert info is not None
    t = h.types(DELETE_TOPICS, 6)
    request = t.DeleteTopicsRequest(
        topics=(
            t.DeleteTopicState(name=None, topic_id=info.topic_id),
            t.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
            t.DeleteTopicState(name="b", topic_id=uuid.uuid4()),
            t.DeleteTopicState(name=None, topic_id=ZERO),
        ),
        timeout=timedelta(seconds=5),
    )
    by_id, unknown, both, neither = h.call(DELETE_TOPICS, 6, request).responses
    assert (by_id.name, by_id.topic_id, by_id.error_code) == ("a", info.topic_id, ErrorCode.none)
    assert unknown.error_code == ErrorCode.unknown_topic_id
    assert both.error_code == neither.error_code == ErrorCode.invalid_request
    assert user_topics(h) == ["b"]
    (dup,) = delete_topics(h, ["b", "b"])
    assert dup.error_code == ErrorCode.invalid_request
    assert dup.error_message == "Duplicate topic name."
    assert user_topics(h) == ["b"]


def test_internal_topic_is_not_deleted(h: AdminHarness) -> None:
    # what the first group request does (FindCoordinator)
    h.loop.run_until_complete(h.broker.coordinator_topics[GROUP_KEY_TYPE]())
    (r,) = delete_topics(h, ["__consumer_offsets"])
    assert r.error_code == ErrorCode.invalid_topic_exception
    assert "__consumer_offsets" in h.broker.topics


@pytest.mark.parametrize(
    ("version", "code"), [(2, "invalid_request"), (6, "topic_deletion_disabled")]
)
def test_delete_disabled(tmp_path: Path, version: int, code: str) -> None:
    harness = AdminHarness(tmp_path / "data", ("delete.topic.enable=false",))
    try:
        harness.create_topic("t")
        (r,) = delete_topics(harness, ["t"], version)
        assert r.error_code == ErrorCode[code]
        assert user_topics(harness) == ["t"]
    finally:
        harness.close()


# ---------------------------------------------------------------------------- CreatePartitions


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_partitions_grows_the_topic(h: AdminHarness, version: int) -> None:
    h.create_topic("t", 2, retention_ms="12345")
    (r,) = create_partitions(h, [("t", 5, None)], version)
    assert (r.name, r.error_code) == ("t", ErrorCode.none)
    info = h.broker.topics.get("t")
    assert info is not None and info.partitions == 5
    for partition in range(5):
        log = h.broker.topics.get_log("t", partition)
        assert log is not None and log.config.retention_ms == 12345
    h.produce("t", 4, 2)
    h.restart()
    log = h.broker.topics.get_log("t", 4)
    assert log is not None and log.log_end_offset == 2


def test_create_partitions_refuses_no_increase(h: AdminHarness) -> None:
    h.create_topic("t", 3)
    same, missing = create_partitions(h, [("t", 3, None), ("x", 4, None)])
    assert same.error_code == ErrorCode.invalid_partitions
    assert same.error_message == "Topic already has 3 partition(s)."
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    h.create_topic("t2", 2)
    (fewer,) = create_partitions(h, [("t2", 1, None)])
    assert fewer.error_code == ErrorCode.invalid_partitions
    assert fewer.error_message == (
        "The topic t2 currently has 2 partition(s); 1 would not be an increase."
    )
    info = h.broker.topics.get("t2")
    assert info is not None and info.partitions == 2


def test_create_partitions_assignments_and_validate_only(h: AdminHarness) -> None:
    # what the first group request does (FindCoordinator)
    h.loop.run_until_complete(h.broker.coordinator_topics[GROUP_KEY_TYPE]())
    h.create_topic("t", 1)
    cases = [
        ([[1]], ErrorCode.invalid_replica_assignment),  # 2 new partitions, 1 assignment
        ([[1], []], ErrorCode.invalid_replica_assignment),
        ([[1], [2]], ErrorCode.invalid_replica_assignment),
        ([[1], [1, 1]], ErrorCode.invalid_replica_assignment),
    ]
    for assignments, code in cases:
        (r,) = create_partitions(h, [("t", 3, assignments)])
        assert r.error_code == code, (assignments, r)
    (r,) = create_partitions(h, [("t", 3, [[1], [1]])], validate_only=True)
    assert r.error_code == ErrorCode.none
    info = h.broker.topics.get("t")
    assert info is not None and info.partitions == 1
    (r,) = create_partitions(h, [("t", 3, [[1], [1]])])
    assert r.error_code == ErrorCode.none
    info = h.broker.topics.get("t")
    assert info is not None and info.partitions == 3
    (dup,) = create_partitions(h, [("t", 4, None), ("t", 5, None)])
    assert dup.error_code == ErrorCode.invalid_request
    (internal,) = create_partitions(h, [("__consumer_offsets", 4, None)])
    assert internal.error_code == ErrorCode.invalid_topic_exception


# ---------------------------------------------------------------------------- DeleteRecords


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_raises_the_log_start(h: AdminHarness, version: int) -> None:
    h.create_topic("t", 3)
    h.produce("t", 0, 10)
    h.produce("t", 1, 4)
    result = delete_records(h, "t", {0: 6, 1: -1, 2: 0}, version)
    assert result == {0: (ErrorCode.none, 6), 1: (ErrorCode.none, 4), 2: (ErrorCode.none, 0)}
    log = h.broker.topics.get_log("t", 0)
    assert log is not None and log.log_start_offset == 6
    # Lower than the current start: nothing changes, the answer says where it is.
    assert delete_records(h, "t", {0: 2}) == {0: (ErrorCode.none, 6)}
    h.restart()
    log = h.broker.topics.get_log("t", 0)
    assert log is not None and log.log_start_offset == 6


def test_delete_records_errors(h: AdminHarness) -> None:
    # what the first group request does (FindCoordinator)
    h.loop.run_until_complete(h.broker.coordinator_topics[GROUP_KEY_TYPE]())
    h.create_topic("t", 1)
    h.produce("t", 0, 5)
    result = delete_records(h, "t", {0: 6, 3: 1})
    assert result == {
        0: (ErrorCode.offset_out_of_range, -1),
        3: (ErrorCode.unknown_topic_or_partition, -1),
    }
    assert delete_records(h, "t", {0: -2}) == {0: (ErrorCode.offset_out_of_range, -1)}
    assert delete_records(h, "nope", {0: 1}) == {0: (ErrorCode.unknown_topic_or_partition, -1)}
    h.create_topic("compacted", 1, cleanup_policy="compact")
    assert delete_records(h, "compacted", {0: 0}) == {0: (ErrorCode.policy_violation, -1)}
    assert delete_records(h, "__consumer_offsets", {0: 0}) == {
        0: (ErrorCode.invalid_topic_exception, -1)
    }


# ---------------------------------------------------------------------------- DescribeCluster


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster(h: AdminHarness, version: int) -> None:
    t = h.types(DESCRIBE_CLUSTER, version)
    kwargs: dict[str, Any] = {"endpoint_type": 1} if version >= 1 else {}
    r = h.call(
        DESCRIBE_CLUSTER,
        version,
        t.DescribeClusterRequest(include_cluster_authorized_operations=True, **kwargs),
    )
    assert r.error_code == ErrorCode.none
    assert r.cluster_id == h.broker.cluster_id and len(r.cluster_id) == 22
    assert r.controller_id == 1
    (node,) = r.brokers
    port = h.broker.listeners[0].port
    assert (node.broker_id, node.host, node.port, node.rack) == (1, "127.0.0.1", port, "r1")
    assert r.cluster_authorized_operations > 0


def test_describe_cluster_controller_endpoint_is_refused(h: AdminHarness) -> None:
    t = h.types(DESCRIBE_CLUSTER, 1)
    r = h.call(
        DESCRIBE_CLUSTER,
        1,
        t.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2),
    )
    assert r.error_code == ErrorCode.mismatched_endpoint_type
    assert r.brokers == ()
