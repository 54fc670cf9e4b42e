"""The group coordinator: loading ``__consumer_offsets``, committed offsets, admin APIs.

Composed of parts, as Kafka's GroupCoordinator is of its GroupMetadataManager and friends:
``GroupMembership`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup; ``broker.group.membership``),
``Rebalancer`` (the rebalance phases; ``broker.group.rebalance``), ``OffsetStore`` (committed
offsets; ``broker.group.offsets``) and ``GroupMetadataLog`` (writes to ``__consumer_offsets``;
``broker.group.metadata_log``). This class wires them and adds the start-up replay,
OffsetCommit/OffsetFetch/OffsetDelete, ListGroups, DescribeGroups, DeleteGroups and the
periodic expiry of old offsets.

Start-up: ``start()`` reads every partition of ``__consumer_offsets`` from its log start to its
HW and replays the records (the last GroupMetadata value of a group wins, a null value deletes;
likewise per offset). Until it is done every API answers COORDINATOR_LOAD_IN_PROGRESS (Heartbeat
answers NONE, as Kafka does). A loaded group with members is Stable and its members get a
session timeout to show up again; one without members is Empty.

An offset commit is applied to memory right after its batch is appended (so memory follows log
order) and answered once the HW covers the batch (``offsets.commit.timeout.ms`` at most:
REQUEST_TIMED_OUT after that).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from tidelog.broker.group.config import GroupConfig
from tidelog.broker.group.consumer.records import CONSUMER_KEY_VERSIONS
from tidelog.broker.group.consumer.records import key_version as consumer_key_version
from tidelog.broker.group.log import CoordinatorLog, CoordinatorLogError
from tidelog.broker.group.membership import GroupMembership
from tidelog.broker.group.metadata_log import GroupMetadataLog
from tidelog.broker.group.offsets import (
    CommittedOffset,
    OffsetStore,
    group_tombstone,
    offset_commit_records,
    offset_tombstone,
)
from tidelog.broker.group.rebalance import Rebalancer, append_error
from tidelog.broker.group.results import (
    CommitPartition,
    DescribedGroup,
    DescribedMember,
    JoinGroupResult,
    ListedGroup,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionError,
    PartitionOffset,
    Protocol,
    SyncGroupResult,
    TopicOffsets,
)
from tidelog.broker.group.state import ClassicGroup, GroupState, Member
from tidelog.broker.group.timer import LoopTimer, Timer
from tidelog.protocol.internal_topics.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    SchemaError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)

__all__ = ("GroupCoordinator",)

log = logging.getLogger("tidelog.group")

_EXPIRE_KEY = "expire-offsets"
_LIVE = (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE)


class GroupCoordinator:
    """Kafka's GroupCoordinator, composed of parts: ``membership`` (JoinGroup, SyncGroup,
    Heartbeat, LeaveGroup), ``rebalancer`` (the rebalance phases), ``offsets`` (committed
    offsets) and ``metadata_log`` (writes to ``__consumer_offsets``, load status). The groups
    dict is shared by the parts. This class adds the start-up replay, OffsetCommit/OffsetFetch/
    OffsetDelete, ListGroups, DescribeGroups, DeleteGroups and offset expiration."""

    def __init__(
        self,
        config: GroupConfig,
        log_: CoordinatorLog,
        timer: Timer | None = None,
        *,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> None:
        self.config = config
        self.timer = timer if timer is not None else LoopTimer()
        self.metadata_log = GroupMetadataLog(config, log_, self.timer)
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        self.rebalancer = Rebalancer(self.groups, self.metadata_log)
        self.membership = GroupMembership(self.groups, self.metadata_log, self.rebalancer)
        # The membership requests, answered by their part (names the handlers call).
        self.join_group = self.membership.join_group
        self.sync_group = self.membership.sync_group
        self.heartbeat = self.membership.heartbeat
        self.leave_group = self.membership.leave_group
        #: OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION where this says no.
        self.partition_exists = partition_exists
        self._consumer_groups: Any = None

    @property
    def consumer_groups(self) -> Any:
        """KIP-848 consumer groups (broker/group/consumer), installed beside this coordinator
        (None until then); the membership part checks them on JoinGroup."""
        return self._consumer_groups

    @consumer_groups.setter
    def consumer_groups(self, value: Any) -> None:
        self._consumer_groups = value
        self.membership.consumer_groups = value

    @property
    def status(self) -> str:
        """ "loading" until the replay finished, then "active"; "stopped" after shutdown."""
        return self.metadata_log.status

    @status.setter
    def status(self, value: str) -> None:
        self.metadata_log.status = value

    def partition_for(self, group_id: str) -> int:
        return self.metadata_log.partition_for(group_id)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Create/open the partitions, replay them, then start answering."""
        self.status = "loading"
        await self.metadata_log.log.prepare()
        metadata: dict[str, GroupMetadataValue | None] = {}
        count = 0
        for partition in range(self.metadata_log.log.num_partitions):
            for record in await self.metadata_log.log.read_partition(partition):
                count += 1
                self._replay(record.key, record.value, metadata)
        self._finish_load(metadata)
        if self.consumer_groups is not None:
            for gid in list(self.groups):
                if self.consumer_groups.owns(gid) and self.groups[gid].is_empty:
                    del self.groups[gid]  # offsets of a consumer group, not a classic group
            self.consumer_groups.start_timers()
        self.status = "active"
        self._schedule_expiration()
        log.info("group coordinator loaded %d records: %d groups", count, len(self.groups))

    def begin_shutdown(self) -> None:
        """Stop answering and fail parked JoinGroup/SyncGroup requests with NOT_COORDINATOR
        (as Kafka does when it unloads a coordinator), so the broker's drain of in-flight
        requests does not wait for rebalances."""
        if self.status == "stopped":
            return
        self.status = "stopped"
        self.timer.cancel_all()
        for group in self.groups.values():
            for m in group.members.values():
                group.complete_join(m, JoinGroupResult(ErrorCode.not_coordinator, m.member_id))
                group.complete_sync(m, SyncGroupResult(ErrorCode.not_coordinator))

    async def stop(self) -> None:
        """``begin_shutdown``, then forget background HW waits (the records are already
        appended; storage shutdown flushes them)."""
        self.begin_shutdown()
        tasks = list(self.metadata_log.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _replay(
        self,
        key: bytes | None,
        value: bytes | None,
        metadata: dict[str, GroupMetadataValue | None],
    ) -> None:
        if key is None:
            return
        if self.consumer_groups is not None and consumer_key_version(key) in CONSUMER_KEY_VERSIONS:
            self.consumer_groups.replay(key, value)
            return
        try:
            k = decode_key(key)
            if isinstance(k, OffsetCommitKey):
                v = None if value is None else decode_offset_commit_value(value)
                self.offsets.replay(k, v)
            elif isinstance(k, GroupMetadataKey):
                metadata[k.group] = None if value is None else decode_group_metadata_value(value)
        except SchemaError as e:
            log.warning("skipping a __consumer_offsets record that does not parse: %s", e)

    def _finish_load(self, metadata: dict[str, GroupMetadataValue | None]) -> None:
        now = self.metadata_log.now()
        for group_id, value in metadata.items():
            if value is None:
                continue
            group = ClassicGroup(group_id, now)
            group.generation_id = value.generation
            group.protocol_type = value.protocol_type or None
            group.protocol_name = value.protocol
            group.leader_id = value.leader
            ts = value.current_state_timestamp
            group.state_timestamp_ms = ts if ts >= 0 else None
            for mm in value.members:
                member = Member(
                    mm.member_id,
                    mm.group_instance_id,
                    mm.client_id,
                    mm.client_host,
                    mm.rebalance_timeout,
                    mm.session_timeout,
                    value.protocol_type,
                    (Protocol(value.protocol or "", mm.subscription),),
                    mm.assignment,
                )
                group.add(member, None)
            group.leader_id = value.leader if value.leader in group.members else group.leader_id
            if group.members:
                group.state = GroupState.STABLE
                group.previous_state = GroupState.COMPLETING_REBALANCE
            group.subscribed_topics = group.compute_subscribed_topics()
            self.groups[group_id] = group
            for m in group.members.values():
                self.rebalancer.reschedule_heartbeat(group, m)
        for group_id in self.offsets.group_ids():
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, now)

    # ------------------------------------------------------------ OffsetCommit

    def _validate_offset_commit(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """Kafka's ClassicGroup.validateOffsetCommit."""
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_empty:
            return ErrorCode.none  # admin client or a consumer without group management
        if generation_id >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error is not ErrorCode.none:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
        elif not group.is_empty:
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        partitions: Sequence[CommitPartition],
        *,
        group_instance_id: str | None = None,
        retention_ms: int = -1,
        api_version: int = 8,
    ) -> list[PartitionError]:
        def all_(error: ErrorCode) -> list[PartitionError]:
            return [PartitionError(p.topic, p.partition, error) for p in partitions]

        error = self.metadata_log.inactive_error()
        if error is not None:
            return all_(error)
        if self.consumer_groups is not None and self.consumer_groups.owns(group_id):
            error = self.consumer_groups.validate_offset_commit(
                group_id, member_id, generation_id, api_version
            )
            if error is not ErrorCode.none:
                return all_(error)
            return await self._commit_accepted(group_id, partitions, retention_ms)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(
                    ErrorCode.group_id_not_found
                    if api_version >= 9
                    else ErrorCode.illegal_generation
                )
            group = ClassicGroup(
                group_id, self.metadata_log.now()
            )  # a "simple" group: commits only
            self.groups[group_id] = group
        error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id)
        if error is not ErrorCode.none:
            return all_(error)
        member = group.members.get(member_id)
        if member is not None and group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self.rebalancer.reschedule_heartbeat(group, member)
        return await self._commit_accepted(group_id, partitions, retention_ms)

    async def _commit_accepted(
        self, group_id: str, partitions: Sequence[CommitPartition], retention_ms: int
    ) -> list[PartitionError]:
        """Write the commits of a validated request (classic or consumer group)."""
        now = self.metadata_log.now()
        expire = now + retention_ms if retention_ms >= 0 else None
        errors: dict[tuple[str, int], ErrorCode] = {}
        accepted: list[CommitPartition] = []
        for p in partitions:
            if self.partition_exists is not None and not self.partition_exists(
                p.topic, p.partition
            ):
                errors[(p.topic, p.partition)] = ErrorCode.unknown_topic_or_partition
            elif p.metadata is not None and len(p.metadata) > self.config.offset_metadata_max_bytes:
                errors[(p.topic, p.partition)] = ErrorCode.offset_metadata_too_large
            else:
                accepted.append(p)
        if accepted:
            records = offset_commit_records(group_id, accepted, now, expire)
            write_error: ErrorCode | None
            try:
                waiter = self.metadata_log.write(group_id, records)
            except CoordinatorLogError as e:
                write_error = append_error(e.error)
            else:
                for p in accepted:
                    self.offsets.put(
                        group_id,
                        p.topic,
                        p.partition,
                        CommittedOffset.from_commit(p, now, expire),
                    )
                write_error = await self._await_hw(group_id, waiter)
            for p in accepted:
                errors[(p.topic, p.partition)] = write_error or ErrorCode.none
        return [
            PartitionError(p.topic, p.partition, errors[(p.topic, p.partition)]) for p in partitions
        ]

    async def _await_hw(self, group_id: str, waiter: Awaitable[None]) -> ErrorCode | None:
        try:
            await asyncio.wait_for(waiter, self.config.offsets_commit_timeout_ms / 1000)
        except TimeoutError:
            return ErrorCode.request_timed_out
        except CoordinatorLogError as e:
            return append_error(e.error)
        return None

    # ------------------------------------------------------------ OffsetFetch

    def fetch_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> OffsetFetchResult:
        """Committed offsets of the partitions asked for (-1 where none), or of every
        partition the group has offsets for when ``topics`` is None."""
        error = self.metadata_log.inactive_error()
        if error is not None:
            return OffsetFetchResult(error)
        group = self.groups.get(group_id)
        dead = group is None or group.is_in(GroupState.DEAD)
        if self.consumer_groups is not None and self.consumer_groups.owns(group_id):
            dead = False
        if topics is None:
            if dead:
                return OffsetFetchResult(ErrorCode.none)
            by_topic: dict[str, list[PartitionOffset]] = {}
            for (topic, partition), o in sorted(self.offsets.group(group_id).items()):
                by_topic.setdefault(topic, []).append(
                    PartitionOffset(partition, o.offset, o.leader_epoch, o.metadata)
                )
            return OffsetFetchResult(
                ErrorCode.none,
                tuple(TopicOffsets(t, tuple(ps)) for t, ps in by_topic.items()),
            )
        out: list[TopicOffsets] = []
        for topic, partitions in topics:
            parts: list[PartitionOffset] = []
            for partition in partitions:
                c = None if dead else self.offsets.get(group_id, topic, partition)
                if c is None:
                    parts.append(PartitionOffset(partition))
                else:
                    parts.append(PartitionOffset(partition, c.offset, c.leader_epoch, c.metadata))
            out.append(TopicOffsets(topic, tuple(parts)))
        return OffsetFetchResult(ErrorCode.none, tuple(out))

    # ------------------------------------------------------------ admin

    def list_groups(self, states_filter: Sequence[str] = ()) -> tuple[ErrorCode, list[ListedGroup]]:
        error = self.metadata_log.inactive_error()
        if error is not None:
            return error, []
        wanted = {s.strip().lower() for s in states_filter}
        listed = [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_in(GroupState.DEAD) and (not wanted or g.state.value.lower() in wanted)
        ]
        if self.consumer_groups is not None:
            listed += [
                ListedGroup(gid, "consumer", g.state, "consumer")
                for gid, g in self.consumer_groups.groups.items()
                if not wanted or g.state.lower() in wanted
            ]
        return ErrorCode.none, listed

    def describe_groups(self, group_ids: Sequence[str]) -> list[DescribedGroup]:
        error = self.metadata_log.inactive_error()
        if error is not None:
            return [DescribedGroup(gid, error, state="") for gid in group_ids]
        out: list[DescribedGroup] = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None:
                # No classic group of that id, a consumer group (KIP-848) included: Kafka 4
                # answers DescribeGroups v0-5 with state Dead and no error (only v6 says
                # GROUP_ID_NOT_FOUND, "Group <id> is not a classic group."); clients describe
                # a consumer group with ConsumerGroupDescribe.
                out.append(DescribedGroup(gid, ErrorCode.none))
                continue
            stable = group.is_in(GroupState.STABLE)
            members = tuple(
                DescribedMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(group.protocol_name) if stable else b"",
                    m.assignment,
                )
                for m in group.members.values()
            )
            out.append(
                DescribedGroup(
                    gid,
                    ErrorCode.none,
                    group.state.value,
                    group.protocol_type or "",
                    (group.protocol_name or "") if stable else "",
                    members,
                )
            )
        return out

    def _drop_group(self, group: ClassicGroup) -> None:
        """In memory: the group is Dead and forgotten, with its offsets and timers."""
        group.transition_to(GroupState.DEAD, self.metadata_log.now())
        for mid in list(group.members) + list(group.pending_join):
            self.timer.cancel(f"hb:{group.group_id}:{mid}")
        self.timer.cancel(f"join:{group.group_id}")
        self.timer.cancel(f"sync:{group.group_id}")
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        self.offsets.remove_group(group.group_id)

    async def delete_groups(self, group_ids: Sequence[str]) -> list[tuple[str, ErrorCode]]:
        error = self.metadata_log.inactive_error()
        if error is not None:
            return [(gid, error) for gid in group_ids]
        results: list[tuple[str, ErrorCode]] = []
        waits: list[tuple[int, str, Awaitable[None]]] = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if (
                group is None
                and self.consumer_groups is not None
                and self.consumer_groups.owns(gid)
            ):
                if self.consumer_groups.has_members(gid):
                    results.append((gid, ErrorCode.non_empty_group))
                    continue
                self.consumer_groups.drop_if_empty(gid)
                # deleted below like an empty group
                group = ClassicGroup(gid, self.metadata_log.now())
            if group is None or group.is_in(GroupState.DEAD):
                results.append((gid, ErrorCode.group_id_not_found))
                continue
            if not group.is_empty:
                results.append((gid, ErrorCode.non_empty_group))
                continue
            records = [offset_tombstone(gid, t, p) for (t, p) in self.offsets.group(gid)]
            records.append(group_tombstone(gid))
            try:
                waiter = self.metadata_log.write(gid, records)
            except CoordinatorLogError as e:
                results.append((gid, append_error(e.error)))
                continue
            self._drop_group(group)
            log.info("group %s deleted", gid)
            waits.append((len(results), gid, waiter))
            results.append((gid, ErrorCode.none))
        for index, gid, waiter in waits:
            write_error = await self._await_hw(gid, waiter)
            if write_error is not None:
                results[index] = (gid, write_error)
        return results

    async def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> OffsetDeleteResult:
        error = self.metadata_log.inactive_error()
        if error is not None:
            return OffsetDeleteResult(error)
        if not group_id:
            return OffsetDeleteResult(ErrorCode.invalid_group_id)
        group = self.groups.get(group_id)
        consumer = self.consumer_groups
        is_subscribed: Callable[[str], bool]
        if group is None and consumer is not None and consumer.owns(group_id):
            is_subscribed = lambda topic: bool(consumer.is_subscribed(group_id, topic))  # noqa: E731
        elif group is None or group.is_in(GroupState.DEAD):
            return OffsetDeleteResult(ErrorCode.group_id_not_found)
        elif group.is_in(*_LIVE) and not group.uses_consumer_protocol():
            return OffsetDeleteResult(ErrorCode.non_empty_group)
        else:
            is_subscribed = group.is_subscribed_to
        results: list[PartitionError] = []
        doomed: list[tuple[str, int]] = []
        for topic, partitions in topics:
            subscribed = is_subscribed(topic)
            for partition in partitions:
                if subscribed:
                    results.append(
                        PartitionError(topic, partition, ErrorCode.group_subscribed_to_topic)
                    )
                    continue
                results.append(PartitionError(topic, partition, ErrorCode.none))
                if self.offsets.get(group_id, topic, partition) is not None:
                    doomed.append((topic, partition))
        if doomed:
            try:
                tombstones = [offset_tombstone(group_id, t, p) for t, p in doomed]
                waiter = self.metadata_log.write(group_id, tombstones)
            except CoordinatorLogError as e:
                return OffsetDeleteResult(append_error(e.error))
            for t, p in doomed:
                self.offsets.remove(group_id, t, p)
            write_error = await self._await_hw(group_id, waiter)
            if write_error is not None:
                return OffsetDeleteResult(write_error)
        return OffsetDeleteResult(ErrorCode.none, tuple(results))

    def on_partitions_deleted(self, partitions: Sequence[tuple[str, int]]) -> int:
        """Topics were deleted: tombstone every group's offsets of those partitions (Kafka's
        onPartitionsDeleted). Called by the DeleteTopics handler; returns the records written."""
        if self.status != "active":
            return 0
        doomed = set(partitions)
        written = 0
        for group_id in self.offsets.group_ids():
            tps = sorted(tp for tp in self.offsets.group(group_id) if tp in doomed)
            if not tps:
                continue
            try:
                waiter = self.metadata_log.write(
                    group_id, [offset_tombstone(group_id, t, p) for t, p in tps]
                )
            except CoordinatorLogError as e:
                log.warning("group %s: forgetting deleted partitions failed: %s", group_id, e)
                continue
            self.metadata_log.track(group_id, waiter, None)
            for t, p in tps:
                self.offsets.remove(group_id, t, p)
            written += len(tps)
        return written

    # ------------------------------------------------------------ expiry

    def _schedule_expiration(self) -> None:
        self.timer.schedule(
            _EXPIRE_KEY,
            self.config.offsets_retention_check_interval_ms,
            self._run_expiration,
        )

    def _run_expiration(self) -> None:
        self.expire_offsets()

    def expire_offsets(self) -> int:
        """Tombstone offsets past retention; drop Empty groups left without offsets.
        Returns how many records were written. Runs every offsets.retention.check.interval.ms."""
        written = 0
        if self.status == "active":
            now = self.metadata_log.now()
            for group in list(self.groups.values()):
                expired, all_expired = self.offsets.expired(
                    group, now, self.config.offsets_retention_ms
                )
                records = [offset_tombstone(group.group_id, t, p) for t, p in expired]
                drop = all_expired and group.is_empty
                if drop:
                    records.append(group_tombstone(group.group_id))
                if not records:
                    continue
                try:
                    waiter = self.metadata_log.write(group.group_id, records)
                except CoordinatorLogError as e:
                    log.warning("group %s: expiring offsets failed: %s", group.group_id, e)
                    continue
                self.metadata_log.track(group.group_id, waiter, None)
                written += len(records)
                for t, p in expired:
                    self.offsets.remove(group.group_id, t, p)
                if drop:
                    log.info("group %s: expired", group.group_id)
                    self._drop_group(group)
        self._schedule_expiration()
        return written
