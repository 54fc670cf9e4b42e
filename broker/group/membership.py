"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup for classic groups, with their timers.

Follows Kafka's GroupMetadataManager (classic groups): see ``broker.group.state`` for the
state table. Everything runs on the event loop thread; JoinGroup and SyncGroup answers are
futures completed when the rebalance gets there. Timer keys: ``hb:<group>:<member>`` (session
expiry), ``join:<group>`` (initial delay / rebalance timeout), ``sync:<group>`` (members that
never send SyncGroup after a join phase).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tidelog.broker.group.metadata_log import GroupMetadataLog
from tidelog.broker.group.offsets import empty_group_metadata_record, group_metadata_record
from tidelog.broker.group.rebalance import Rebalancer, append_error, hb_key, log
from tidelog.broker.group.results import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    MemberIdentity,
    Protocol,
    SyncGroupResult,
)
from tidelog.broker.group.state import ClassicGroup, GroupState, Member

if TYPE_CHECKING:
    from tidelog.broker.group.consumer.coordinator import ConsumerGroups

_CALLING = (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    #: JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED (KIP-394).
    require_known_member_id: bool = True
    #: JoinGroup v9+: a static leader rejoining a Stable group may skip the assignment.
    supports_skip_assignment: bool = False


class GroupMembership:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup (one part of the coordinator: shares its
    groups, drives its ``Rebalancer``, writes through its ``GroupMetadataLog``)."""

    def __init__(
        self,
        groups: dict[str, ClassicGroup],
        metadata_log: GroupMetadataLog,
        rebalancer: Rebalancer,
    ) -> None:
        self.groups = groups
        self.metadata_log = metadata_log
        self.rebalancer = rebalancer
        self.config = metadata_log.config
        self.timer = metadata_log.timer
        #: KIP-848 consumer groups beside the classic ones (set by ``GroupCoordinator``).
        self.consumer_groups: ConsumerGroups | None = None

    # ------------------------------------------------------------ JoinGroup

    async def join_group(self, req: JoinRequest) -> JoinGroupResult:
        error = self.metadata_log.inactive_error()
        if error is not None:
            return JoinGroupResult(error, req.member_id)
        if not req.group_id:
            return JoinGroupResult(ErrorCode.invalid_group_id, req.member_id)
        if not (
            self.config.min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return JoinGroupResult(ErrorCode.invalid_session_timeout, req.member_id)
        consumer = self.consumer_groups
        if consumer is not None and consumer.owns(req.group_id):
            # A KIP-848 consumer group of that id: an empty one goes back to a classic group
            # (Kafka 4's downgrade); classic members in a live one are not supported here.
            # Kafka divergence: Kafka 4 lets classic members join a consumer group.
            if consumer.has_members(req.group_id):
                return JoinGroupResult(ErrorCode.inconsistent_group_protocol, req.member_id)
            consumer.drop_if_empty(req.group_id)
        fut: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        self._join(req, fut)
        return await asyncio.shield(fut)

    def _join(self, req: JoinRequest, fut: asyncio.Future[JoinGroupResult]) -> None:
        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(req.group_id)
        is_new_group = group is None
        if group is None:
            if not is_unknown:
                fut.set_result(JoinGroupResult(ErrorCode.unknown_member_id, req.member_id))
                return
            group = ClassicGroup(req.group_id, self.metadata_log.now())
            self.groups[req.group_id] = group

        if not self._accept_joining_member(group, req.member_id):
            if group.has_member(req.member_id):
                self.timer.cancel(hb_key(group.group_id, req.member_id))
            group.remove(req.member_id)
            fut.set_result(JoinGroupResult(ErrorCode.group_max_size_reached))
        elif is_unknown:
            self._join_new_member(req, group, fut)
        else:
            self._join_existing_member(req, group, fut)

        if is_new_group:
            self.metadata_log.write_background(group.group_id, [empty_group_metadata_record(group)])

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (
                member is not None and member.awaiting_join
            ) or group.num_awaiting_join() < self.config.max_size
        return group.has_member(member_id) or len(group.members) < self.config.max_size

    def _join_new_member(
        self, req: JoinRequest, group: ClassicGroup, fut: asyncio.Future[JoinGroupResult]
    ) -> None:
        if group.is_in(GroupState.DEAD):
            fut.set_result(JoinGroupResult(ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            fut.set_result(JoinGroupResult(ErrorCode.inconsistent_group_protocol))
            return
        new_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                self._update_static_member(req, group, existing, new_id, fut)
            else:
                self._add_member_and_rebalance(req, group, new_id, fut)
        elif req.require_known_member_id:
            group.pending_join.add(new_id)
            gid = group.group_id
            self.timer.schedule(
                hb_key(gid, new_id),
                req.session_timeout_ms,
                lambda: self.rebalancer.expire_heartbeat(gid, new_id),
            )
            fut.set_result(JoinGroupResult(ErrorCode.member_id_required, member_id=new_id))
        else:
            self._add_member_and_rebalance(req, group, new_id, fut)

    def _join_existing_member(
        self, req: JoinRequest, group: ClassicGroup, fut: asyncio.Future[JoinGroupResult]
    ) -> None:
        mid = req.member_id
        if group.is_in(GroupState.DEAD):
            fut.set_result(JoinGroupResult(ErrorCode.coordinator_not_available, mid))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            fut.set_result(JoinGroupResult(ErrorCode.inconsistent_group_protocol, mid))
            return
        if group.is_pending(mid):
            if req.group_instance_id is not None:
                fut.set_result(JoinGroupResult(ErrorCode.invalid_request, mid))
                return
            self._add_member_and_rebalance(req, group, mid, fut)
            return
        error = group.validate_member(mid, req.group_instance_id)
        if error is not ErrorCode.none:
            fut.set_result(JoinGroupResult(error, mid))
            return
        member = group.members[mid]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(req, group, member, fut)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # It lost the JoinGroup answer: send the current generation again.
                fut.set_result(group.join_result_for(mid, with_members=group.is_leader(mid)))
            else:
                self._update_member_and_rebalance(req, group, member, fut)
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(mid) or not member.matches(req.protocols):
                self._update_member_and_rebalance(req, group, member, fut)
            else:
                fut.set_result(group.join_result_for(mid, with_members=False))
        else:
            fut.set_result(JoinGroupResult(ErrorCode.unknown_member_id, mid))

    def _update_member_and_rebalance(
        self,
        req: JoinRequest,
        group: ClassicGroup,
        member: Member,
        fut: asyncio.Future[JoinGroupResult],
    ) -> None:
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, fut
        )
        self.rebalancer.maybe_prepare_rebalance_or_complete_join(group)

    def _add_member_and_rebalance(
        self,
        req: JoinRequest,
        group: ClassicGroup,
        member_id: str,
        fut: asyncio.Future[JoinGroupResult],
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
        )
        member.is_new = True
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, fut)
        # A parked JoinGroup cannot heartbeat; time out new members that never come back.
        self.rebalancer.reschedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self.rebalancer.maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member(
        self,
        req: JoinRequest,
        group: ClassicGroup,
        old_id: str,
        new_id: str,
        fut: asyncio.Future[JoinGroupResult],
    ) -> None:
        assert req.group_instance_id is not None
        instance_id = req.group_instance_id
        current_leader = group.leader_id or ""
        self.timer.cancel(hb_key(group.group_id, old_id))
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.rebalancer.reschedule_heartbeat(group, member)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, fut
        )
        if group.is_in(GroupState.STABLE):
            if group.protocol_name != group.select_protocol():
                self.rebalancer.maybe_prepare_rebalance_or_complete_join(group)
                return
            # Same protocol: take the old member's place without a rebalance, once persisted.
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            generation = group.generation_id

            def done(error: ErrorCode) -> None:
                if error is not ErrorCode.none:
                    if group.members.get(new_id) is member:
                        group.update_member(member, old[0], old[1], old[2], None)
                        self.timer.cancel(hb_key(group.group_id, new_id))
                        back = group.replace_static_member(instance_id, new_id, old_id)
                        self.rebalancer.reschedule_heartbeat(group, back)
                    if not fut.done():
                        fut.set_result(JoinGroupResult(append_error(error)))
                    return
                if group.members.get(new_id) is not member or group.generation_id != generation:
                    return  # a rebalance took over; it answers the future
                if req.supports_skip_assignment:
                    is_leader = group.is_leader(new_id)
                    result = group.join_result_for(new_id, with_members=is_leader)
                    if is_leader:
                        result = JoinGroupResult(
                            result.error,
                            result.member_id,
                            result.generation_id,
                            result.protocol_type,
                            result.protocol_name,
                            result.leader,
                            True,
                            result.members,
                        )
                else:
                    result = JoinGroupResult(
                        ErrorCode.none,
                        member_id=new_id,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=current_leader,
                    )
                group.complete_join(member, result)

            self.metadata_log.write_background(
                group.group_id, [group_metadata_record(group, assignment)], done
            )
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may already hold the old member id: rebalance so the ids line up.
            self.rebalancer.prepare_rebalance(group)
        else:
            self.rebalancer.maybe_complete_join_phase(group)

    # ------------------------------------------------------------ SyncGroup

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: dict[str, bytes] | None = None,
    ) -> SyncGroupResult:
        error = self.metadata_log.inactive_error()
        if error is not None:
            return SyncGroupResult(error)
        if not group_id:
            return SyncGroupResult(ErrorCode.invalid_group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_empty:
            return SyncGroupResult(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.DEAD):
            return SyncGroupResult(ErrorCode.coordinator_not_available)
        error = group.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.none:
            return SyncGroupResult(error)
        if generation_id != group.generation_id:
            return SyncGroupResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncGroupResult(ErrorCode.inconsistent_group_protocol)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncGroupResult(ErrorCode.rebalance_in_progress)
        member = group.members[member_id]
        if group.is_in(GroupState.STABLE):
            self.rebalancer.remove_pending_sync(group, member_id)
            return SyncGroupResult(
                ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment
            )
        # CompletingRebalance: park until the leader's assignment is stored.
        fut: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        if member.sync_future is not None:
            group.complete_sync(member, SyncGroupResult(ErrorCode.rebalance_in_progress))
        member.sync_future = fut
        self.rebalancer.remove_pending_sync(group, member_id)
        if group.is_leader(member_id):
            given = assignments or {}
            assignment = {m: given.get(m, b"") for m in group.members}
            generation = group.generation_id

            def done(error: ErrorCode) -> None:
                if not (
                    group.is_in(GroupState.COMPLETING_REBALANCE)
                    and group.generation_id == generation
                ):
                    return
                if error is not ErrorCode.none:
                    for m in group.members.values():
                        m.assignment = b""
                    self.rebalancer.propagate_assignment(group, append_error(error))
                    self.rebalancer.maybe_prepare_rebalance_or_complete_join(group)
                    return
                for m in group.members.values():
                    m.assignment = assignment.get(m.member_id, b"")
                self.rebalancer.propagate_assignment(group, ErrorCode.none)
                group.transition_to(GroupState.STABLE, self.metadata_log.now())
                log.info("group %s: stable at generation %d", group.group_id, generation)

            self.metadata_log.write_background(
                group_id, [group_metadata_record(group, assignment)], done
            )
        return await asyncio.shield(fut)

    # ------------------------------------------------------------ Heartbeat

    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        if self.metadata_log.status == "loading":
            return ErrorCode.none  # as Kafka: answer blindly while loading
        error = self.metadata_log.inactive_error()
        if error is not None:
            return error
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = group.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.none:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_empty:
            return ErrorCode.unknown_member_id
        self.rebalancer.reschedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # ------------------------------------------------------------ LeaveGroup

    def leave_group(self, group_id: str, members: Sequence[MemberIdentity]) -> LeaveGroupResult:
        error = self.metadata_log.inactive_error()
        if error is not None:
            return LeaveGroupResult(error)
        if not group_id:
            return LeaveGroupResult(ErrorCode.invalid_group_id)
        group = self.groups.get(group_id)
        if group is None:
            return LeaveGroupResult(
                ErrorCode.none,
                tuple(
                    LeaveMemberResult(m.member_id, m.group_instance_id, ErrorCode.unknown_member_id)
                    for m in members
                ),
            )
        if group.is_in(GroupState.DEAD):
            return LeaveGroupResult(ErrorCode.coordinator_not_available)
        results: list[LeaveMemberResult] = []
        left = 0
        for ident in members:
            error = ErrorCode.none
            if ident.member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal by group instance id.
                target = (
                    group.static_member_id(ident.group_instance_id)
                    if ident.group_instance_id is not None
                    else None
                )
                if target is None:
                    error = ErrorCode.unknown_member_id
                else:
                    self._remove_leaving_member(group, target)
            elif group.is_pending(ident.member_id):
                group.remove(ident.member_id)
                self.timer.cancel(hb_key(group_id, ident.member_id))
            else:
                error = group.validate_member(ident.member_id, ident.group_instance_id)
                if error is ErrorCode.none:
                    self._remove_leaving_member(group, ident.member_id)
            if error is ErrorCode.none:
                left += 1
            results.append(LeaveMemberResult(ident.member_id, ident.group_instance_id, error))
        if left:
            if group.is_in(*_CALLING):
                self.rebalancer.maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self.rebalancer.maybe_complete_join_phase(group)
        return LeaveGroupResult(ErrorCode.none, tuple(results))

    def _remove_leaving_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members[member_id]
        self.timer.cancel(hb_key(group.group_id, member_id))
        log.info("group %s: member %s left", group.group_id, member_id)
        group.complete_join(member, JoinGroupResult(ErrorCode.unknown_member_id))
        group.complete_sync(member, SyncGroupResult(ErrorCode.unknown_member_id))
        group.remove(member_id)
