"""Kafka's classic consumer group: members, generations and the group state machine.

States and their transitions (Kafka's ClassicGroupState)::

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
      ^                  ^      |                                               |
      |                  |      +--no members left--> Empty           leader's SyncGroup
      |                  +---- join / leave / expiry ---- Stable <--------------+
    any state --DeleteGroups / offsets expired--> Dead

How each state answers each group API (``-`` = handled normally):

===================  =========================  ========================  =========================
API                  Empty                      PreparingRebalance        CompletingRebalance
===================  =========================  ========================  =========================
JoinGroup (new)      add member, start the      add member, answer when   add member, rebalance
                     initial delayed rebalance  the rebalance completes   again
JoinGroup (known)    UNKNOWN_MEMBER_ID          update, answer later      same protocols: answer
                                                                          now; else rebalance
SyncGroup            UNKNOWN_MEMBER_ID          REBALANCE_IN_PROGRESS     park; leader's sync
                                                                          stores assignments and
                                                                          answers everyone
Heartbeat            UNKNOWN_MEMBER_ID          REBALANCE_IN_PROGRESS     NONE
LeaveGroup           UNKNOWN_MEMBER_ID          remove; maybe complete    remove, rebalance
                     (per member)               the join phase
OffsetCommit         only generation -1         - (member + generation    REBALANCE_IN_PROGRESS
                     (admin/simple commits)     checked)
OffsetFetch          -                          -                         -
DescribeGroups       state, no members          members (no metadata)     members (no metadata)
DeleteGroups         deletes (tombstones)       NON_EMPTY_GROUP           NON_EMPTY_GROUP
OffsetDelete         deletes                    GROUP_SUBSCRIBED_TO_TOPIC for subscribed topics
                                                (consumer protocol), else NON_EMPTY_GROUP
===================  =========================  ========================  =========================

===================  =========================================  ==============================
API                  Stable                                     Dead
===================  =========================================  ==============================
JoinGroup (new)      add member, rebalance; a known static      COORDINATOR_NOT_AVAILABLE
                     instance id with unchanged protocols
                     takes its old place without rebalance
JoinGroup (known)    leader or changed protocols: rebalance;    COORDINATOR_NOT_AVAILABLE
                     else answer with the current generation
SyncGroup            the member's current assignment            COORDINATOR_NOT_AVAILABLE
Heartbeat            NONE                                       COORDINATOR_NOT_AVAILABLE
LeaveGroup           remove, rebalance                          COORDINATOR_NOT_AVAILABLE
OffsetCommit         - (member + generation checked)            COORDINATOR_NOT_AVAILABLE
OffsetFetch          -                                          no offsets
DescribeGroups       members with metadata and assignment       state Dead
DeleteGroups         NON_EMPTY_GROUP                            GROUP_ID_NOT_FOUND
OffsetDelete         as PreparingRebalance                      GROUP_ID_NOT_FOUND
===================  =========================================  ==============================

Member and generation checks come first everywhere (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID for a
static member known under another member id, then ILLEGAL_GENERATION).
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections import Counter
from typing import TypeVar

from kio.schema.errors import ErrorCode

from tidelog.broker.group.results import (
    JoinedMember,
    JoinGroupResult,
    Protocol,
    SyncGroupResult,
)
from tidelog.protocol.internal_topics.consumer_offsets import all_subscribed_topics

CONSUMER_PROTOCOL_TYPE = "consumer"

_T = TypeVar("_T")


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class Member:
    """A member of a classic group (mutable: it lives inside its group)."""

    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "group_instance_id",
        "is_new",
        "join_future",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "sync_future",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[Protocol, ...],
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = assignment
        self.join_future: asyncio.Future[JoinGroupResult] | None = None
        self.sync_future: asyncio.Future[SyncGroupResult] | None = None
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def has_satisfied_heartbeat(self) -> bool:
        """Members parked in a rebalance need no heartbeats, except new ones."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def metadata(self, protocol_name: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol_name:
                return p.metadata
        return b""

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return protocols == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols (in its preference order) among candidates."""
        for p in self.protocols:
            if p.name in candidates:
                return p.name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class ClassicGroup:
    """One group's membership state. The coordinator drives it; it does no I/O and no timing."""

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.EMPTY
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join: set[str] = set()
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self._supported: Counter[str] = Counter()

    # ------------------------------------------------------------ state

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise AssertionError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {target.value}"
            )
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    # ------------------------------------------------------------ members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_join

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def generate_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_join

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: Member, join_future: asyncio.Future[JoinGroupResult] | None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise AssertionError(f"static member {member.group_instance_id} already present")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported.update(p.name for p in member.protocols)
        member.join_future = join_future
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported.subtract(p.name for p in member.protocols)
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)

    def update_member(
        self,
        member: Member,
        protocols: tuple[Protocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_future: asyncio.Future[JoinGroupResult] | None,
    ) -> None:
        self._supported.subtract(p.name for p in member.protocols)
        member.protocols = protocols
        self._supported.update(p.name for p in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if member.join_future is not None and member.join_future is not join_future:
            # A second JoinGroup from the same member supersedes the first (Kafka overwrites
            # the future; we answer the old one so its connection is not left hanging).
            _resolve(
                member.join_future,
                JoinGroupResult(ErrorCode.rebalance_in_progress, member_id=member.member_id),
            )
        member.join_future = join_future

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member came back with a new member id: fence the old id, keep the rest."""
        old = self.members.pop(old_id)
        if old.join_future is not None:
            _resolve(old.join_future, JoinGroupResult(ErrorCode.fenced_instance_id, old_id))
            old.join_future = None
        if old.sync_future is not None:
            _resolve(old.sync_future, SyncGroupResult(ErrorCode.fenced_instance_id))
            old.sync_future = None
        new = Member(
            new_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self.members[new_id] = new
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        return new

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID / NONE, as Kafka's validateMember."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    # ------------------------------------------------------------ protocols

    def _candidates(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self._supported.items() if count == n and n > 0}

    def supports_protocols(self, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self._supported.get(p.name, 0) == n for p in protocols
        )

    def select_protocol(self) -> str:
        """The protocol all members support with the most first-choice votes (ties: the one
        voted for first, in member join order)."""
        if not self.members:
            raise AssertionError("cannot select a protocol for an empty group")
        candidates = self._candidates()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        return all_subscribed_topics(
            [m.metadata(self.protocol_name) for m in self.members.values()]
        )

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def current_join_members(self) -> tuple[JoinedMember, ...]:
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def join_result_for(self, member_id: str, *, with_members: bool) -> JoinGroupResult:
        return JoinGroupResult(
            ErrorCode.none,
            member_id=member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            members=self.current_join_members() if with_members else (),
        )

    # ------------------------------------------------------------ futures

    def complete_join(self, member: Member, result: JoinGroupResult) -> bool:
        fut, member.join_future = member.join_future, None
        if fut is None:
            return False
        _resolve(fut, result)
        return True

    def complete_sync(self, member: Member, result: SyncGroupResult) -> bool:
        fut, member.sync_future = member.sync_future, None
        if fut is None:
            return False
        _resolve(fut, result)
        return True


def _resolve(fut: asyncio.Future[_T], value: _T) -> None:
    if not fut.done():
        fut.set_result(value)
