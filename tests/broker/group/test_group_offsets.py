"""Committed offsets, durability through __consumer_offsets, admin APIs, expiry."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from kio.schema.errors import ErrorCode

from tests.broker.group.group_harness import CONFIG, Harness, done, run, subscription
from tests.broker.group.test_group_membership import stable_group
from tests.support.coordinator_log import MemoryCoordinatorLog
from tidelog.broker.group.results import CommitPartition, MemberIdentity
from tidelog.broker.group.state import GroupState
from tidelog.protocol.internal_topics.consumer_offsets import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    partition_for,
)


def parts(*items: tuple[str, int, int]) -> list[CommitPartition]:
    return [CommitPartition(t, p, o, leader_epoch=3, metadata="m") for t, p, o in items]


@run
async def test_simple_commit_creates_group_and_fetches() -> None:
    h = await Harness().start()
    errors = await h.coord.commit_offsets("simple", -1, "", parts(("t", 0, 10), ("t", 1, 20)))
    assert [e.error for e in errors] == [ErrorCode.none, ErrorCode.none]
    assert h.coord.groups["simple"].state is GroupState.EMPTY
    res = h.coord.fetch_offsets("simple", [("t", [0, 1, 2]), ("u", [0])])
    got = {(t.topic, p.partition): (p.offset, p.leader_epoch, p.metadata) for t in res.topics
           for p in t.partitions}  # fmt: skip
    assert got == {
        ("t", 0): (10, 3, "m"),
        ("t", 1): (20, 3, "m"),
        ("t", 2): (-1, -1, ""),
        ("u", 0): (-1, -1, ""),
    }
    everything = h.coord.fetch_offsets("simple", None)
    assert [(t.topic, [p.partition for p in t.partitions]) for t in everything.topics] == [
        ("t", [0, 1])
    ]
    assert h.coord.fetch_offsets("nobody", None).topics == ()


@run
async def test_group_count_counts_each_group_once() -> None:
    h = await Harness().start()
    assert h.coord.group_count() == 0
    await h.coord.commit_offsets("simple", -1, "", parts(("t", 0, 10)))
    await h.coord.commit_offsets("other", -1, "", parts(("t", 0, 10)))
    assert h.coord.group_count() == 2


@run
async def test_commit_writes_kafka_records_to_the_group_partition() -> None:
    h = await Harness().start()
    await h.coord.commit_offsets("grp", -1, "", parts(("t", 4, 99)))
    records = h.log.records(partition_for("grp", CONFIG.offsets_topic_num_partitions))
    keys = [decode_key(r.key) for r in records if r.key is not None]
    assert OffsetCommitKey("grp", "t", 4) in keys
    value = next(
        r.value for r in records if decode_key(r.key or b"") == OffsetCommitKey("grp", "t", 4)
    )
    assert value is not None
    v = decode_offset_commit_value(value)
    assert (v.offset, v.leader_epoch, v.metadata) == (99, 3, "m")
    assert v.commit_timestamp == h.timer.now_ms()


@run
async def test_commit_by_members() -> None:
    h = await Harness().start()
    gen, ids = await stable_group(h, 2)
    ok = await h.coord.commit_offsets("g", gen, ids[0], parts(("t", 0, 5)))
    assert ok[0].error is ErrorCode.none
    stale = await h.coord.commit_offsets("g", gen - 1, ids[0], parts(("t", 0, 6)))
    assert stale[0].error is ErrorCode.illegal_generation
    stranger = await h.coord.commit_offsets("g", gen, "x", parts(("t", 0, 6)))
    assert stranger[0].error is ErrorCode.unknown_member_id
    admin = await h.coord.commit_offsets("g", -1, "", parts(("t", 0, 6)))
    assert admin[0].error is ErrorCode.unknown_member_id  # the group is not empty
    unknown_group = await h.coord.commit_offsets("zz", 3, "m", parts(("t", 0, 6)))
    assert unknown_group[0].error is ErrorCode.illegal_generation
    v9 = await h.coord.commit_offsets("zz", 3, "m", parts(("t", 0, 6)), api_version=9)
    assert v9[0].error is ErrorCode.group_id_not_found
    # A rebalance: commits are refused in CompletingRebalance.
    rejoin = [h.join(member_id=m) for m in ids]
    results = [await done(t, h) for t in rejoin]
    during = await h.coord.commit_offsets("g", gen + 1, ids[0], parts(("t", 0, 7)))
    assert during[0].error is ErrorCode.rebalance_in_progress
    assert results[0].generation_id == gen + 1
    assert h.coord.fetch_offsets("g", [("t", [0])]).topics[0].partitions[0].offset == 5


@run
async def test_commit_partition_errors() -> None:
    h = await Harness(replace(CONFIG, offset_metadata_max_bytes=4)).start()
    h.coord.partition_exists = lambda topic, partition: topic != "missing"
    errors = await h.coord.commit_offsets(
        "g",
        -1,
        "",
        [
            CommitPartition("t", 0, 1, metadata="ok"),
            CommitPartition("t", 1, 1, metadata="too long"),
            CommitPartition("missing", 0, 1),
        ],
    )
    assert [e.error for e in errors] == [
        ErrorCode.none,
        ErrorCode.offset_metadata_too_large,
        ErrorCode.unknown_topic_or_partition,
    ]


@run
async def test_commit_waits_for_the_high_watermark() -> None:
    h = await Harness(replace(CONFIG, offsets_commit_timeout_ms=5_000)).start()
    h.log.hold_hw = True
    task = asyncio.ensure_future(h.coord.commit_offsets("g", -1, "", parts(("t", 0, 1))))
    await h.settle()
    assert not task.done(), "the answer waits until the HW covers the commit"
    h.log.release()
    assert (await done(task, h))[0].error is ErrorCode.none


@run
async def test_commit_times_out_when_the_hw_never_moves() -> None:
    h = await Harness(replace(CONFIG, offsets_commit_timeout_ms=50)).start()
    h.log.hold_hw = True
    errors = await h.coord.commit_offsets("g", -1, "", parts(("t", 0, 1)))
    assert errors[0].error is ErrorCode.request_timed_out


@run
async def test_failed_append_is_reported() -> None:
    h = await Harness().start()
    h.log.fail_appends = ErrorCode.kafka_storage_error
    errors = await h.coord.commit_offsets("g", -1, "", parts(("t", 0, 1)))
    assert errors[0].error is ErrorCode.not_coordinator
    assert h.coord.fetch_offsets("g", [("t", [0])]).topics[0].partitions[0].offset == -1


@run
async def test_load_in_progress_until_replayed() -> None:
    h = Harness()
    errors = await h.coord.commit_offsets("g", -1, "", parts(("t", 0, 1)))
    assert errors[0].error is ErrorCode.coordinator_load_in_progress
    assert h.coord.fetch_offsets("g", None).error is ErrorCode.coordinator_load_in_progress
    assert h.coord.list_groups()[0] is ErrorCode.coordinator_load_in_progress
    assert h.coord.heartbeat("g", 1, "m") is ErrorCode.none  # Kafka answers blindly
    await h.start()
    assert h.log.prepared


@run
async def test_restart_replays_offsets_and_groups() -> None:
    h = await Harness().start()
    gen, ids = await stable_group(h, 2, session_ms=3000)
    await h.coord.commit_offsets("g", gen, ids[0], parts(("t", 0, 11), ("t", 1, 12)))
    await h.coord.commit_offsets("g", gen, ids[0], parts(("t", 0, 13)))
    await h.coord.commit_offsets("simple", -1, "", parts(("x", 0, 1)))
    await h.coord.stop()

    h2 = await Harness(log=h.log, timer=h.timer).start()
    res = h2.coord.fetch_offsets("g", [("t", [0, 1])])
    assert [p.offset for p in res.topics[0].partitions] == [13, 12]
    assert [p.leader_epoch for p in res.topics[0].partitions] == [3, 3]
    group = h2.coord.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == gen
    assert list(group.members) == ids and group.leader_id == ids[0]
    assert group.protocol_name == "range" and group.subscribed_topics == frozenset({"t"})
    # Members that come back keep their assignment without a rebalance...
    s = await h2.sync("g", gen, ids[1])
    assert s.error is ErrorCode.none and s.assignment == ids[1].encode()
    assert h2.coord.heartbeat("g", gen, ids[0]) is ErrorCode.none
    # ...and those that do not are expired by their session timeout.
    for _ in range(3):
        await h2.advance(1500)
        h2.coord.heartbeat("g", gen, ids[0])
    assert ids[1] not in group.members
    assert h2.coord.groups["simple"].state is GroupState.EMPTY


@run
async def test_list_and_describe_groups() -> None:
    h = await Harness().start()
    _gen, ids = await stable_group(h, 2)
    await h.coord.commit_offsets("simple", -1, "", parts(("t", 0, 1)))
    error, groups = h.coord.list_groups()
    assert error is ErrorCode.none
    assert {(g.group_id, g.protocol_type, g.state) for g in groups} == {
        ("g", "consumer", "Stable"),
        ("simple", "", "Empty"),
    }
    assert [g.group_id for g in h.coord.list_groups(["stable"])[1]] == ["g"]
    assert [g.group_id for g in h.coord.list_groups(["Empty "])[1]] == ["simple"]
    g, unknown = h.coord.describe_groups(["g", "unknown"])
    assert (g.state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.client_host) for m in g.members] == [
        (ids[0], "c0", "/127.0.0.1"),
        (ids[1], "c1", "/127.0.0.1"),
    ]
    assert g.members[0].metadata == subscription("t")
    assert g.members[1].assignment == ids[1].encode()
    assert (unknown.state, unknown.error, unknown.members) == ("Dead", ErrorCode.none, ())


@run
async def test_delete_groups() -> None:
    h = await Harness().start()
    gen, ids = await stable_group(h, 1)
    await h.coord.commit_offsets("g", gen, ids[0], parts(("t", 0, 5)))
    await h.coord.commit_offsets("empty", -1, "", parts(("t", 0, 5), ("t", 1, 6)))
    results = await h.coord.delete_groups(["g", "empty", "unknown"])
    assert results == [
        ("g", ErrorCode.non_empty_group),
        ("empty", ErrorCode.none),
        ("unknown", ErrorCode.group_id_not_found),
    ]
    assert "empty" not in h.coord.groups
    assert h.coord.fetch_offsets("empty", [("t", [0])]).topics[0].partitions[0].offset == -1
    records = h.log.records(partition_for("empty", CONFIG.offsets_topic_num_partitions))
    tombstones = [decode_key(r.key) for r in records if r.value is None and r.key is not None]
    assert set(tombstones) == {
        OffsetCommitKey("empty", "t", 0),
        OffsetCommitKey("empty", "t", 1),
        GroupMetadataKey("empty"),
    }
    # After a restart the deleted group stays deleted.
    h2 = await Harness(log=h.log, timer=h.timer).start()
    assert "empty" not in h2.coord.groups
    assert h2.coord.fetch_offsets("empty", None).topics == ()
    # The live group can be deleted once its last member left and it became Empty.
    h.coord.leave_group("g", [MemberIdentity(ids[0])])
    await h.settle()
    assert await h.coord.delete_groups(["g"]) == [("g", ErrorCode.none)]


@run
async def test_offset_delete() -> None:
    h = await Harness().start()
    gen, ids = await stable_group(h, 1)
    await h.coord.commit_offsets("g", gen, ids[0], parts(("t", 0, 5), ("other", 0, 9)))
    res = await h.coord.delete_offsets("g", [("t", [0]), ("other", [0, 1])])
    assert res.error is ErrorCode.none
    assert [(p.topic, p.partition, p.error) for p in res.partitions] == [
        ("t", 0, ErrorCode.group_subscribed_to_topic),
        ("other", 0, ErrorCode.none),
        ("other", 1, ErrorCode.none),
    ]
    fetched = h.coord.fetch_offsets("g", None)
    assert [t.topic for t in fetched.topics] == ["t"]
    assert (await h.coord.delete_offsets("nope", [])).error is ErrorCode.group_id_not_found
    assert (await h.coord.delete_offsets("", [])).error is ErrorCode.invalid_group_id


@run
async def test_offsets_of_an_empty_group_expire_and_the_group_goes() -> None:
    h = await Harness().start()
    gen, ids = await stable_group(h, 1)
    await h.coord.commit_offsets("g", gen, ids[0], parts(("t", 0, 5)))
    await h.coord.commit_offsets("recent", -1, "", parts(("t", 0, 5)))
    h.coord.leave_group("g", [MemberIdentity(ids[0])])
    await h.settle()
    assert h.coord.groups["g"].state is GroupState.EMPTY
    await h.advance(CONFIG.offsets_retention_ms - 10_000)
    await h.coord.commit_offsets("recent", -1, "", parts(("t", 0, 6)))
    assert "g" in h.coord.groups
    await h.advance(11_000)
    assert "g" not in h.coord.groups, "expired one retention period after becoming empty"
    assert "recent" in h.coord.groups
    h2 = await Harness(log=h.log, timer=h.timer).start()
    assert "g" not in h2.coord.groups
    assert h2.coord.fetch_offsets("recent", [("t", [0])]).topics[0].partitions[0].offset == 6


@run
async def test_explicit_retention_time_is_kept_as_expire_timestamp() -> None:
    h = await Harness().start()
    await h.coord.commit_offsets("g", -1, "", parts(("t", 0, 1)), retention_ms=5_000)
    records = h.log.records(partition_for("g", CONFIG.offsets_topic_num_partitions))
    value = next(r.value for r in records if isinstance(decode_key(r.key or b""), OffsetCommitKey))
    assert value is not None and value[:2] == b"\x00\x01"  # OffsetCommitValue v1
    assert decode_offset_commit_value(value).expire_timestamp == h.timer.now_ms() + 5_000
    await h.advance(5_000)
    assert "g" not in h.coord.groups


@run
async def test_group_metadata_is_stored_after_sync() -> None:
    h = await Harness().start()
    gen, ids = await stable_group(h, 2)
    records = h.log.records(partition_for("g", CONFIG.offsets_topic_num_partitions))
    last = [r for r in records if decode_key(r.key or b"") == GroupMetadataKey("g")][-1]
    assert last.value is not None
    value = decode_group_metadata_value(last.value)
    assert (value.generation, value.protocol, value.leader) == (gen, "range", ids[0])
    assert [(m.member_id, m.assignment) for m in value.members] == [(i, i.encode()) for i in ids]


def test_memory_log_is_a_real_v2_log() -> None:
    async def go() -> None:
        log = MemoryCoordinatorLog(1)
        await log.prepare()
        await log.append(0, [(b"k1", b"v1"), (b"k2", None)], 1000, timeout_ms=1000).durable
        await log.append(0, [(b"k3", b"v3")], 1001, timeout_ms=1000).durable
        assert [(r.offset, r.key, r.value) for r in await log.read_partition(0)] == [
            (0, b"k1", b"v1"),
            (1, b"k2", None),
            (2, b"k3", b"v3"),
        ]

    asyncio.run(go())


@pytest.mark.parametrize("member_count", [1, 3])
def test_stable_group_helper(member_count: int) -> None:
    async def go() -> None:
        h = await Harness().start()
        gen, ids = await stable_group(h, member_count)
        assert gen == 1 and len(ids) == member_count

    asyncio.run(go())


@run
async def test_offsets_of_deleted_topics_are_tombstoned() -> None:
    h = await Harness().start()
    await h.coord.commit_offsets("a", -1, "", parts(("gone", 0, 1), ("gone", 1, 2), ("kept", 0, 3)))
    await h.coord.commit_offsets("b", -1, "", parts(("gone", 0, 4)))
    assert h.coord.on_partitions_deleted([("gone", 0), ("gone", 1)]) == 3
    await h.settle()
    assert [t.topic for t in h.coord.fetch_offsets("a", None).topics] == ["kept"]
    assert h.coord.fetch_offsets("b", None).topics == ()
    h2 = await Harness(log=h.log, timer=h.timer).start()
    assert [t.topic for t in h2.coord.fetch_offsets("a", None).topics] == ["kept"]
