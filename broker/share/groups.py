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

Persistence (as Kafka keeps share groups in ``__consumer_offsets``): every change of a group is
written as Kafka's share-group records (``broker/share/records.py``: group epoch and metadata
hash, member subscriptions, target assignment epoch and members, current member assignments
with their epochs; tombstones for members gone and groups deleted) before a heartbeat is
answered; the group coordinator's load replays them (``replay``, then ``loaded``), so a restart
keeps groups, members and member epochs, and members get a fresh session timeout.

Kafka divergence: the heartbeat changes memory first and then writes what changed (Kafka
replays its records into memory); a write that fails answers an error but keeps the change.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import CoordinatorLogError, KeyValue
from tidelog.broker.group.consumer.heartbeat import HeartbeatResult
from tidelog.broker.group.consumer.model import Partitions
from tidelog.broker.share import records as rec
from tidelog.protocol.internal_topics.consumer_offsets import SchemaError

log = logging.getLogger("tidelog.share")

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
    previous_member_epoch: int = 0


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
    #: called with (group id, topic id, partition) for each partition assigned (first use
    #: initializes the share partition) and (group id, member id) when a member leaves
    on_assigned: Callable[[str, uuid.UUID, int], None]
    on_member_gone: Callable[[str, str], None]
    #: appends records to the group's ``__consumer_offsets`` partition now (raises
    #: ``CoordinatorLogError``); the awaitable resolves once they are durable
    write: Callable[[str, Sequence[KeyValue]], Awaitable[None]]


class ShareGroups:
    def __init__(self, host: GroupHost) -> None:
        self.host = host
        self.groups: dict[str, ShareGroup] = {}
        #: the records read by the group coordinator's load, until ``loaded``
        self._loading: dict[str, rec.LoadedGroup] = {}
        self._writes: set[asyncio.Future[None]] = set()

    async def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed: tuple[str, ...] | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatResult:
        """ShareGroupHeartbeat; answered once what changed is durable."""
        before = self._stored(group_id)
        result = self._heartbeat(
            group_id, member_id, member_epoch, rack_id, subscribed, client_id, client_host
        )
        writes = rec.diff(before, self._stored(group_id))
        if writes:
            try:
                await self.host.write(group_id, writes)
            except CoordinatorLogError as exc:
                log.warning("share group %s: writing its state failed: %s", group_id, exc)
                return HeartbeatResult(ErrorCode.coordinator_not_available, str(exc))
        return result

    def _stored(self, group_id: str) -> dict[bytes, bytes | None]:
        group = self.groups.get(group_id)
        if group is None:
            return {}
        state = rec.GroupState(
            group.group_epoch,
            rec.metadata_hash(group.metadata),
            group.assignment_epoch,
            {
                m.member_id: rec.MemberState(
                    m.member_epoch,
                    m.previous_member_epoch,
                    m.rack_id,
                    m.client_id,
                    m.client_host,
                    tuple(m.subscribed),
                    m.assignment,
                )
                for m in group.members.values()
            },
        )
        return rec.group_records(group_id, state)

    def _write_background(self, group_id: str, writes: list[KeyValue]) -> None:
        if not writes:
            return
        try:
            waiter = self.host.write(group_id, writes)
        except CoordinatorLogError as exc:
            log.warning("share group %s: writing its state failed: %s", group_id, exc)
            return
        task = asyncio.ensure_future(waiter)
        self._writes.add(task)
        task.add_done_callback(self._write_done)

    def _write_done(self, task: asyncio.Future[None]) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("share group state write failed: %s", task.exception())

    # ------------------------------------------------------------------ load
    def replay(self, key: bytes, value: bytes | None) -> None:
        """One share-group record of ``__consumer_offsets``, at load."""
        try:
            rec.replay(self._loading, rec.decode_key(key), value)
        except (SchemaError, ValueError, UnicodeDecodeError) as exc:
            log.warning("skipping a share group record that does not parse: %s", exc)

    def loaded(self) -> None:
        """The load is over: the groups come back with their members and epochs, and each
        member gets a session timeout to heartbeat again."""
        loading, self._loading = self._loading, {}
        for group_id, lg in loading.items():
            if not lg.has_metadata:
                continue
            group = ShareGroup(group_id, lg.group_epoch, lg.assignment_epoch)
            for member_id, lm in (lg.members or {}).items():
                if not lm.has_metadata:
                    continue
                group.members[member_id] = ShareMember(
                    member_id,
                    lm.member_epoch,
                    lm.subscribed,
                    lm.rack_id,
                    lm.client_id,
                    lm.client_host,
                    dict(lm.assignment or {}),
                    lm.previous_member_epoch,
                )
            metadata = self._metadata(group)
            # The metadata the epoch was computed for, when the topics did not change since
            # (else the next heartbeat bumps the epoch, as Kafka's metadata hash check does).
            group.metadata = metadata if rec.metadata_hash(metadata) == lg.metadata_hash else ()
            self.groups[group_id] = group
            session_ms, _ = self.host.timeouts(group_id)
            for member_id in group.members:
                self.host.schedule(
                    _timer_key(group_id, member_id), session_ms, self._expire(group_id, member_id)
                )

    def _heartbeat(
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
            if member.member_epoch != group.assignment_epoch:
                member.previous_member_epoch = member.member_epoch
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

    def _expire(self, group_id: str, member_id: str) -> Callable[[], None]:
        def fire() -> None:
            group = self.groups.get(group_id)
            if group is not None:
                before = self._stored(group_id)
                self.remove_member(group, member_id)
                self._write_background(group_id, rec.diff(before, self._stored(group_id)))

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
            given: dict[str, list[int]] = {m: [] for m in readers}
            if len(readers) <= count:
                for p in range(count):
                    given[readers[p % len(readers)]].append(p)
            else:
                for i, m in enumerate(readers):
                    given[m].append(i % count)
            for m, parts in given.items():
                if parts:
                    group.members[m].assignment[topic_id] = frozenset(parts)
            for p in range(count):
                self.host.on_assigned(group.group_id, topic_id, p)
        group.assignment_epoch = group.group_epoch

    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        before = self._stored(group_id)
        del self.groups[group_id]
        self._write_background(group_id, rec.diff(before, {}))
        return ErrorCode.none


def _timer_key(group_id: str, member_id: str) -> str:
    return f"share-heartbeat:{group_id}:{member_id}"
