"""Kafka's rebalance phases for classic groups (``Rebalancer``, one part of the coordinator).

``Rebalancer`` moves groups through PreparingRebalance and CompletingRebalance (initial delay,
rebalance timeout, session expiry, members that never sync); it shares the coordinator's groups
and writes through its ``GroupMetadataLog``. The request entry points are in
``broker.group.membership`` and ``broker.group.coordinator``.
Timer keys: ``hb:<group>:<member>`` (session expiry), ``join:<group>`` (initial delay /
rebalance timeout), ``sync:<group>`` (members that never send SyncGroup after a join phase).
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from tidelog.broker.group.metadata_log import GroupMetadataLog
from tidelog.broker.group.offsets import group_metadata_record
from tidelog.broker.group.results import (
    JoinGroupResult,
    SyncGroupResult,
)
from tidelog.broker.group.state import ClassicGroup, GroupState, Member

log = logging.getLogger("tidelog.group")

_CALLING = (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)


def hb_key(group_id: str, member_id: str) -> str:
    return f"hb:{group_id}:{member_id}"


def append_error(error: ErrorCode) -> ErrorCode:
    """Kafka's appendGroupMetadataErrorToResponseError."""
    if error in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.request_timed_out,
        ErrorCode.coordinator_not_available,
    ):
        return ErrorCode.coordinator_not_available
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if error in (
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_fetch_size,
    ):
        return ErrorCode.unknown_server_error
    return error


class Rebalancer:
    """Kafka's rebalance phases for classic groups: moves groups through PreparingRebalance and
    CompletingRebalance (initial delay, rebalance timeout, session expiry, members that never
    sync). Shares the coordinator's groups; writes through its ``GroupMetadataLog``."""

    def __init__(self, groups: dict[str, ClassicGroup], metadata_log: GroupMetadataLog) -> None:
        self.groups = groups
        self.metadata_log = metadata_log
        self.config = metadata_log.config
        self.timer = metadata_log.timer

    def reschedule_heartbeat(
        self, group: ClassicGroup, member: Member, timeout_ms: int | None = None
    ) -> None:
        gid, mid = group.group_id, member.member_id
        self.timer.schedule(
            hb_key(gid, mid),
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self.expire_heartbeat(gid, mid),
        )

    # ------------------------------------------------------------ rebalance phases

    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group)
        else:
            self.maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
            self.propagate_assignment(group, ErrorCode.rebalance_in_progress)
        group.pending_sync.clear()
        self.timer.cancel(f"sync:{group.group_id}")
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            gid = group.group_id
            self.timer.schedule(
                f"join:{gid}",
                delay,
                lambda: self.try_complete_initial_rebalance(gid, delay, remaining),
            )
        group.transition_to(GroupState.PREPARING_REBALANCE, self.metadata_log.now())
        log.info(
            "group %s: preparing to rebalance (generation %d)", group.group_id, group.generation_id
        )
        if not initial:
            self.maybe_complete_join_else_schedule(group)

    def maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self.complete_join(group)
        else:
            gid = group.group_id
            self.timer.schedule(
                f"join:{gid}", group.rebalance_timeout_ms(), lambda: self.complete_join_by_id(gid)
            )

    def try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timer.schedule(
                f"join:{group_id}",
                new_delay,
                lambda: self.try_complete_initial_rebalance(group_id, new_delay, new_remaining),
            )
        else:
            self.complete_join(group)

    def maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.previous_state is GroupState.EMPTY:
            return  # the initial rebalance waits for its delay
        if group.has_all_members_joined():
            self.complete_join(group)

    def complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.timer.cancel(f"join:{gid}")
        for m in group.not_yet_rejoined():
            if not m.is_static:
                group.remove(m.member_id)
                self.timer.cancel(hb_key(gid, m.member_id))
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: try again later, until session expiry removes the members.
            self.timer.schedule(
                f"join:{gid}", group.rebalance_timeout_ms(), lambda: self.complete_join_by_id(gid)
            )
            return
        group.init_next_generation(self.metadata_log.now())
        if group.is_in(GroupState.EMPTY):
            log.info("group %s: generation %d is empty", gid, group.generation_id)
            self.metadata_log.write_background(gid, [group_metadata_record(group, {})])
            return
        log.info(
            "group %s: generation %d with %d members (protocol %s)",
            gid,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )
        for m in list(group.members.values()):
            result = group.join_result_for(m.member_id, with_members=group.is_leader(m.member_id))
            group.complete_join(m, result)
            self.reschedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync.add(m.member_id)
        generation = group.generation_id
        self.timer.schedule(
            f"sync:{gid}",
            group.rebalance_timeout_ms(),
            lambda: self.expire_pending_sync(gid, generation),
        )

    def expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.is_in(*_CALLING) and group.pending_sync:
            for mid in list(group.pending_sync):
                member = group.members.get(mid)
                if member is not None:
                    group.complete_sync(member, SyncGroupResult(ErrorCode.unknown_member_id))
                group.remove(mid)
                self.timer.cancel(hb_key(group_id, mid))
            log.info("group %s: removed members that never sent SyncGroup", group_id)
            self.prepare_rebalance(group)

    def propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error is ErrorCode.none
        for m in list(group.members.values()):
            result = SyncGroupResult(
                error,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
                assignment=m.assignment,
            )
            if group.complete_sync(m, result):
                self.reschedule_heartbeat(group, m)

    def expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return
        if group.is_pending(member_id):
            log.info("group %s: pending member %s expired", group_id, member_id)
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s session expired", group_id, member_id)
        self.remove_member_and_update_group(group, member)

    def remove_member_and_update_group(self, group: ClassicGroup, member: Member) -> None:
        group.complete_join(member, JoinGroupResult(ErrorCode.unknown_member_id))
        group.complete_sync(member, SyncGroupResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        if group.is_in(*_CALLING):
            self.maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(group)

    def remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.is_in(*_CALLING) or not group.pending_sync:
            self.timer.cancel(f"sync:{group.group_id}")
