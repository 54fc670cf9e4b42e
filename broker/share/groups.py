"""Share-group membership: ShareGroupHeartbeat, member epochs and the assignment.

As Kafka's group coordinator does for share groups: a member joins with epoch 0 (its own member
id, from ShareGroupHeartbeat v1 on), heartbeats with its current epoch, leaves with -1, and is
removed when no heartbeat comes within ``share.session.timeout.ms``. A membership, subscription
or topic-metadata change bumps the group epoch and recomputes the assignment; there is no
revocation phase (several members may read one partition), so a member takes the new
assignment and the group epoch at its next heartbeat.

The assignment (Kafka's ``SimpleAssignor`` spreads partitions over members and gives a
partition to several members when there are more members than partitions): per topic, with
the subscribed members sorted, partition ``p`` goes to member ``p % members`` when members <=
partitions, else member ``m`` reads partition ``m % partitions``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tidelog.broker.group.consumer.heartbeat import HeartbeatResult
from tidelog.broker.group.consumer.model import Partitions

__all__ = ("HeartbeatResult", "ShareGroup", "ShareGroups", "ShareMember")

#: topic id -> partitions (the consumer groups' type: ShareGroupHeartbeat's answer has the
#: same shape as ConsumerGroupHeartbeat's)
Assignment = Partitions


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    subscribed: tuple[str, ...]
    rack_id: str | None
    client_id: str
    client_host: str
    assignment: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    #: (name, topic id, partitions) of the subscribed topics when the epoch last moved.
    metadata: tuple[tuple[str, uuid.UUID, int], ...] = ()

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}


@dataclass(frozen=True, slots=True)
class GroupHost:
    """What membership needs from the broker (the clock and timers are the coordinator's)."""

    now_ms: Callable[[], int]
    schedule: Callable[[str, int, Callable[[], None]], None]
    cancel: Callable[[str], None]
    #: name -> (topic id, partition count) of the non-internal topics
    topics: Callable[[], Mapping[str, tuple[uuid.UUID, int]]]
    #: (share.session.timeout.ms, share.heartbeat.interval.ms) of a group
    timeouts: Callable[[str], tuple[int, int]]
    max_size: int
    #: a group id used by a classic or consumer group (not a share group)
    other_group_type: Callable[[str], str | None]
    #: called with (group id, topic id, partition) for each subscribed partition whose share
    #: state is not initialized yet (the coordinator initializes it and then calls
    #: ``ShareGroups.partitions_initialized``) and (group id, member id) when a member leaves
    on_assigned: Callable[[str, uuid.UUID, int], None]
    on_member_gone: Callable[[str, str], None]
    #: whether the share state of (group id, topic id, partition) is initialized
    initialized: Callable[[str, uuid.UUID, int], bool] = lambda _g, _t, _p: True


class ShareGroups:
    def __init__(self, host: GroupHost) -> None:
        self.host = host
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed: tuple[str, ...] | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatResult:
        if not group_id:
            return HeartbeatResult(ErrorCode.invalid_request, "GroupId can't be empty.")
        if not member_id:
            return HeartbeatResult(ErrorCode.invalid_request, "MemberId can't be empty.")
        if member_epoch < -1:
            return HeartbeatResult(ErrorCode.invalid_request, "MemberEpoch is invalid.")
        if member_epoch == 0 and not subscribed:
            return HeartbeatResult(
                ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
            )
        other = self.host.other_group_type(group_id)
        if other is not None:
            return HeartbeatResult(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
            )
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if member_epoch != 0 and group is None:  # as Kafka: only a join creates the group
            return HeartbeatResult(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        if member_epoch == -1:
            if group is None or member is None:
                return HeartbeatResult(
                    ErrorCode.unknown_member_id, f"Member {member_id} is not a member."
                )
            self.remove_member(group, member_id)
            return HeartbeatResult(ErrorCode.none, None, member_id, -1)
        if member_epoch > 0:
            if group is None or member is None:
                return HeartbeatResult(
                    ErrorCode.unknown_member_id, f"Member {member_id} is not a member."
                )
            if member_epoch != member.member_epoch:
                return HeartbeatResult(
                    ErrorCode.fenced_member_epoch,
                    f"The share group member has a stale member epoch ({member_epoch}); "
                    f"expected {member.member_epoch}.",
                )
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        joined = member is None
        if member is None:
            if len(group.members) >= self.host.max_size:
                return HeartbeatResult(
                    ErrorCode.group_max_size_reached,
                    f"The share group has reached its maximum capacity of "
                    f"{self.host.max_size} members.",
                )
            member = ShareMember(member_id, 0, subscribed or (), rack_id, client_id, client_host)
            group.members[member_id] = member
            group.group_epoch += 1
        else:
            if subscribed is not None and tuple(sorted(subscribed)) != tuple(
                sorted(member.subscribed)
            ):
                member.subscribed = subscribed
                group.group_epoch += 1
            if rack_id is not None:
                member.rack_id = rack_id
        metadata = self._metadata(group)
        if metadata != group.metadata:
            group.metadata = metadata
            if not joined:
                group.group_epoch += 1
        if group.assignment_epoch != group.group_epoch:
            self._assign(group)
        send = None
        if joined or member.member_epoch != group.assignment_epoch or member_epoch == 0:
            member.member_epoch = group.assignment_epoch
            send = dict(member.assignment)
        session_ms, interval_ms = self.host.timeouts(group_id)
        self.host.schedule(
            _timer_key(group_id, member_id), session_ms, self._expire(group_id, member_id)
        )
        return HeartbeatResult(
            ErrorCode.none, None, member_id, member.member_epoch, interval_ms, send
        )

    def remove_member(self, group: ShareGroup, member_id: str) -> None:
        if group.members.pop(member_id, None) is None:
            return
        self.host.cancel(_timer_key(group.group_id, member_id))
        group.group_epoch += 1
        group.metadata = self._metadata(group)
        self._assign(group)
        self.host.on_member_gone(group.group_id, member_id)

    def partitions_initialized(self, group_id: str) -> None:
        """Share state was initialized for partitions of the group: as Kafka (the
        ShareGroupStatePartitionMetadata record), the group epoch moves and the assignment takes
        them in; members get it at their next heartbeat."""
        group = self.groups.get(group_id)
        if group is None:
            return
        group.group_epoch += 1
        self._assign(group)

    def _expire(self, group_id: str, member_id: str) -> Callable[[], None]:
        def fire() -> None:
            group = self.groups.get(group_id)
            if group is not None:
                self.remove_member(group, member_id)

        return fire

    def _metadata(self, group: ShareGroup) -> tuple[tuple[str, uuid.UUID, int], ...]:
        topics = self.host.topics()
        return tuple(
            (name, topics[name][0], topics[name][1])
            for name in sorted(group.subscribed_topics())
            if name in topics
        )

    def _assign(self, group: ShareGroup) -> None:
        # Kafka divergence: Kafka's simple assignor hashes member ids onto partitions and keeps
        # earlier assignments sticky; this spread is deterministic from the sorted member ids
        # (the same coverage: every partition read, several members per partition when
        # members outnumber partitions).
        for member in group.members.values():
            member.assignment = {}
        for name, topic_id, count in group.metadata:
            readers = sorted(m for m, member in group.members.items() if name in member.subscribed)
            if not readers or count <= 0:
                continue
            # As Kafka: only partitions whose share state is initialized are assigned; the
            # others are initialized first (members joining together then share the first
            # assignment instead of the first one taking every partition).
            ready = []
            for p in range(count):
                if self.host.initialized(group.group_id, topic_id, p):
                    ready.append(p)
                else:
                    self.host.on_assigned(group.group_id, topic_id, p)
            if not ready:
                continue
            given: dict[str, list[int]] = {m: [] for m in readers}
            if len(readers) <= len(ready):
                for i, p in enumerate(ready):
                    given[readers[i % len(readers)]].append(p)
            else:
                for i, m in enumerate(readers):
                    given[m].append(ready[i % len(ready)])
            for m, parts in given.items():
                if parts:
                    group.members[m].assignment[topic_id] = frozenset(parts)
        group.assignment_epoch = group.group_epoch

    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        return ErrorCode.none


def _timer_key(group_id: str, member_id: str) -> str:
    return f"share-heartbeat:{group_id}:{member_id}"
