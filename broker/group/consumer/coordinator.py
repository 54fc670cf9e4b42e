"""The consumer-group protocol of KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe, and
the offset-commit rules of consumer groups, beside the classic group coordinator.

A heartbeat (Kafka's GroupMetadataManager.consumerGroupHeartbeat, simplified):

1. checks the request (group id; on join, member epoch 0: a rebalance timeout, a subscription
   and no owned partitions), the group's type (a non-empty classic group of that id answers
   GROUP_ID_NOT_FOUND "Group X is not a consumer group."; an empty one is taken over - the
   online upgrade of an empty classic group - and the way back happens when a classic member
   joins an empty consumer group), and the member: unknown ids UNKNOWN_MEMBER_ID; an epoch
   above the member's, or below it unless it is the previous epoch with owned partitions all
   still assigned (a lost answer), FENCED_MEMBER_EPOCH;
2. epoch -1 leaves (the member is removed, its partitions freed); -2 is a static member's
   temporary leave (it stays, epoch -2, until its session times out or its instance id joins
   again and takes its assignment over with a new member id);
3. updates the member's subscription; a new member, a changed subscription or changed
   subscribed-topic metadata (partition counts, topics created) bumps the group epoch;
4. when the group epoch is above the assignment epoch, the target assignment is computed by
   the member's ``server_assignor`` or the first of ``group.consumer.assignors`` (``uniform``,
   ``range``) over the names and the ``subscribed_topic_regex`` matches (Python ``re``,
   internal topics excluded);
5. reconciles the member (``model.reconcile``): revocation before reassignment;
6. writes the records of what changed (``records``: group epoch, subscribed topic metadata,
   member metadata, target assignment, current member assignment, tombstones for removed
   members) to the group's ``__consumer_offsets`` partition and answers once they are covered
   by the high watermark, with the member epoch, ``heartbeat_interval_ms`` and - when it
   changed or the member joined - the assigned partitions (never those pending revocation).

A member that sends no heartbeat for the group's ``consumer.session.timeout.ms`` (group config,
else ``group.consumer.session.timeout.ms``) is fenced: removed, the group epoch bumped. A member
that keeps partitions it must revoke past its rebalance timeout is fenced likewise.

OffsetCommit v9+ of a consumer group: an empty member id with epoch -1 commits while the group
is empty (admin, manual assignment); else the member must exist (UNKNOWN_MEMBER_ID) and the
epoch be its current one (STALE_MEMBER_EPOCH); versions before 9 UNSUPPORTED_VERSION. OffsetFetch
v9+ checks the same when it names a member.

Start-up: the records are replayed from ``__consumer_offsets`` (``replay`` per record, then
``loaded``): groups, members, epochs, targets and assignments come back; session timers start
afresh.

State only by replay: a heartbeat (a fencing, a deletion) works on a copy of the group, and
the records it makes are replayed into the group (``replay``, Kafka's records through
``state_records.apply_record``) as the coordinator runtime appends them; the load replays the
same records with the same function. A write that fails changes nothing.

Kafka divergence: no mixed groups (classic members in a consumer group), the upgrade and
downgrade convert empty groups only; the regular expression is Python's, resolved at each
heartbeat; the records are replayed when appended, not into a timeline a failed write reverts
(a write that times out keeps its change: the record is in the log).
"""

from __future__ import annotations

import copy
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import replace

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import CoordinatorLogError, KeyValue
from tidelog.broker.group import modern
from tidelog.broker.group.consumer import records as rec
from tidelog.broker.group.consumer.assignors import AssignmentSpec, assign
from tidelog.broker.group.consumer.heartbeat import HeartbeatRequest, HeartbeatResult, Host
from tidelog.broker.group.consumer.model import (
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerMember,
    Partitions,
    reconcile,
)
from tidelog.broker.group.consumer.state_records import (
    apply_record,
    current_assignment_record,
    epoch_record,
    member_metadata_record,
    partition_metadata_record,
    target_member_record,
    tombstone,
)
from tidelog.broker.group.results import Refused
from tidelog.protocol.internal_topics.consumer_offsets import SchemaError

log = logging.getLogger("tidelog.group.consumer")

__all__ = ["ConsumerGroups"]


class ConsumerGroups:
    """Consumer groups of this coordinator (see the module docstring)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.groups: dict[str, ConsumerGroup] = {}
        self.timers = modern.MemberTimers("cg", host.runtime)

    # ------------------------------------------------------------------ queries
    def owns(self, group_id: str) -> bool:
        return group_id in self.groups

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # ------------------------------------------------------------------ heartbeat
    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        error = self.host.runtime.inactive_error()
        if error is not None:
            return HeartbeatResult(error, member_id=req.member_id or None)
        original = self._scratch(req.group_id)
        try:
            result, writes = self._heartbeat(req)
        except Refused as exc:
            return HeartbeatResult(exc.error, exc.message, req.member_id or None)
        finally:
            self._restore(req.group_id, original)
        if writes:
            # Replayed into the group as appended: the one way its state changes.
            try:
                await self.host.runtime.write(req.group_id, writes)
            except CoordinatorLogError as exc:
                return HeartbeatResult(exc.error, str(exc) or None, result.member_id)
        return result

    def _scratch(self, group_id: str) -> ConsumerGroup | None:
        """Put a copy of the group in its place for a request to work on; returns the group.
        Only the replay of the records the request makes changes the group itself."""
        original = self.groups.get(group_id)
        if original is not None:
            self.groups[group_id] = copy.deepcopy(original)
        return original

    def _restore(self, group_id: str, original: ConsumerGroup | None) -> None:
        if original is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = original

    def _validate(self, req: HeartbeatRequest) -> None:
        modern.check_heartbeat(
            req.group_id,
            req.member_id,
            req.instance_id,
            req.member_epoch,
            req.rebalance_timeout_ms,
            member_id_always=False,
        )
        if req.member_epoch == 0:
            if req.owned is None or any(req.owned.values()):
                raise Refused(
                    ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."
                )
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise Refused(
                    ErrorCode.invalid_request,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        if req.server_assignor is not None and req.server_assignor not in self.host.assignors:
            raise Refused(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                + ", ".join(self.host.assignors)
                + ".",
            )
        if req.subscribed_topic_regex is not None:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as exc:
                raise Refused(
                    ErrorCode.invalid_regular_expression,
                    f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid "
                    f"regular expression: {exc}.",
                ) from None

    def _group_for(self, req: HeartbeatRequest, writes: list[KeyValue]) -> ConsumerGroup:
        group = self.groups.get(req.group_id)
        if group is not None:
            return group
        busy = self.host.classic_group_busy(req.group_id)
        if busy or req.member_epoch != 0:
            raise Refused(
                ErrorCode.group_id_not_found,
                modern.group_not_found(req.group_id, "consumer", bool(busy)),
            )
        if busy is False:
            self.host.drop_classic_group(req.group_id)  # online upgrade of an empty classic group
            log.info("empty classic group %s converted to a consumer group", req.group_id)
        group = ConsumerGroup(req.group_id)
        self.groups[req.group_id] = group
        return group

    def _heartbeat(self, req: HeartbeatRequest) -> tuple[HeartbeatResult, list[KeyValue]]:
        self._validate(req)
        writes: list[KeyValue] = []
        group = self._group_for(req, writes)
        session_ms, interval_ms = self.host.timeouts(group.group_id)
        if req.member_epoch in (
            modern.LEAVE_GROUP_MEMBER_EPOCH,
            modern.LEAVE_GROUP_STATIC_MEMBER_EPOCH,
        ):
            return self._leave(group, req, writes), writes
        joining = req.member_epoch == 0
        member = self._member_for(group, req, writes)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms
                if req.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            subscribed_topic_names=(
                tuple(sorted(set(req.subscribed_topic_names)))
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (req.subscribed_topic_regex or None)
                if req.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            server_assignor=(
                req.server_assignor if req.server_assignor is not None else member.server_assignor
            ),
        )
        bump = False
        if (
            member.member_id not in group.members
            or updated.subscription_key() != member.subscription_key()
        ):
            writes.append(member_metadata_record(group.group_id, updated))
            bump = True
        group.members[updated.member_id] = updated
        metadata = self._subscribed_metadata(group)
        if metadata != group.subscribed_metadata:
            group.subscribed_metadata = metadata
            writes.append(partition_metadata_record(group))
            bump = True
        if bump:
            group.group_epoch += 1
            writes.append(epoch_record(rec.METADATA_KEY, group.group_id, group.group_epoch))
        if group.group_epoch > group.assignment_epoch:
            writes.extend(self._compute_target(group, updated))
        before = group.members[updated.member_id]
        epochs = group.partition_epochs()
        after = reconcile(
            before,
            group.target.get(before.member_id, {}),
            group.assignment_epoch,
            req.owned,
            lambda tid, p: epochs.get((tid, p), -1),
        )
        if after != before or joining:
            group.members[after.member_id] = after
            writes.append(current_assignment_record(group.group_id, after))
        self._schedule_session(group.group_id, after.member_id, session_ms)
        self._schedule_rebalance(group.group_id, after)
        send_assignment = (
            joining
            or after.assigned != before.assigned
            or (req.owned is not None and _flat(req.owned) != _flat(after.assigned))
        )
        return (
            HeartbeatResult(
                ErrorCode.none,
                None,
                after.member_id,
                after.member_epoch,
                interval_ms,
                after.assigned if send_assignment else None,
            ),
            writes,
        )

    def _member_for(
        self, group: ConsumerGroup, req: HeartbeatRequest, writes: list[KeyValue]
    ) -> ConsumerMember:
        if req.member_epoch == 0:
            if req.instance_id is not None:
                existing = group.static_member(req.instance_id)
                if existing is not None:
                    if existing.member_epoch != modern.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        raise Refused(
                            ErrorCode.unreleased_instance_id,
                            f"Static member {existing.member_id} with instance id "
                            f"{req.instance_id} is not released yet.",
                        )
                    return self._replace_static(group, existing, req, writes)
            member_id = req.member_id or uuid.uuid4().hex
            existing = group.members.get(member_id)
            if existing is not None:
                # A member rejoining with its id (v1 clients keep it): start afresh.
                return replace(
                    existing, member_epoch=0, state=0, assigned={}, pending_revocation={}
                )
            modern.check_capacity("consumer", len(group.members), self.host.max_size)
            return ConsumerMember(member_id=member_id)
        member = group.members.get(req.member_id)
        if member is None:
            raise Refused(
                ErrorCode.unknown_member_id,
                f"Member {req.member_id} is not a member of group {group.group_id}.",
            )
        owned = req.owned
        modern.check_member_epoch(
            "consumer",
            req.member_epoch,
            member.member_epoch,
            member.previous_member_epoch,
            lambda: owned is not None and _subset(owned, member.assigned),
        )
        return member

    def _replace_static(
        self,
        group: ConsumerGroup,
        old: ConsumerMember,
        req: HeartbeatRequest,
        writes: list[KeyValue],
    ) -> ConsumerMember:
        """A static member back within its session: a new member id takes its assignment."""
        new_id = req.member_id or uuid.uuid4().hex
        self._remove_member(group, old, writes, bump=False)
        target = group.target.pop(old.member_id, {})
        new = replace(
            old,
            member_id=new_id,
            member_epoch=group.assignment_epoch,
            previous_member_epoch=old.previous_member_epoch,
            state=0,
        )
        group.target[new_id] = target
        group.members[new_id] = new  # same subscription: no new group epoch
        writes.append(target_member_record(group.group_id, new_id, target))
        writes.append(member_metadata_record(group.group_id, new))
        return new

    def _leave(
        self, group: ConsumerGroup, req: HeartbeatRequest, writes: list[KeyValue]
    ) -> HeartbeatResult:
        member = group.members.get(req.member_id)
        if member is None and req.instance_id is not None:
            member = group.static_member(req.instance_id)
        if member is None:
            raise Refused(
                ErrorCode.unknown_member_id,
                f"Member {req.member_id} is not a member of group {group.group_id}.",
            )
        if req.member_epoch == modern.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            kept = replace(member, member_epoch=modern.LEAVE_GROUP_STATIC_MEMBER_EPOCH)
            group.members[member.member_id] = kept
            writes.append(current_assignment_record(group.group_id, kept))
            self.timers.cancel_rebalance(group.group_id, member.member_id)
            log.info("static member %s of group %s left for now", member.member_id, group.group_id)
        else:
            self._remove_member(group, member, writes, bump=True)
            log.info("member %s left group %s", member.member_id, group.group_id)
        return HeartbeatResult(ErrorCode.none, None, member.member_id, req.member_epoch, 0)

    def _remove_member(
        self, group: ConsumerGroup, member: ConsumerMember, writes: list[KeyValue], *, bump: bool
    ) -> None:
        gid, mid = group.group_id, member.member_id
        group.members.pop(mid, None)
        self.timers.cancel(gid, mid)
        writes.append(tombstone(rec.CURRENT_MEMBER_ASSIGNMENT_KEY, gid, mid))
        if mid in group.target:
            group.target.pop(mid)
            writes.append(tombstone(rec.TARGET_ASSIGNMENT_MEMBER_KEY, gid, mid))
        writes.append(tombstone(rec.MEMBER_METADATA_KEY, gid, mid))
        if bump:
            metadata = self._subscribed_metadata(group)
            if metadata != group.subscribed_metadata:
                group.subscribed_metadata = metadata
                writes.append(partition_metadata_record(group))
            group.group_epoch += 1
            writes.append(epoch_record(rec.METADATA_KEY, gid, group.group_epoch))

    # ------------------------------------------------------------------ timers
    def _schedule_session(self, group_id: str, member_id: str, session_ms: int) -> None:
        self.timers.schedule_session(
            group_id,
            member_id,
            session_ms,
            lambda: self._fence(group_id, member_id, "session timeout"),
        )

    def _schedule_rebalance(self, group_id: str, member: ConsumerMember) -> None:
        if member.state == UNREVOKED_PARTITIONS and member.rebalance_timeout_ms > 0:
            self.timers.schedule_rebalance(
                group_id,
                member.member_id,
                member.rebalance_timeout_ms,
                lambda: self._fence(group_id, member.member_id, "rebalance timeout"),
            )
        else:
            self.timers.cancel_rebalance(group_id, member.member_id)

    def _fence(self, group_id: str, member_id: str, why: str) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        writes: list[KeyValue] = []
        original = self._scratch(group_id)
        try:
            self._remove_member(self.groups[group_id], member, writes, bump=True)
        finally:
            self._restore(group_id, original)
        log.info("member %s of group %s fenced: %s", member_id, group_id, why)
        modern.write_in_background(
            self.host.runtime, group_id, writes, f"the removal of {member_id}", log
        )

    def start_timers(self) -> None:
        for group in self.groups.values():
            session_ms, _ = self.host.timeouts(group.group_id)
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id, session_ms)

    # ------------------------------------------------------------------ assignment
    def _subscribed_metadata(self, group: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        topics = self.host.topics()
        wanted: set[str] = set()
        for m in group.members.values():
            wanted.update(t for t in m.subscribed_topic_names if t in topics)
            if m.subscribed_topic_regex:
                pattern = re.compile(m.subscribed_topic_regex)
                wanted.update(t for t in topics if pattern.fullmatch(t))
        return {t: topics[t] for t in sorted(wanted)}

    def _member_topics(self, group: ConsumerGroup, member: ConsumerMember) -> frozenset[uuid.UUID]:
        names_ = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            pattern = re.compile(member.subscribed_topic_regex)
            names_.update(t for t in group.subscribed_metadata if pattern.fullmatch(t))
        return frozenset(
            group.subscribed_metadata[t][0] for t in names_ if t in group.subscribed_metadata
        )

    def _compute_target(self, group: ConsumerGroup, updated: ConsumerMember) -> list[KeyValue]:
        assignor = updated.server_assignor or next(
            (m.server_assignor for m in group.members.values() if m.server_assignor),
            self.host.assignors[0],
        )
        spec = AssignmentSpec(
            subscriptions={
                m.member_id: self._member_topics(group, m) for m in group.members.values()
            },
            topics={tid: (name, n) for name, (tid, n) in group.subscribed_metadata.items()},
            current=group.target,
        )
        new_target = assign(assignor, spec)
        writes: list[KeyValue] = []
        for member_id, parts in new_target.items():
            if group.target.get(member_id) != parts:
                writes.append(target_member_record(group.group_id, member_id, parts))
        group.target = dict(new_target)
        group.assignment_epoch = group.group_epoch
        writes.append(
            epoch_record(rec.TARGET_ASSIGNMENT_METADATA_KEY, group.group_id, group.assignment_epoch)
        )
        return writes

    # ------------------------------------------------------------------ replay
    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of ``__consumer_offsets``: as written (the runtime replays a
        write's records as it appends them) and at start-up."""
        try:
            apply_record(self.groups, rec.decode_key(key), value)
        except (SchemaError, ValueError) as exc:
            log.warning("skipping a consumer group record that does not parse: %s", exc)

    # ------------------------------------------------------------------ offsets
    def validate_offset_commit(
        self, group_id: str, member_id: str | None, member_epoch: int, api_version: int
    ) -> ErrorCode:
        group = self.groups[group_id]
        if member_epoch < 0 and not member_id and not group.members:
            return ErrorCode.none  # admin client, or a consumer assigning partitions itself
        if api_version < 9:
            return ErrorCode.unsupported_version
        return modern.offset_member_error(group.members, member_id, member_epoch)

    def validate_transactional_offset_commit(
        self, group_id: str, member_id: str, member_epoch: int
    ) -> ErrorCode:
        """TxnOffsetCommit of a consumer group (Kafka's ConsumerGroup.validateOffsetCommit
        with isTransactional): epoch -1 commits while the group is empty; a request naming
        neither member nor epoch is a producer outside the group and is accepted; else the
        member must exist (UNKNOWN_MEMBER_ID) at its current epoch. Another epoch answers
        ILLEGAL_GENERATION, as Kafka maps STALE_MEMBER_EPOCH for TxnOffsetCommit (a producer's
        API whose clients know the classic error; checked against Kafka 4.4 by
        tests/kafkaref's ``txn-offset-commit-cg-stale-epoch``)."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return ErrorCode.none
        if member_epoch == -1 and not member_id:
            return ErrorCode.none
        error = modern.offset_member_error(group.members, member_id, member_epoch)
        if error is ErrorCode.stale_member_epoch:
            return ErrorCode.illegal_generation
        return error

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or (member_epoch < 0 and not member_id):
            return ErrorCode.none
        return modern.offset_member_error(group.members, member_id, member_epoch)

    # ------------------------------------------------------------------ admin
    def drop_if_empty(self, group_id: str) -> bool:
        """Forget an empty consumer group (classic downgrade, DeleteGroups): tombstones."""
        group = self.groups.get(group_id)
        if group is None or group.members:
            return group is None
        # Their replay (the group metadata tombstone) forgets the group.
        writes: list[KeyValue] = [
            tombstone(v, group_id)
            for v in (
                rec.TARGET_ASSIGNMENT_METADATA_KEY,
                rec.PARTITION_METADATA_KEY,
                rec.METADATA_KEY,
            )
        ]
        modern.write_in_background(self.host.runtime, group_id, writes, "its deletion", log)
        return True

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        """OffsetDelete: a topic a member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC)."""
        group = self.groups.get(group_id)
        return group is not None and topic in self._subscribed_metadata(group)

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {tid: name for name, (tid, _n) in self.host.topics().items()}

    def describe(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def assignor_name(self, group: ConsumerGroup) -> str:
        for m in group.members.values():
            if m.server_assignor:
                return m.server_assignor
        return self.host.assignors[0]


def _flat(parts: Mapping[uuid.UUID, frozenset[int]]) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in parts.items() for p in ps}


def _subset(owned: Partitions, assigned: Partitions) -> bool:
    return _flat(owned) <= _flat(assigned)
