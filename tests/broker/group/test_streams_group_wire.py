"""StreamsGroupHeartbeat and StreamsGroupDescribe (KIP-1071) in encoded frames through a real
broker's router: topology validation and status codes, the broker creating internal topics with
the declared configs, the sticky assignment with revocation before reassignment, fencing,
offset-commit rules, and the group back after a restart from Kafka 4.4's StreamsGroup* records."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.router_broker import WireBroker
from tidelog.broker.group.consumer.records import key_version
from tidelog.broker.group.streams.assignor import MemberSpec, assign_tasks
from tidelog.storage.record_codec import iter_records

HEARTBEAT, DESCRIBE, COMMIT, TXN_COMMIT = 88, 89, 8, 28
MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS = 1, 3


@pytest.fixture
def w(tmp_path: Path) -> Iterator[WireBroker]:
    wire = WireBroker(tmp_path / "data", "group.streams.session.timeout.ms=60000")
    yield wire
    wire.close()


def _topic_info(w: WireBroker, name: str, partitions: int, **configs: str) -> Any:
    kvs = tuple(w.nested(HEARTBEAT, 0, "KeyValue", key=k, value=v) for k, v in configs.items())
    return w.nested(
        HEARTBEAT, 0, "TopicInfo",
        name=name, partitions=partitions, replication_factor=0, topic_configs=kvs,
    )  # fmt: skip


def topology(w: WireBroker) -> Any:
    """Two subtopologies: "0" reads ``in`` and writes ``app-rep-repartition``; "1" reads it,
    with a store whose changelog is ``app-store-changelog``."""
    sub0 = w.nested(
        HEARTBEAT, 0, "Subtopology",
        subtopology_id="0", source_topics=("in",), source_topic_regex=(),
        state_changelog_topics=(), repartition_sink_topics=("app-rep-repartition",),
        repartition_source_topics=(), copartition_groups=(),
    )  # fmt: skip
    changelog = _topic_info(w, "app-store-changelog", 0, **{"cleanup.policy": "compact"})
    repartition = _topic_info(w, "app-rep-repartition", 0, **{"retention.ms": "-1"})
    sub1 = w.nested(
        HEARTBEAT, 0, "Subtopology",
        subtopology_id="1", source_topics=(), source_topic_regex=(),
        state_changelog_topics=(changelog,),
        repartition_sink_topics=(),
        repartition_source_topics=(repartition,),
        copartition_groups=(),
    )  # fmt: skip
    return w.nested(HEARTBEAT, 0, "Topology", epoch=0, subtopologies=(sub0, sub1))


def heartbeat(
    w: WireBroker,
    member_id: str,
    epoch: int,
    *,
    active: dict[str, list[int]] | None = None,
    process: str = "p1",
    group: str = "app",
    rebalance_ms: int = 30000,
) -> Any:
    joining = epoch == 0

    def ids(tasks: dict[str, list[int]] | None) -> Any:
        if tasks is None:
            return () if joining else None
        return tuple(
            w.nested(HEARTBEAT, 0, "TaskIds", subtopology_id=s, partitions=tuple(ps))
            for s, ps in sorted(tasks.items())
        )

    request = w.request(
        HEARTBEAT, 0, "StreamsGroupHeartbeatRequest",
        group_id=group, member_id=member_id, member_epoch=epoch, endpoint_information_epoch=0,
        instance_id=None, rack_id=None,
        rebalance_timeout=timedelta(milliseconds=rebalance_ms if joining else -1),
        topology=topology(w) if joining else None,
        active_tasks=ids(active), standby_tasks=() if joining or active is not None else None,
        warmup_tasks=() if joining or active is not None else None,
        process_id=process if joining else None, user_endpoint=None, client_tags=None,
        task_offsets=None, task_end_offsets=None, shutdown_application=False,
    )  # fmt: skip
    return w.call(HEARTBEAT, 0, request)


def tasks(response: Any) -> dict[str, list[int]]:
    assert response.active_tasks is not None, response
    return {t.subtopology_id: sorted(t.partitions) for t in response.active_tasks}


def describe(w: WireBroker, *groups: str) -> Any:
    request = w.request(DESCRIBE, 0, "StreamsGroupDescribeRequest", group_ids=groups,
                        include_authorized_operations=False)  # fmt: skip
    return w.call(DESCRIBE, 0, request).groups


def statuses(response: Any) -> set[int]:
    return {s.status_code for s in response.status or ()}


def test_missing_source_topic_is_reported_and_no_task_assigned(w: WireBroker) -> None:
    r = heartbeat(w, "m1", 0)
    assert (r.error_code, r.member_epoch) == (ErrorCode.none, 1)
    assert MISSING_SOURCE_TOPICS in statuses(r)
    assert tasks(r) == {}
    (group,) = describe(w, "app")
    assert (group.group_state, group.members[0].member_id) == ("NotReady", "m1")


def test_internal_topics_created_then_tasks_assigned_and_moved(w: WireBroker) -> None:
    w.broker.topics.create_topic("in", 4)
    first = heartbeat(w, "m1", 0)
    assert MISSING_INTERNAL_TOPICS in statuses(first) and tasks(first) == {}
    # The broker created them, partitioned as the tasks, with the declared configs.
    rep = w.broker.topics.get("app-rep-repartition")
    changelog = w.broker.topics.get("app-store-changelog")
    assert rep is not None and changelog is not None
    assert (rep.partitions, changelog.partitions) == (4, 4)
    assert w.broker.topics.effective_config("app-store-changelog")["cleanup.policy"] == ["compact"]
    r = heartbeat(w, "m1", 1, active={})
    assert statuses(r) == set() and r.member_epoch == 2
    assert tasks(r) == {"0": [0, 1, 2, 3], "1": [0, 1, 2, 3]}
    # A second member: m1 must revoke half before m2 gets it.
    r2 = heartbeat(w, "m2", 0, process="p2")
    assert (r2.member_epoch, tasks(r2)) == (3, {})
    r1 = heartbeat(w, "m1", 2, active={"0": [0, 1, 2, 3], "1": [0, 1, 2, 3]})
    assert r1.member_epoch == 2  # revoking first: the epoch stays
    kept = tasks(r1)
    assert sum(len(v) for v in kept.values()) == 4
    r2 = heartbeat(w, "m2", 3, active={})
    assert r2.active_tasks is None or tasks(r2) == {}  # still owned by m1
    r1 = heartbeat(w, "m1", 2, active=kept)
    assert r1.member_epoch == 3
    r2 = heartbeat(w, "m2", 3, active={})
    got = tasks(r2)
    assert sum(len(v) for v in got.values()) == 4
    assert not {(s, p) for s, ps in got.items() for p in ps} & {
        (s, p) for s, ps in kept.items() for p in ps
    }
    (group,) = describe(w, "app")
    assert (group.group_state, group.group_epoch, group.assignment_epoch) == ("Stable", 3, 3)
    assert {t.name for s in group.topology.subtopologies for t in s.repartition_source_topics} == {
        "app-rep-repartition"
    }
    # Fencing and leaving.
    stale = heartbeat(w, "m1", 7, active=kept)
    assert stale.error_code == ErrorCode.fenced_member_epoch
    unknown = heartbeat(w, "nobody", 1, active={})
    assert unknown.error_code == ErrorCode.unknown_member_id
    left = heartbeat(w, "m2", -1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    assert len(describe(w, "app")[0].members) == 1


def test_offset_commits_check_the_member_epoch(w: WireBroker) -> None:
    w.broker.topics.create_topic("in", 2)
    heartbeat(w, "m1", 0)
    r = heartbeat(w, "m1", 1, active={})
    epoch = r.member_epoch

    def commit(member: str, e: int) -> Any:
        part = w.nested(
            COMMIT, 9, "OffsetCommitRequestPartition",
            partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata="",
        )  # fmt: skip
        topic = w.nested(COMMIT, 9, "OffsetCommitRequestTopic", name="in", partitions=(part,))
        request = w.request(
            COMMIT, 9, "OffsetCommitRequest",
            group_id="app", generation_id_or_member_epoch=e, member_id=member,
            group_instance_id=None, retention_time=timedelta(milliseconds=-1), topics=(topic,),
        )  # fmt: skip
        return w.call(COMMIT, 9, request).topics[0].partitions[0].error_code

    assert commit("m1", epoch) == ErrorCode.none
    assert commit("m1", epoch - 1) == ErrorCode.stale_member_epoch
    assert commit("other", epoch) == ErrorCode.unknown_member_id


def test_group_survives_a_restart_from_kafka_records(w: WireBroker) -> None:
    w.broker.topics.create_topic("in", 2)
    heartbeat(w, "m1", 0)
    r = heartbeat(w, "m1", 1, active={})
    before = tasks(r)
    versions = set()
    for p in range(w.broker.topics.get("__consumer_offsets").partitions):  # type: ignore[union-attr]
        log = w.broker.topics.get_log("__consumer_offsets", p)
        assert log is not None
        data = log.read(0, 1 << 20, upper_bound=log.log_end_offset).read_bytes()
        versions |= {key_version(rec.key) for rec in iter_records(data) if rec.key}
    assert {17, 19, 20, 21, 22, 23} <= versions
    (kept,) = describe(w, "app")
    w.restart()
    (group,) = describe(w, "app")
    assert (group.group_state, group.group_epoch, group.assignment_epoch) == (
        kept.group_state, kept.group_epoch, kept.assignment_epoch,
    )  # fmt: skip
    assert group.topology == kept.topology
    (member,) = group.members
    assert (member.member_id, member.member_epoch, member.process_id) == (
        "m1",
        r.member_epoch,
        "p1",
    )
    again = heartbeat(w, "m1", r.member_epoch, active=before)
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, r.member_epoch)


def test_describe_unknown_and_other_type_groups(w: WireBroker) -> None:
    (g,) = describe(w, "nope")
    assert (g.error_code, g.error_message) == (
        ErrorCode.group_id_not_found,
        "Group nope not found.",
    )


def test_sticky_assignor_keeps_tasks_and_spreads_standbys() -> None:
    members = {
        "a": MemberSpec("p1", {"0": frozenset({0, 1, 2})}, {}),
        "b": MemberSpec("p2", {}, {}),
    }
    out = assign_tasks({"0": 4}, members, 1)
    assert out["a"].active["0"] <= frozenset({0, 1, 2}) and len(out["a"].active["0"]) == 2
    assert out["a"].active["0"] | out["b"].active["0"] == frozenset(range(4))
    # Each task's standby sits on the other process.
    assert out["a"].standby["0"] == out["b"].active["0"]
    assert out["b"].standby["0"] == out["a"].active["0"]


def test_list_groups_shows_the_streams_group(w: WireBroker) -> None:
    heartbeat(w, "m1", 0)
    request = w.request(16, 5, "ListGroupsRequest", states_filter=(), types_filter=("streams",))
    groups = w.call(16, 5, request).groups
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in groups] == [
        ("app", "streams", "NotReady", "streams")
    ]


def test_delete_groups_removes_an_empty_streams_group_for_good(w: WireBroker) -> None:
    heartbeat(w, "m1", 0)

    def delete() -> int:
        request = w.request(42, 2, "DeleteGroupsRequest", groups_names=("app",))
        return int(w.call(42, 2, request).results[0].error_code)

    assert delete() == ErrorCode.non_empty_group
    heartbeat(w, "m1", -1)
    assert delete() == ErrorCode.none
    assert describe(w, "app")[0].error_code == ErrorCode.group_id_not_found
    w.restart()
    assert describe(w, "app")[0].error_code == ErrorCode.group_id_not_found


def test_member_keeping_tasks_to_revoke_is_fenced_after_its_rebalance_timeout(
    w: WireBroker,
) -> None:
    w.broker.topics.create_topic("in", 2)
    heartbeat(w, "m1", 0, rebalance_ms=300)
    heartbeat(w, "m1", 1, active={})  # the internal topics exist now: m1 gets every task
    r1 = heartbeat(w, "m1", 2, active={"0": [0, 1], "1": [0, 1]})
    heartbeat(w, "m2", 0, process="p2")
    r1 = heartbeat(w, "m1", r1.member_epoch, active={"0": [0, 1], "1": [0, 1]})
    assert sum(len(v) for v in tasks(r1).values()) == 2  # told to give two up; it never does
    for _ in range(100):
        if [m.member_id for m in describe(w, "app")[0].members] == ["m2"]:
            break
        w.sleep(0.05)
    assert [m.member_id for m in describe(w, "app")[0].members] == ["m2"]
    late = heartbeat(w, "m1", r1.member_epoch, active={"0": [0, 1], "1": [0, 1]})
    assert late.error_code == ErrorCode.unknown_member_id


def test_a_consumer_group_heartbeat_cannot_take_a_streams_group_id(w: WireBroker) -> None:
    heartbeat(w, "m1", 0)
    request = w.request(
        68, 1, "ConsumerGroupHeartbeatRequest",
        group_id="app", member_id="c1", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=("in",),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=(),
    )  # fmt: skip
    answer = w.call(68, 1, request)
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.group_id_not_found, "Group app is not a consumer group."
    )  # fmt: skip
    (g,) = describe(w, "app")
    assert [m.member_id for m in g.members] == ["m1"]
