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

State only by replay, as Kafka keeps share groups in ``__consumer_offsets``: a heartbeat (or a
session expiry, a deletion) works on a copy of the group, and what changed is written as
Kafka's share-group records (``broker/share/records.py``: group epoch and metadata hash, member
subscriptions, target assignment epoch and members, current member assignments with their
epochs; tombstones for members gone and groups deleted) through the group coordinator's
runtime, which replays them into ``groups`` (``replay``) as it appends them; the answer waits
until they are durable. The load at start-up replays the same records with the same function,
then ``loaded`` gives each member a fresh session timeout. A write that fails changes nothing.

Kafka divergence: the records are replayed when appended, not into a timeline that a failed
write reverts; a write that times out keeps its change (the record is in the log).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import uuid
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import CoordinatorLogError, KeyValue
from tidelog.broker.group.consumer.heartbeat import HeartbeatResult
from tidelog.broker.group.consumer.model import Partitions
from tidelog.broker.share import records as rec
from tidelog.protocol.internal_topics.consumer_offsets import SchemaError

__all__ = ("HeartbeatResult", "ShareGroup", "ShareGroups", "ShareMember")

log = logging.getLogger("tidelog.share")

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
    #: The hash of the subscribed topics' metadata when the epoch last moved
    #: (``records.metadata_hash``; a change bumps the epoch).
    metadata_hash: int = 0

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
    #: appends records to the group's ``__consumer_offsets`` partition now and replays them
    #: (``ShareGroups.replay``); raises ``CoordinatorLogError`` when the append fails (nothing
    #: replayed); the awaitable resolves once they are durable
    write: Callable[[str, Sequence[KeyValue]], Awaitable[None]]
    #: whether the share state of (group id, topic id, partition) is initialized
    initialized: Callable[[str, uuid.UUID, int], bool] = lambda _g, _t, _p: True


class _Nothing:
    """An awaitable done already (a change that writes no record)."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # noqa: V201 (vulture) a generator that ends at once


_NOTHING = _Nothing()


def _records(group_id: str, group: ShareGroup | None) -> dict[bytes, bytes | None]:
    """The records that store ``group`` (None: no records)."""
    if group is None:
        return {}
    state = rec.GroupState(
        group.group_epoch,
        group.metadata_hash,
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


class ShareGroups:
    def __init__(self, host: GroupHost) -> None:
        self.host = host
        self.groups: dict[str, ShareGroup] = {}
        self._writes: set[asyncio.Future[None]] = set()
        #: partitions to initialize once the heartbeat that found them is answered (None: now)
        self._to_initialize: list[tuple[str, uuid.UUID, int]] | None = None

    def owns(self, group_id: str) -> bool:
        return group_id in self.groups

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
        """ShareGroupHeartbeat on a copy of the group; answered once what changed is written
        (replayed into the group) and durable."""
        scratch = self._scratch(group_id)
        self._to_initialize = []
        try:
            result = self._heartbeat(
                scratch,
                group_id,
                member_id,
                member_epoch,
                rack_id,
                subscribed,
                client_id,
                client_host,
            )
        finally:
            to_initialize, self._to_initialize = self._to_initialize, None
        try:
            await self._write(group_id, scratch.get(group_id))
        except CoordinatorLogError as exc:
            log.warning("share group %s: writing its state failed: %s", group_id, exc)
            return HeartbeatResult(ErrorCode.coordinator_not_available, str(exc))
        # As Kafka: the share state of newly subscribed partitions is initialized after the
        # heartbeat is answered; members get those partitions at a later heartbeat (members
        # joining together then share the first assignment).
        for key in to_initialize:
            self.host.on_assigned(*key)
        return result

    def _scratch(self, group_id: str) -> dict[str, ShareGroup]:
        """A copy of the group to work on: only the records of what changed change it."""
        group = self.groups.get(group_id)
        return {} if group is None else {group_id: copy.deepcopy(group)}

    def _write(self, group_id: str, changed: ShareGroup | None) -> Awaitable[None]:
        """Write the records that turn the group into ``changed`` (None: deleted); they are
        replayed into ``groups`` as they are appended (raises ``CoordinatorLogError``)."""
        writes = rec.diff(
            _records(group_id, self.groups.get(group_id)), _records(group_id, changed)
        )
        if not writes:
            return _NOTHING
        return self.host.write(group_id, writes)

    def _write_background(self, group_id: str, changed: ShareGroup | None) -> bool:
        try:
            waiter = self._write(group_id, changed)
        except CoordinatorLogError as exc:
            log.warning("share group %s: writing its state failed: %s", group_id, exc)
            return False
        task = asyncio.ensure_future(waiter)
        self._writes.add(task)
        task.add_done_callback(self._write_done)
        return True

    def _write_done(self, task: asyncio.Future[None]) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("share group state write failed: %s", task.exception())

    # ------------------------------------------------------------------ replay
    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one share-group record of ``__consumer_offsets`` (as written, and at load)."""
        try:
            self._apply(rec.decode_key(key), value)
        except (SchemaError, ValueError, UnicodeDecodeError) as exc:
            log.warning("skipping a share group record that does not parse: %s", exc)

    def _apply(self, key: rec.ShareKey, value: bytes | None) -> None:
        group_id, member_id = key.group_id, key.member_id or ""
        if value is None:
            group = self.groups.get(group_id)
            if key.version == rec.METADATA_KEY:
                self.groups.pop(group_id, None)
            elif key.version == rec.MEMBER_METADATA_KEY and group is not None:
                group.members.pop(member_id, None)
            return
        # Any record of a group makes it (a compacted log may hold its records in any order).
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        if key.version == rec.METADATA_KEY:
            group.group_epoch, group.metadata_hash = rec.decode_group_metadata(value)
            return
        if key.version == rec.TARGET_ASSIGNMENT_METADATA_KEY:
            group.assignment_epoch = rec.decode_epoch(value)
            return
        member = group.members.get(member_id)
        if member is None:
            member = group.members[member_id] = ShareMember(member_id, 0, (), None, "", "")
        if key.version == rec.MEMBER_METADATA_KEY:
            v = rec.decode_member_metadata(value)
            member.rack_id, member.client_id, member.client_host = v.rack_id, v.client_id, v.host
            member.subscribed = v.subscribed
        elif key.version == rec.CURRENT_MEMBER_ASSIGNMENT_KEY:
            c = rec.decode_current_assignment(value)
            member.member_epoch, member.previous_member_epoch = c.epoch, c.previous_epoch
            member.assignment = dict(c.assignment)
        # TARGET_ASSIGNMENT_MEMBER_KEY: a share member's target is its current assignment.

    def loaded(self) -> None:
        """The load is over: each member gets a session timeout to heartbeat again."""
        for group_id, group in self.groups.items():
            session_ms, _ = self.host.timeouts(group_id)
            for member_id in group.members:
                self.host.schedule(
                    _timer_key(group_id, member_id), session_ms, self._expire(group_id, member_id)
                )

    def _heartbeat(
        self,
        groups: dict[str, ShareGroup],
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
        group = groups.get(group_id)
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
            group = groups[group_id] = ShareGroup(group_id)
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
        metadata_hash = rec.metadata_hash(metadata)
        if metadata_hash != group.metadata_hash:
            group.metadata_hash = metadata_hash
            if not joined:
                group.group_epoch += 1
        if group.assignment_epoch != group.group_epoch:
            self._assign(group, metadata)
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
        metadata = self._metadata(group)
        group.metadata_hash = rec.metadata_hash(metadata)
        self._assign(group, metadata)
        self.host.on_member_gone(group.group_id, member_id)

    def partitions_initialized(self, group_id: str) -> None:
        """Share state was initialized for partitions of the group: as Kafka (the
        ShareGroupStatePartitionMetadata record), the group epoch moves and the assignment takes
        them in; members get it at their next heartbeat."""
        scratch = self._scratch(group_id)
        group = scratch.get(group_id)
        if group is None:
            return
        group.group_epoch += 1
        metadata = self._metadata(group)
        group.metadata_hash = rec.metadata_hash(metadata)
        self._assign(group, metadata)
        self._write_background(group_id, group)

    def _expire(self, group_id: str, member_id: str) -> Callable[[], None]:
        def fire() -> None:
            scratch = self._scratch(group_id)
            group = scratch.get(group_id)
            if group is not None:
                self.remove_member(group, member_id)
                self._write_background(group_id, group)

        return fire

    def _metadata(self, group: ShareGroup) -> tuple[tuple[str, uuid.UUID, int], ...]:
        topics = self.host.topics()
        return tuple(
            (name, topics[name][0], topics[name][1])
            for name in sorted(group.subscribed_topics())
            if name in topics
        )

    def _assign(self, group: ShareGroup, metadata: tuple[tuple[str, uuid.UUID, int], ...]) -> None:
        # Kafka divergence: Kafka's simple assignor hashes member ids onto partitions and keeps
        # earlier assignments sticky; this spread is deterministic from the sorted member ids
        # (the same coverage: every partition read, several members per partition when
        # members outnumber partitions).
        for member in group.members.values():
            member.assignment = {}
        for name, topic_id, count in metadata:
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
                elif self._to_initialize is not None:
                    self._to_initialize.append((group.group_id, topic_id, p))
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
        if not self._write_background(group_id, None):  # its tombstones' replay drops it
            return ErrorCode.coordinator_not_available
        return ErrorCode.none


def _timer_key(group_id: str, member_id: str) -> str:
    return f"share-heartbeat:{group_id}:{member_id}"
