"""The classic group state machine: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, timers."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from tests.broker.group.group_harness import CONFIG, Harness, done, run, subscription
from tidelog.broker.group.results import MemberIdentity
from tidelog.broker.group.state import GroupState


async def stable_group(h: Harness, n: int = 2, **kw: object) -> tuple[int, list[str]]:
    """n members join during the initial delay; the leader assigns; all synced."""
    tasks = [await h.join_new(client_id=f"c{i}", **kw) for i in range(n)]  # type: ignore[arg-type]
    # Each member after the first extends the initial delay once more.
    await h.advance(CONFIG.initial_rebalance_delay_ms * 2)
    results = [await done(t, h) for t in tasks]
    gen = results[0].generation_id
    ids = [r.member_id for r in results]
    leader = results[0].leader
    syncs = [
        h.sync("g", gen, mid, {m: m.encode() for m in ids} if mid == leader else None)
        for mid in ids
    ]
    for s in syncs:
        assert (await done(s, h)).error is ErrorCode.none
    assert h.coord.groups["g"].state is GroupState.STABLE
    return gen, ids


@run
async def test_member_id_required_then_initial_delay() -> None:
    h = await Harness().start()
    first = await h.join()
    assert first.error is ErrorCode.member_id_required
    assert first.member_id.startswith("client-")
    task = h.join(member_id=first.member_id)
    await h.settle()
    assert not task.done(), "JoinGroup waits for the initial rebalance delay"
    assert h.coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    await h.advance(CONFIG.initial_rebalance_delay_ms)
    r = await done(task, h)
    assert r.error is ErrorCode.none
    assert r.generation_id == 1
    assert r.leader == first.member_id == r.member_id
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert [m.member_id for m in r.members] == [first.member_id]
    assert r.members[0].metadata == subscription("t")


@run
async def test_two_members_one_generation_and_assignment() -> None:
    h = await Harness().start()
    gen, ids = await stable_group(h, 2)
    assert gen == 1
    # The follower gets what the leader assigned to it.
    r = await h.sync("g", gen, ids[1])
    assert r.assignment == ids[1].encode() and r.protocol_name == "range"
    assert h.coord.heartbeat("g", gen, ids[0]) is ErrorCode.none


@run
async def test_old_join_versions_need_no_member_id() -> None:
    h = await Harness().start()
    task = h.join(require_known_member_id=False)
    await h.advance(CONFIG.initial_rebalance_delay_ms)
    r = await done(task, h)
    assert r.error is ErrorCode.none and r.member_id and r.generation_id == 1


@run
async def test_initial_delay_is_extended_by_new_members() -> None:
    h = await Harness().start()
    a = await h.join_new(client_id="a")
    await h.advance(60)
    b = await h.join_new(client_id="b")
    await h.advance(60)  # 120 ms: the first delay is over, but a member came: extended
    assert not a.done() and not b.done()
    await h.advance(100)
    ra, rb = await done(a, h), await done(b, h)
    assert ra.generation_id == rb.generation_id == 1
    assert len(ra.members) == 2 and rb.members == ()


@run
async def test_protocol_selection_by_votes() -> None:
    h = await Harness().start()
    sub = subscription("t")
    tasks = [
        await h.join_new(client_id="a", protocols=(("range", sub), ("roundrobin", sub))),
        await h.join_new(client_id="b", protocols=(("roundrobin", sub), ("range", sub))),
        await h.join_new(client_id="c", protocols=(("roundrobin", sub), ("sticky", sub))),
    ]
    await h.advance(CONFIG.initial_rebalance_delay_ms * 3)
    assert {(await done(t, h)).protocol_name for t in tasks} == {"roundrobin"}
    # A member that supports none of the group's protocols is refused.
    bad = await h.join(protocols=(("sticky", sub),))
    assert bad.error is ErrorCode.inconsistent_group_protocol
    other_type = await h.join(protocol_type="connect")
    assert other_type.error is ErrorCode.inconsistent_group_protocol
    # An empty group refuses a member without protocols.
    none = await h.join("other", protocols=())
    assert none.error is ErrorCode.inconsistent_group_protocol


@run
async def test_join_errors() -> None:
    h = Harness()
    assert (await h.join()).error is ErrorCode.coordinator_load_in_progress
    await h.start()
    assert (await h.join("")).error is ErrorCode.invalid_group_id
    assert (await h.join(session_ms=1)).error is ErrorCode.invalid_session_timeout
    assert (await h.join(member_id="nobody")).error is ErrorCode.unknown_member_id


@run
async def test_heartbeat_answers_by_state() -> None:
    h = await Harness().start()
    assert h.coord.heartbeat("g", 0, "x") is ErrorCode.unknown_member_id
    gen, ids = await stable_group(h, 2)
    assert h.coord.heartbeat("g", gen, ids[0]) is ErrorCode.none
    assert h.coord.heartbeat("g", gen + 5, ids[0]) is ErrorCode.illegal_generation
    assert h.coord.heartbeat("g", gen, "stranger") is ErrorCode.unknown_member_id
    assert h.coord.heartbeat("", gen, ids[0]) is ErrorCode.invalid_group_id
    # A third member arrives: the group rebalances and heartbeats say so.
    newcomer = await h.join_new(client_id="c2")
    await h.settle()
    assert h.coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", gen, ids[0]) is ErrorCode.rebalance_in_progress
    # Syncing in PreparingRebalance is refused too.
    assert (await h.sync("g", gen, ids[1])).error is ErrorCode.rebalance_in_progress
    rejoin = [h.join(member_id=m) for m in ids]
    results = [await done(t, h) for t in [*rejoin, newcomer]]
    assert {r.generation_id for r in results} == {gen + 1}
    assert h.coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert h.coord.heartbeat("g", gen + 1, ids[0]) is ErrorCode.none


@run
async def test_session_expiry_removes_member_and_rebalances() -> None:
    h = await Harness().start()
    gen, ids = await stable_group(h, 2, session_ms=1000)
    # Only the first member keeps heartbeating.
    for _ in range(2):
        await h.advance(300)
        assert h.coord.heartbeat("g", gen, ids[0]) is ErrorCode.none
    await h.advance(500)
    group = h.coord.groups["g"]
    assert ids[1] not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", gen, ids[0]) is ErrorCode.rebalance_in_progress
    r = await done(h.join(member_id=ids[0], session_ms=1000), h)
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [ids[0]]


@run
async def test_members_that_do_not_rejoin_are_dropped_at_rebalance_timeout() -> None:
    h = await Harness().start()
    gen, ids = await stable_group(h, 2, rebalance_ms=5000, session_ms=60_000)
    t0 = h.join(member_id=ids[0], rebalance_ms=5000, session_ms=60_000)  # leader forces one
    await h.advance(4000)
    assert not t0.done()
    await h.advance(1000)
    r = await done(t0, h)
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [ids[0]]
    assert ids[1] not in h.coord.groups["g"].members


@run
async def test_leave_group() -> None:
    h = await Harness().start()
    gen, ids = await stable_group(h, 2)
    res = h.coord.leave_group("g", [MemberIdentity(ids[1]), MemberIdentity("ghost")])
    assert [m.error for m in res.members] == [ErrorCode.none, ErrorCode.unknown_member_id]
    group = h.coord.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE and ids[1] not in group.members
    r = await done(h.join(member_id=ids[0]), h)
    assert r.generation_id == gen + 1
    # Unknown group: every member gets UNKNOWN_MEMBER_ID.
    res = h.coord.leave_group("nope", [MemberIdentity("a")])
    assert res.error is ErrorCode.none
    assert res.members[0].error is ErrorCode.unknown_member_id
    # The last member leaving empties the group after the rebalance completes.
    await done(h.sync("g", gen + 1, ids[0], {ids[0]: b"x"}), h)
    h.coord.leave_group("g", [MemberIdentity(ids[0])])
    await h.settle()
    assert group.state is GroupState.EMPTY and group.generation_id == gen + 2


@run
async def test_pending_member_expires() -> None:
    h = await Harness().start()
    first = await h.join(session_ms=500)
    assert first.member_id in h.coord.groups["g"].pending_join
    await h.advance(500)
    assert first.member_id not in h.coord.groups["g"].pending_join


@run
async def test_member_that_never_syncs_is_removed() -> None:
    h = await Harness().start()
    a = await h.join_new(client_id="a", rebalance_ms=2000)
    b = await h.join_new(client_id="b", rebalance_ms=2000)
    await h.advance(CONFIG.initial_rebalance_delay_ms * 2)
    ra, rb = await done(a, h), await done(b, h)
    s = h.sync("g", ra.generation_id, ra.member_id, {ra.member_id: b"a", rb.member_id: b"b"})
    assert (await done(s, h)).assignment == b"a"
    await h.advance(2000)  # b never sends SyncGroup
    group = h.coord.groups["g"]
    assert rb.member_id not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE


@run
async def test_leader_rejoin_with_same_metadata_in_completing_gets_members_again() -> None:
    h = await Harness().start()
    t = await h.join_new()
    await h.advance(CONFIG.initial_rebalance_delay_ms)
    r = await done(t, h)
    again = await h.join(member_id=r.member_id)
    assert again.generation_id == r.generation_id and len(again.members) == 1


@run
async def test_static_member_rejoins_without_rebalance() -> None:
    h = await Harness().start()
    a = h.join(instance="i-a", client_id="a", session_ms=5000)
    b = h.join(instance="i-b", client_id="b", session_ms=5000)
    await h.advance(CONFIG.initial_rebalance_delay_ms * 2)
    ra, rb = await done(a, h), await done(b, h)
    gen = ra.generation_id
    assert ra.member_id.startswith("i-a-")
    sa = h.sync("g", gen, ra.member_id, {ra.member_id: b"A", rb.member_id: b"B"}, "i-a")
    sb = h.sync("g", gen, rb.member_id, None, "i-b")
    assert (await done(sa, h)).assignment == b"A" and (await done(sb, h)).assignment == b"B"
    # b restarts (no LeaveGroup) and comes back with its instance id, unknown member id.
    await h.advance(2000)
    rb2 = await done(h.join(instance="i-b", client_id="b", session_ms=5000), h)
    await h.settle()
    assert rb2.error is ErrorCode.none
    assert rb2.generation_id == gen and rb2.member_id != rb.member_id
    assert rb2.leader == ra.member_id and rb2.members == ()
    assert h.coord.groups["g"].state is GroupState.STABLE
    s = await done(h.sync("g", gen, rb2.member_id, None, "i-b"), h)
    assert s.assignment == b"B"
    # The old incarnation is fenced; the other member saw no rebalance.
    assert h.coord.heartbeat("g", gen, rb.member_id, "i-b") is ErrorCode.fenced_instance_id
    assert h.coord.heartbeat("g", gen, ra.member_id, "i-a") is ErrorCode.none


@run
async def test_static_leader_rejoin_with_v9_skips_assignment() -> None:
    h = await Harness().start()
    a = h.join(instance="i-a", client_id="a")
    await h.advance(CONFIG.initial_rebalance_delay_ms)
    ra = await done(a, h)
    await done(h.sync("g", ra.generation_id, ra.member_id, {ra.member_id: b"A"}, "i-a"), h)
    r = await done(h.join(instance="i-a", client_id="a", supports_skip_assignment=True), h)
    await h.settle()
    assert r.skip_assignment and r.leader == r.member_id and len(r.members) == 1


@run
async def test_static_member_with_new_protocols_triggers_rebalance() -> None:
    h = await Harness().start()
    sub = subscription("t")
    a = h.join(instance="i-a", protocols=(("range", sub), ("roundrobin", sub)))
    await h.advance(CONFIG.initial_rebalance_delay_ms)
    ra = await done(a, h)
    await done(h.sync("g", ra.generation_id, ra.member_id, {ra.member_id: b"A"}, "i-a"), h)
    t = h.join(instance="i-a", protocols=(("roundrobin", sub),))
    await h.settle()
    assert h.coord.groups["g"].state in (
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
    )
    r = await done(t, h)
    assert r.generation_id == ra.generation_id + 1 and r.protocol_name == "roundrobin"


@run
async def test_static_member_fenced_when_member_id_mismatches() -> None:
    h = await Harness().start()
    a = h.join(instance="i-a")
    await h.advance(CONFIG.initial_rebalance_delay_ms)
    ra = await done(a, h)
    r = await h.join(member_id="wrong", instance="i-a")
    assert r.error is ErrorCode.fenced_instance_id
    res = h.coord.leave_group("g", [MemberIdentity("", "i-a")])  # admin removal by instance
    assert res.members[0].error is ErrorCode.none
    assert ra.member_id not in h.coord.groups["g"].members


@run
async def test_sync_errors() -> None:
    h = await Harness().start()
    assert (await h.sync("g", 1, "m")).error is ErrorCode.unknown_member_id
    gen, ids = await stable_group(h, 1)
    assert (await h.sync("g", gen + 1, ids[0])).error is ErrorCode.illegal_generation
    assert (await h.sync("g", gen, "x")).error is ErrorCode.unknown_member_id
    r = await h.coord.sync_group("g", gen, ids[0], None, "consumer", "roundrobin", {})
    assert r.error is ErrorCode.inconsistent_group_protocol


@run
async def test_group_max_size() -> None:
    from dataclasses import replace

    h = await Harness(replace(CONFIG, max_size=1)).start()
    t = await h.join_new(client_id="a")
    await h.settle()
    second = await h.join(client_id="b")
    assert second.error is ErrorCode.group_max_size_reached
    await h.advance(CONFIG.initial_rebalance_delay_ms)
    assert (await done(t, h)).error is ErrorCode.none


@run
async def test_stop_fails_parked_requests() -> None:
    h = await Harness().start()
    t = await h.join_new()
    await h.settle()
    await h.coord.stop()
    assert (await asyncio.wait_for(t, 1)).error is ErrorCode.not_coordinator
    assert (await h.join()).error is ErrorCode.coordinator_not_available
