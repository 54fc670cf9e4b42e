"""ConsumerGroupHeartbeat, ConsumerGroupDescribe and OffsetCommit/OffsetFetch v9 of consumer
groups, in encoded frames through a real broker's router; the group survives a restart."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.router_broker import WireBroker
from tidelog.broker.group.consumer import records as rec
from tidelog.storage.record_codec import iter_records

HEARTBEAT, DESCRIBE, COMMIT, FETCH, LIST, JOIN = 68, 69, 8, 9, 16, 11


@pytest.fixture
def w(tmp_path: Path) -> Iterator[WireBroker]:
    wire = WireBroker(tmp_path / "data", "group.consumer.session.timeout.ms=60000")
    wire.broker.topics.create_topic("t", 4)
    yield wire
    wire.close()


def heartbeat(
    w: WireBroker,
    group: str,
    member_id: str,
    epoch: int,
    *,
    topics: tuple[str, ...] | None = ("t",),
    owned: dict[uuid.UUID, list[int]] | None = None,
    instance_id: str | None = None,
    version: int = 1,
) -> Any:
    tp = tuple(
        w.nested(HEARTBEAT, version, "TopicPartitions", topic_id=t, partitions=tuple(ps))
        for t, ps in (owned or {}).items()
    )
    request = w.request(
        HEARTBEAT,
        version,
        "ConsumerGroupHeartbeatRequest",
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rack_id=None,
        rebalance_timeout=timedelta(milliseconds=30000 if epoch == 0 else -1),
        subscribed_topic_names=topics,
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=tp if (owned is not None or epoch == 0) else None,
    )
    return w.call(HEARTBEAT, version, request)


def assigned(response: Any) -> dict[uuid.UUID, list[int]]:
    assert response.assignment is not None
    return {t.topic_id: sorted(t.partitions) for t in response.assignment.topic_partitions}


def commit(w: WireBroker, group: str, member_id: str, epoch: int, version: int = 9) -> Any:
    part = w.nested(
        COMMIT, version, "OffsetCommitRequestPartition",
        partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata="",
    )  # fmt: skip
    topic = w.nested(COMMIT, version, "OffsetCommitRequestTopic", name="t", partitions=(part,))
    request = w.request(
        COMMIT, version, "OffsetCommitRequest",
        group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
        group_instance_id=None, retention_time=timedelta(milliseconds=-1), topics=(topic,),
    )  # fmt: skip
    return w.call(COMMIT, version, request).topics[0].partitions[0].error_code


def describe(w: WireBroker, *groups: str) -> Any:
    request = w.request(
        DESCRIBE, 1, "ConsumerGroupDescribeRequest",
        group_ids=groups, include_authorized_operations=False,
    )  # fmt: skip
    return w.call(DESCRIBE, 1, request).groups


def test_join_share_reconcile_and_leave(w: WireBroker) -> None:
    topic_id = w.broker.topics.get("t").topic_id  # type: ignore[union-attr]
    a = heartbeat(w, "g", "member-a", 0)
    assert (a.error_code, a.member_id, a.member_epoch) == (ErrorCode.none, "member-a", 1)
    assert assigned(a) == {topic_id: [0, 1, 2, 3]}
    assert a.heartbeat_interval == timedelta(milliseconds=5000)
    b = heartbeat(w, "g", "member-b", 0)
    assert (b.member_epoch, assigned(b)) == (2, {})  # its partitions are not released yet
    # a must revoke two partitions before b gets them
    a2 = heartbeat(w, "g", "member-a", 1, owned={topic_id: [0, 1, 2, 3]})
    assert a2.member_epoch == 1 and len(assigned(a2)[topic_id]) == 2
    kept = assigned(a2)[topic_id]
    a3 = heartbeat(w, "g", "member-a", 1, owned={topic_id: kept})
    assert a3.member_epoch == 2
    b2 = heartbeat(w, "g", "member-b", 2, owned={})
    assert sorted(assigned(b2)[topic_id] + kept) == [0, 1, 2, 3]
    (group,) = describe(w, "g")
    assert (group.group_state, group.group_epoch, group.assignment_epoch) == ("Stable", 2, 2)
    assert group.assignor_name == "uniform"
    assert {m.member_id: m.member_epoch for m in group.members} == {"member-a": 2, "member-b": 2}
    left = heartbeat(w, "g", "member-b", -1, topics=None)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    (group,) = describe(w, "g")
    assert group.group_epoch == 3 and [m.member_id for m in group.members] == ["member-a"]


def test_heartbeat_errors(w: WireBroker) -> None:
    heartbeat(w, "g", "m", 0)
    assert heartbeat(w, "g", "other", 1).error_code == ErrorCode.unknown_member_id
    fenced = heartbeat(w, "g", "m", 5)
    assert fenced.error_code == ErrorCode.fenced_member_epoch
    assert "greater member epoch" in fenced.error_message
    assert heartbeat(w, "", "m", 0).error_code == ErrorCode.invalid_request
    assert heartbeat(w, "nope", "m", 3).error_code == ErrorCode.group_id_not_found
    bad_assignor = w.request(
        HEARTBEAT, 1, "ConsumerGroupHeartbeatRequest",
        group_id="g", member_id="x", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=("t",),
        subscribed_topic_regex=None, server_assignor="sticky", topic_partitions=(),
    )  # fmt: skip
    assert w.call(HEARTBEAT, 1, bad_assignor).error_code == ErrorCode.unsupported_assignor


def test_offset_commit_and_fetch_check_member_epochs(w: WireBroker) -> None:
    heartbeat(w, "g", "m", 0)
    assert commit(w, "g", "m", 1) == ErrorCode.none
    assert commit(w, "g", "m", 0) == ErrorCode.stale_member_epoch
    assert commit(w, "g", "ghost", 1) == ErrorCode.unknown_member_id
    assert commit(w, "g", "m", 1, version=8) == ErrorCode.unsupported_version
    group = w.nested(
        FETCH, 9, "OffsetFetchRequestGroup", group_id="g", member_id="m", member_epoch=0,
        topics=(w.nested(FETCH, 9, "OffsetFetchRequestTopics", name="t", partition_indexes=(0,)),),
    )  # fmt: skip
    stale = w.call(FETCH, 9, w.request(FETCH, 9, "OffsetFetchRequest", groups=(group,)))
    assert stale.groups[0].error_code == ErrorCode.stale_member_epoch
    group = w.nested(
        FETCH, 9, "OffsetFetchRequestGroup", group_id="g", member_id="m", member_epoch=1,
        topics=(w.nested(FETCH, 9, "OffsetFetchRequestTopics", name="t", partition_indexes=(0,)),),
    )  # fmt: skip
    ok = w.call(FETCH, 9, w.request(FETCH, 9, "OffsetFetchRequest", groups=(group,)))
    assert ok.groups[0].error_code == ErrorCode.none
    assert ok.groups[0].topics[0].partitions[0].committed_offset == 7


def test_group_and_offsets_survive_a_restart_from_kafka_records(w: WireBroker) -> None:
    topic_id = w.broker.topics.get("t").topic_id  # type: ignore[union-attr]
    heartbeat(w, "g", "m", 0, instance_id="i-1")
    assert commit(w, "g", "m", 1) == ErrorCode.none
    # The records on disk are Kafka 4's consumer group records.
    versions = set()
    for p in range(w.broker.topics.get("__consumer_offsets").partitions):  # type: ignore[union-attr]
        log = w.broker.topics.get_log("__consumer_offsets", p)
        assert log is not None
        data = log.read(0, 1 << 20, upper_bound=log.log_end_offset).read_bytes()
        versions |= {rec.key_version(r.key) for r in iter_records(data) if r.key}
    assert {3, 4, 5, 6, 7, 8} <= versions
    w.restart()
    (group,) = describe(w, "g")
    assert (group.group_state, group.group_epoch, group.assignment_epoch) == ("Stable", 1, 1)
    (member,) = group.members
    assert (member.member_id, member.instance_id, member.member_epoch) == ("m", "i-1", 1)
    assert {t.topic_id: sorted(t.partitions) for t in member.assignment.topic_partitions} == {
        topic_id: [0, 1, 2, 3]
    }
    # The member carries on with its epoch; its offsets are still there.
    again = heartbeat(w, "g", "m", 1, owned={topic_id: [0, 1, 2, 3]})
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, 1)
    assert commit(w, "g", "m", 1) == ErrorCode.none


def test_describe_and_list_report_the_group_type(w: WireBroker) -> None:
    heartbeat(w, "modern", "m", 0)
    missing, modern = describe(w, "missing", "modern")
    assert (missing.error_code, missing.error_message) == (
        ErrorCode.group_id_not_found,
        "Group missing not found.",
    )
    assert modern.error_code == ErrorCode.none
    listed = w.call(
        LIST,
        5,
        w.request(LIST, 5, "ListGroupsRequest", states_filter=(), types_filter=("consumer",)),
    )
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
        ("modern", "consumer", "consumer")
    ]


def test_static_member_rejoins_with_its_assignment(w: WireBroker) -> None:
    topic_id = w.broker.topics.get("t").topic_id  # type: ignore[union-attr]
    first = heartbeat(w, "g", "m1", 0, instance_id="box-1")
    heartbeat(w, "g", "other", 0)
    mine = assigned(heartbeat(w, "g", "m1", 1, owned={topic_id: [0, 1, 2, 3]}))
    assert first.member_epoch == 1 and len(mine[topic_id]) == 2
    step = heartbeat(w, "g", "m1", 1, owned=mine)
    assert step.member_epoch == 2
    taken = heartbeat(w, "g", "m2", 0, instance_id="box-1")
    assert taken.error_code == ErrorCode.unreleased_instance_id
    left = heartbeat(w, "g", "m1", -2, topics=None, instance_id="box-1")
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -2)
    back = heartbeat(w, "g", "m2", 0, instance_id="box-1")
    assert back.error_code == ErrorCode.none and back.member_id == "m2"
    assert assigned(back) == mine  # same partitions, no rebalance
    (group,) = describe(w, "g")
    assert sorted(m.member_id for m in group.members) == ["m2", "other"]
    assert group.group_epoch == 2  # a static member coming back does not bump the epoch


def test_regex_subscription_follows_new_topics(w: WireBroker) -> None:
    request = w.request(
        HEARTBEAT, 1, "ConsumerGroupHeartbeatRequest",
        group_id="rx", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=None,
        subscribed_topic_regex="orders-.*", server_assignor="range", topic_partitions=(),
    )  # fmt: skip
    w.broker.topics.create_topic("orders-eu", 2)
    w.broker.topics.create_topic("payments", 2)
    joined = w.call(HEARTBEAT, 1, request)
    eu = w.broker.topics.get("orders-eu").topic_id  # type: ignore[union-attr]
    assert assigned(joined) == {eu: [0, 1]}
    w.broker.topics.create_topic("orders-us", 1)
    us = w.broker.topics.get("orders-us").topic_id  # type: ignore[union-attr]
    later = heartbeat(w, "rx", "m", 1, topics=None, owned={eu: [0, 1]})
    assert later.member_epoch == 2 and assigned(later) == {eu: [0, 1], us: [0]}
    (group,) = describe(w, "rx")
    assert group.assignor_name == "range"
    assert group.members[0].subscribed_topic_regex == "orders-.*"


def test_empty_groups_switch_protocols_both_ways(w: WireBroker) -> None:
    protocol = w.nested(JOIN, 5, "JoinGroupRequestProtocol", name="range", metadata=b"")
    join = w.request(
        JOIN, 5, "JoinGroupRequest",
        group_id="switch", session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=10), member_id="", group_instance_id=None,
        protocol_type="consumer", protocols=(protocol,),
    )  # fmt: skip
    heartbeat(w, "switch", "m", 0)
    assert w.call(JOIN, 5, join).error_code == ErrorCode.inconsistent_group_protocol
    heartbeat(w, "switch", "m", -1, topics=None)
    # empty consumer group -> a classic member may take the id over (downgrade)
    assert w.call(JOIN, 5, join).error_code == ErrorCode.member_id_required
    (group,) = describe(w, "switch")
    assert group.error_code == ErrorCode.group_id_not_found
    assert group.error_message == "Group switch is not a consumer group."


def test_member_keeping_revoked_partitions_is_fenced_after_its_rebalance_timeout(
    w: WireBroker,
) -> None:
    topic_id = w.broker.topics.get("t").topic_id  # type: ignore[union-attr]
    slow = w.request(
        HEARTBEAT, 1, "ConsumerGroupHeartbeatRequest",
        group_id="g", member_id="slow", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=timedelta(milliseconds=300), subscribed_topic_names=("t",),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=(),
    )  # fmt: skip
    assert assigned(w.call(HEARTBEAT, 1, slow)) == {topic_id: [0, 1, 2, 3]}
    heartbeat(w, "g", "fast", 0)
    # slow is told to revoke two partitions but keeps reporting all four
    revoke = heartbeat(w, "g", "slow", 1, owned={topic_id: [0, 1, 2, 3]})
    assert len(assigned(revoke)[topic_id]) == 2
    w.sleep(0.6)
    fenced = heartbeat(w, "g", "slow", 1, owned={topic_id: [0, 1, 2, 3]})
    assert fenced.error_code == ErrorCode.unknown_member_id
    got = heartbeat(w, "g", "fast", 2, owned={})
    assert assigned(got) == {topic_id: [0, 1, 2, 3]}


def test_offset_delete_and_delete_groups_of_consumer_groups(w: WireBroker) -> None:
    offset_delete, delete_groups = 47, 42
    w.broker.topics.create_topic("u", 1)
    heartbeat(w, "g", "m", 0)
    assert commit(w, "g", "m", 1) == ErrorCode.none

    def delete_offset(topic: str) -> Any:
        part = w.nested(offset_delete, 0, "OffsetDeleteRequestPartition", partition_index=0)
        t = w.nested(offset_delete, 0, "OffsetDeleteRequestTopic", name=topic, partitions=(part,))
        request = w.request(offset_delete, 0, "OffsetDeleteRequest", group_id="g", topics=(t,))
        return w.call(offset_delete, 0, request)

    subscribed = delete_offset("t")
    assert subscribed.error_code == ErrorCode.none
    assert subscribed.topics[0].partitions[0].error_code == ErrorCode.group_subscribed_to_topic
    assert delete_offset("u").topics[0].partitions[0].error_code == ErrorCode.none

    def delete_group() -> Any:
        request = w.request(delete_groups, 2, "DeleteGroupsRequest", groups_names=("g",))
        return w.call(delete_groups, 2, request).results[0].error_code

    assert delete_group() == ErrorCode.non_empty_group
    heartbeat(w, "g", "m", -1, topics=None)
    assert delete_group() == ErrorCode.none
    (gone,) = describe(w, "g")
    assert gone.error_code == ErrorCode.group_id_not_found
    w.restart()  # the tombstones keep it deleted
    (gone,) = describe(w, "g")
    assert gone.error_code == ErrorCode.group_id_not_found


def test_empty_classic_group_is_upgraded_with_its_offsets(w: WireBroker) -> None:
    # An admin commit makes an empty classic ("simple") group holding an offset.
    assert commit(w, "legacy", "", -1, version=8) == ErrorCode.none
    joined = heartbeat(w, "legacy", "m", 0)
    assert joined.error_code == ErrorCode.none
    (group,) = describe(w, "legacy")
    assert group.error_code == ErrorCode.none and group.group_state in ("Stable", "Reconciling")
    listed = w.call(
        LIST, 5, w.request(LIST, 5, "ListGroupsRequest", states_filter=(), types_filter=())
    )
    assert [(g.group_id, g.group_type) for g in listed.groups] == [("legacy", "consumer")]
    fetch = w.nested(
        FETCH, 9, "OffsetFetchRequestGroup", group_id="legacy", member_id="m", member_epoch=1,
        topics=(w.nested(FETCH, 9, "OffsetFetchRequestTopics", name="t", partition_indexes=(0,)),),
    )  # fmt: skip
    got = w.call(FETCH, 9, w.request(FETCH, 9, "OffsetFetchRequest", groups=(fetch,)))
    assert got.groups[0].topics[0].partitions[0].committed_offset == 7


DESCRIBE_GROUPS = 15


@pytest.mark.parametrize("version", [0, 3, 5])
def test_describe_groups_answers_a_consumer_group_as_kafka_4(w: WireBroker, version: int) -> None:
    """Issue 26: DescribeGroups v0-5 of a consumer group is answered as Kafka 4 does (state
    Dead, no error: only v6 says GROUP_ID_NOT_FOUND), so classic-only clients such as
    kafka-python's admin get an answer rather than an error."""
    heartbeat(w, "modern", "m", 0)
    request = w.request(
        DESCRIBE_GROUPS,
        version,
        "DescribeGroupsRequest",
        groups=("modern",),
        include_authorized_operations=False,
    )
    (group,) = w.call(DESCRIBE_GROUPS, version, request).groups
    assert group.group_id == "modern"
    assert group.error_code == ErrorCode.none
    assert group.group_state == "Dead"
    assert group.protocol_type == "" and group.members == ()
    (described,) = describe(w, "modern")  # ConsumerGroupDescribe still knows it
    assert described.error_code == ErrorCode.none and described.group_state == "Stable"
