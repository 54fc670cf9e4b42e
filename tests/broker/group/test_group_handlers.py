"""Every advertised version of every group API, encoded and decoded as a client would.

The installed clients send only some versions (CLIENT-NOTES.md); these tests drive the rest
through the broker's router in-process and check each answer decodes with its version's schema
and says what Kafka would.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.router_broker import WireBroker
from tidelog.broker.handlers import (
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)

FIND, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, DELETE = 10, 11, 12, 13, 14, 15, 16, 42
COMMIT, FETCH, OFFSET_DELETE = 8, 9, 47
SUB = struct.pack(">hi", 0, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)


@pytest.fixture
def w(tmp_path: Path) -> Iterator[WireBroker]:
    wire = WireBroker(tmp_path / "data")
    wire.broker.topics.create_topic("t", 2)
    yield wire
    wire.close()


def test_specs_advertise_the_implemented_ranges() -> None:
    ranges = {
        m.SPEC.name: (m.SPEC.api_key, m.SPEC.min_version, m.SPEC.max_version)
        for m in (
            find_coordinator,
            join_group,
            sync_group,
            heartbeat,
            leave_group,
            offset_commit,
            offset_fetch,
            list_groups,
            describe_groups,
            delete_groups,
            offset_delete,
        )
    }
    assert ranges == {
        "FindCoordinator": (10, 0, 4),
        "JoinGroup": (11, 0, 9),
        "SyncGroup": (14, 0, 5),
        "Heartbeat": (12, 0, 4),
        "LeaveGroup": (13, 0, 5),
        "OffsetCommit": (8, 2, 9),
        "OffsetFetch": (9, 1, 9),
        "ListGroups": (16, 0, 5),
        "DescribeGroups": (15, 0, 5),
        "DeleteGroups": (42, 0, 2),
        "OffsetDelete": (47, 0, 0),
    }


@pytest.mark.parametrize("version", range(5))
def test_find_coordinator(w: WireBroker, version: int) -> None:
    port = w.broker.advertised_port(w.broker.advertised)
    if version < 4:
        r = w.call(FIND, version, w.request(FIND, version, "FindCoordinatorRequest", key="g"))
        assert r.error_code is ErrorCode.none
        assert (r.node_id, r.host, r.port) == (w.broker.node_id, "127.0.0.1", port)
        return
    req = w.request(FIND, 4, "FindCoordinatorRequest", key_type=0, coordinator_keys=("a", "b"))
    r = w.call(FIND, 4, req)
    assert [(c.key, c.error_code, c.port) for c in r.coordinators] == [
        ("a", ErrorCode.none, port),
        ("b", ErrorCode.none, port),
    ]
    bad = w.call(
        FIND, 4, w.request(FIND, 4, "FindCoordinatorRequest", key_type=7, coordinator_keys=("x",))
    )
    assert bad.coordinators[0].error_code is ErrorCode.invalid_request


def test_the_first_group_lookup_creates_the_offsets_topic(w: WireBroker) -> None:
    """As in Kafka, ``__consumer_offsets`` does not exist until a group needs it."""
    assert w.broker.topics.get("__consumer_offsets") is None
    txn = w.request(FIND, 3, "FindCoordinatorRequest", key="tx", key_type=1)
    assert w.call(FIND, 3, txn).error_code is ErrorCode.none
    assert w.broker.topics.get("__consumer_offsets") is None
    r = w.call(FIND, 3, w.request(FIND, 3, "FindCoordinatorRequest", key="g", key_type=0))
    assert r.error_code is ErrorCode.none
    info = w.broker.topics.get("__consumer_offsets")
    assert info is not None and info.is_internal
    w.restart()
    again = w.broker.topics.get("__consumer_offsets")
    assert again is not None and again.partitions == info.partitions


def join(w: WireBroker, version: int, group: str, member_id: str = "", **extra: Any) -> Any:
    proto = w.nested(JOIN, version, "JoinGroupRequestProtocol", name="range", metadata=SUB)
    fields: dict[str, Any] = {
        "group_id": group,
        "session_timeout": timedelta(seconds=10),
        "rebalance_timeout": timedelta(seconds=10),
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": (proto,),
    }
    fields.update(extra)
    return w.call(JOIN, version, w.request(JOIN, version, "JoinGroupRequest", **fields))


def joined_member(w: WireBroker, version: int, group: str) -> Any:
    r = join(w, version, group)
    if version >= 4:
        assert r.error_code is ErrorCode.member_id_required
        assert r.member_id and r.generation_id == -1
        r = join(w, version, group, r.member_id)
    assert r.error_code is ErrorCode.none, r
    return r


@pytest.mark.parametrize("version", range(10))
def test_join_sync_heartbeat_commit_fetch_leave(w: WireBroker, version: int) -> None:
    group = f"g{version}"
    r = joined_member(w, version, group)
    assert r.generation_id == 1 and r.leader == r.member_id
    assert r.protocol_name == "range"
    assert [m.member_id for m in r.members] == [r.member_id]
    if version >= 7:
        assert r.protocol_type == "consumer"
    member, gen = r.member_id, r.generation_id

    sync_v = min(version, 5)
    assignment = w.nested(
        SYNC, sync_v, "SyncGroupRequestAssignment", member_id=member, assignment=b"ASSIGN"
    )
    s = w.call(
        SYNC,
        sync_v,
        w.request(
            SYNC,
            sync_v,
            "SyncGroupRequest",
            group_id=group,
            generation_id=gen,
            member_id=member,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(assignment,),
        ),
    )
    assert s.error_code is ErrorCode.none and s.assignment == b"ASSIGN"

    hb_v = min(version, 4)
    hb = w.call(
        HEARTBEAT,
        hb_v,
        w.request(
            HEARTBEAT, hb_v, "HeartbeatRequest", group_id=group, generation_id=gen, member_id=member
        ),
    )
    assert hb.error_code is ErrorCode.none
    hb = w.call(
        HEARTBEAT,
        hb_v,
        w.request(
            HEARTBEAT,
            hb_v,
            "HeartbeatRequest",
            group_id=group,
            generation_id=gen + 1,
            member_id=member,
        ),
    )
    assert hb.error_code is ErrorCode.illegal_generation

    commit_v = min(max(version, 2), 8)
    part = w.nested(
        COMMIT,
        commit_v,
        "OffsetCommitRequestPartition",
        partition_index=1,
        committed_offset=42,
        committed_leader_epoch=5,
        committed_metadata="md",
    )
    unknown = w.nested(
        COMMIT,
        commit_v,
        "OffsetCommitRequestPartition",
        partition_index=9,
        committed_offset=1,
        committed_metadata=None,
    )
    topics = (
        w.nested(COMMIT, commit_v, "OffsetCommitRequestTopic", name="t", partitions=(part,)),
        w.nested(COMMIT, commit_v, "OffsetCommitRequestTopic", name="t", partitions=(unknown,)),
    )
    c = w.call(
        COMMIT,
        commit_v,
        w.request(
            COMMIT,
            commit_v,
            "OffsetCommitRequest",
            group_id=group,
            generation_id_or_member_epoch=gen,
            member_id=member,
            topics=topics,
        ),
    )
    assert [
        (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in c.topics
    ] == [("t", [(1, ErrorCode.none), (9, ErrorCode.unknown_topic_or_partition)])]

    fetch_v = min(max(version, 1), 8)
    epoch = None if fetch_v < 5 else (5 if commit_v >= 6 else -1)  # leader epochs: commit v6+
    got = fetch(w, fetch_v, group, [("t", [0, 1])])
    assert got == {
        ("t", 0): (-1, -1 if fetch_v >= 5 else None, ""),
        ("t", 1): (42, epoch, "md"),
    }

    leave_v = min(version, 5)
    if leave_v < 3:
        lr = w.call(
            LEAVE,
            leave_v,
            w.request(LEAVE, leave_v, "LeaveGroupRequest", group_id=group, member_id=member),
        )
        assert lr.error_code is ErrorCode.none
    else:
        ident = w.nested(LEAVE, leave_v, "MemberIdentity", member_id=member)
        ghost = w.nested(LEAVE, leave_v, "MemberIdentity", member_id="ghost")
        lr = w.call(
            LEAVE,
            leave_v,
            w.request(LEAVE, leave_v, "LeaveGroupRequest", group_id=group, members=(ident, ghost)),
        )
        assert lr.error_code is ErrorCode.none
        assert [m.error_code for m in lr.members] == [ErrorCode.none, ErrorCode.unknown_member_id]


def fetch(
    w: WireBroker, version: int, group: str, topics: list[tuple[str, list[int]]] | None
) -> dict[tuple[str, int], tuple[int, int | None, str | None]]:
    if version >= 8:
        req_topics = (
            None
            if topics is None
            else tuple(
                w.nested(FETCH, 8, "OffsetFetchRequestTopics", name=t, partition_indexes=tuple(ps))
                for t, ps in topics
            )
        )
        g = w.nested(FETCH, 8, "OffsetFetchRequestGroup", group_id=group, topics=req_topics)
        r = w.call(FETCH, 8, w.request(FETCH, 8, "OffsetFetchRequest", groups=(g,)))
        assert r.groups[0].error_code is ErrorCode.none
        resp_topics = r.groups[0].topics
    else:
        req_topics = (
            None
            if topics is None
            else tuple(
                w.nested(
                    FETCH, version, "OffsetFetchRequestTopic", name=t, partition_indexes=tuple(ps)
                )
                for t, ps in topics
            )
        )
        r = w.call(
            FETCH,
            version,
            w.request(FETCH, version, "OffsetFetchRequest", group_id=group, topics=req_topics),
        )
        if version >= 2:
            assert r.error_code is ErrorCode.none
        resp_topics = r.topics
    out = {}
    for t in resp_topics:
        for p in t.partitions:
            assert p.error_code is ErrorCode.none
            epoch = getattr(p, "committed_leader_epoch", None)
            out[(t.name, p.partition_index)] = (p.committed_offset, epoch, p.metadata)
    return out


@pytest.mark.parametrize("version", [2, 7, 8])
def test_offset_fetch_all(w: WireBroker, version: int) -> None:
    part = w.nested(
        COMMIT,
        2,
        "OffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=3,
        committed_metadata="",
    )
    topic = w.nested(COMMIT, 2, "OffsetCommitRequestTopic", name="t", partitions=(part,))
    c = w.call(
        COMMIT,
        2,
        w.request(
            COMMIT,
            2,
            "OffsetCommitRequest",
            group_id="simple",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=(topic,),
        ),
    )
    assert c.topics[0].partitions[0].error_code is ErrorCode.none
    assert fetch(w, version, "simple", None) == {("t", 0): (3, -1 if version >= 5 else None, "")}


def test_join_errors_on_the_wire(w: WireBroker) -> None:
    r = join(w, 5, "")
    assert r.error_code is ErrorCode.invalid_group_id
    r = join(w, 5, "g", session_timeout=timedelta(milliseconds=1))
    assert r.error_code is ErrorCode.invalid_session_timeout
    r = join(w, 5, "g", "unknown-member")
    assert r.error_code is ErrorCode.unknown_member_id and r.member_id == "unknown-member"


@pytest.mark.parametrize("version", range(6))
def test_describe_list_delete(w: WireBroker, version: int) -> None:
    group = f"d{version}"
    r = joined_member(w, 5, group)
    assignment = w.nested(
        SYNC, 5, "SyncGroupRequestAssignment", member_id=r.member_id, assignment=b"A"
    )
    w.call(
        SYNC,
        5,
        w.request(
            SYNC,
            5,
            "SyncGroupRequest",
            group_id=group,
            generation_id=r.generation_id,
            member_id=r.member_id,
            assignments=(assignment,),
        ),
    )

    d = w.call(
        DESCRIBE,
        version,
        w.request(
            DESCRIBE,
            version,
            "DescribeGroupsRequest",
            groups=(group, "nobody"),
            include_authorized_operations=True,
        ),
    )
    live, dead = d.groups
    assert (live.error_code, live.group_state, live.protocol_type, live.protocol_data) == (
        ErrorCode.none,
        "Stable",
        "consumer",
        "range",
    )
    assert [
        (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment)
        for m in live.members
    ] == [(r.member_id, "wire-test", "/127.0.0.1", SUB, b"A")]
    if version >= 3:
        assert live.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert (dead.group_state, dead.error_code, dead.members) == ("Dead", ErrorCode.none, ())

    list_v = min(version, 4)
    req = w.request(LIST, list_v, "ListGroupsRequest", states_filter=("stable",))
    lg = w.call(LIST, list_v, req)
    assert lg.error_code is ErrorCode.none
    assert group in [g.group_id for g in lg.groups]
    if list_v >= 4:
        assert {g.group_state for g in lg.groups} == {"Stable"}

    del_v = min(version, 2)
    dr = w.call(
        DELETE,
        del_v,
        w.request(DELETE, del_v, "DeleteGroupsRequest", groups_names=(group, "nobody")),
    )
    assert [(x.group_id, x.error_code) for x in dr.results] == [
        (group, ErrorCode.non_empty_group),
        ("nobody", ErrorCode.group_id_not_found),
    ]


def test_offset_delete_on_the_wire(w: WireBroker) -> None:
    part = w.nested(
        COMMIT,
        8,
        "OffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=3,
        committed_metadata="",
    )
    topic = w.nested(COMMIT, 8, "OffsetCommitRequestTopic", name="t", partitions=(part,))
    w.call(
        COMMIT,
        8,
        w.request(
            COMMIT,
            8,
            "OffsetCommitRequest",
            group_id="od",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=(topic,),
        ),
    )
    dp = w.nested(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=0)
    dt = w.nested(OFFSET_DELETE, 0, "OffsetDeleteRequestTopic", name="t", partitions=(dp,))
    r = w.call(
        OFFSET_DELETE,
        0,
        w.request(OFFSET_DELETE, 0, "OffsetDeleteRequest", group_id="od", topics=(dt,)),
    )
    assert r.error_code is ErrorCode.none
    assert r.topics[0].partitions[0].error_code is ErrorCode.none
    assert fetch(w, 8, "od", None) == {}
    r = w.call(
        OFFSET_DELETE,
        0,
        w.request(OFFSET_DELETE, 0, "OffsetDeleteRequest", group_id="none", topics=(dt,)),
    )
    assert r.error_code is ErrorCode.group_id_not_found


def test_offsets_and_groups_survive_restart(w: WireBroker) -> None:
    r = joined_member(w, 9, "durable")
    assignment = w.nested(
        SYNC, 5, "SyncGroupRequestAssignment", member_id=r.member_id, assignment=b"A"
    )
    w.call(
        SYNC,
        5,
        w.request(
            SYNC,
            5,
            "SyncGroupRequest",
            group_id="durable",
            generation_id=r.generation_id,
            member_id=r.member_id,
            assignments=(assignment,),
        ),
    )
    part = w.nested(
        COMMIT,
        8,
        "OffsetCommitRequestPartition",
        partition_index=1,
        committed_offset=77,
        committed_leader_epoch=2,
        committed_metadata="x",
    )
    topic = w.nested(COMMIT, 8, "OffsetCommitRequestTopic", name="t", partitions=(part,))
    w.call(
        COMMIT,
        8,
        w.request(
            COMMIT,
            8,
            "OffsetCommitRequest",
            group_id="durable",
            generation_id_or_member_epoch=r.generation_id,
            member_id=r.member_id,
            topics=(topic,),
        ),
    )
    info = w.broker.topics.get("__consumer_offsets")
    assert info is not None and info.is_internal and info.partitions == 3
    w.restart()
    assert fetch(w, 8, "durable", None) == {("t", 1): (77, 2, "x")}
    d = w.call(
        DESCRIBE,
        5,
        w.request(
            DESCRIBE,
            5,
            "DescribeGroupsRequest",
            groups=("durable",),
            include_authorized_operations=False,
        ),
    )
    assert d.groups[0].group_state == "Stable"
    assert [m.member_id for m in d.groups[0].members] == [r.member_id]
    # The member comes back within its session and keeps its assignment without a rebalance.
    hb = w.call(
        HEARTBEAT,
        4,
        w.request(
            HEARTBEAT,
            4,
            "HeartbeatRequest",
            group_id="durable",
            generation_id=r.generation_id,
            member_id=r.member_id,
        ),
    )
    assert hb.error_code is ErrorCode.none


def test_stop_answers_parked_joins_at_once(tmp_path: Path) -> None:
    w = WireBroker(tmp_path / "data", "group.initial.rebalance.delay.ms=60000")
    proto = w.nested(JOIN, 3, "JoinGroupRequestProtocol", name="range", metadata=SUB)
    req = w.request(
        JOIN,
        3,
        "JoinGroupRequest",
        group_id="parked",
        session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=10),
        member_id="",
        protocol_type="consumer",
        protocols=(proto,),
    )
    task = w.loop.create_task(w.send(JOIN, 3, req))
    w.sleep(0.1)
    assert not task.done(), "parked for the initial rebalance delay"
    started = time.monotonic()
    w.close_broker()
    assert time.monotonic() - started < 5
    assert w.decode(JOIN, 3, task.result()).error_code is ErrorCode.not_coordinator
    w.loop.close()


def test_commit_waits_for_the_flush_when_the_policy_holds_the_hw(tmp_path: Path) -> None:
    w = WireBroker(tmp_path / "data", "log.flush.interval.messages=1")
    try:
        w.broker.topics.create_topic("t", 1)
        part = w.nested(
            COMMIT, 8, "OffsetCommitRequestPartition", partition_index=0, committed_offset=9,
            committed_metadata="",
        )  # fmt: skip
        topic = w.nested(COMMIT, 8, "OffsetCommitRequestTopic", name="t", partitions=(part,))
        req = w.request(
            COMMIT, 8, "OffsetCommitRequest", group_id="flushy",
            generation_id_or_member_epoch=-1, member_id="", topics=(topic,),
        )  # fmt: skip
        r = w.call(COMMIT, 8, req)
        assert r.topics[0].partitions[0].error_code is ErrorCode.none
        groups = w.broker.groups
        log = w.broker.topics.get_log("__consumer_offsets", groups.partition_for("flushy"))
        assert log is not None and log.config.holds_high_watermark
        # Answered only once the commit was fsynced and the HW covered it.
        assert log.high_watermark == log.log_end_offset >= 1
        assert log.recovery_point >= log.high_watermark
    finally:
        w.close()
