"""The group coordinator: loading ``__consumer_offsets``, committed offsets, admin APIs.

Composed of parts, as Kafka's GroupCoordinator is of its GroupMetadataManager and friends:
``GroupMembership`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup; ``broker.group.membership``),
``Rebalancer`` (the rebalance phases; ``broker.group.rebalance``), ``OffsetStore`` (committed
offsets; ``broker.group.offsets``), ``OffsetMetadataManager`` (OffsetCommit, OffsetFetch,
OffsetDelete, offset expiry; ``broker.group.offset_metadata_manager``) and ``GroupMetadataLog``
(writes to ``__consumer_offsets``; ``broker.group.metadata_log``). This class wires them and
adds the start-up replay, ListGroups, DescribeGroups and DeleteGroups.

Start-up: ``GroupCoordinator.start`` has the coordinator runtime read every partition of
``__consumer_offsets`` from its log start to its HW and replay the records through
``replay_record``, the function that also applies live writes once durable (the last
GroupMetadata value of a group wins, a null value deletes; offsets, transactional offsets and
transaction markers go to the offset manager). Until it is done every API answers
COORDINATOR_LOAD_IN_PROGRESS (Heartbeat answers NONE, as Kafka does). A loaded group with
members is Stable and its members get a session timeout to show up again; one without members
is Empty.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import CoordinatorLog, CoordinatorLogError, LogRecord
from tidelog.broker.group.config import GroupConfig
from tidelog.broker.group.consumer.records import CONSUMER_KEY_VERSIONS
from tidelog.broker.group.consumer.records import key_version as consumer_key_version
from tidelog.broker.group.membership import GroupMembership
from tidelog.broker.group.metadata_log import GroupMetadataLog
from tidelog.broker.group.offset_metadata_manager import OffsetMetadataManager
from tidelog.broker.group.offsets import (
    OffsetStore,
    group_tombstone,
    offset_tombstone,
)
from tidelog.broker.group.rebalance import Rebalancer, append_error, hb_key
from tidelog.broker.group.results import (
    DescribedGroup,
    DescribedMember,
    JoinGroupResult,
    ListedGroup,
    Protocol,
    SyncGroupResult,
)
from tidelog.broker.group.state import ClassicGroup, GroupState, Member
from tidelog.broker.group.streams.records import STREAMS_KEY_VERSIONS
from tidelog.broker.group.timer import LoopTimer, Timer
from tidelog.broker.share.records import SHARE_KEY_VERSIONS
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

if TYPE_CHECKING:
    from tidelog.broker.group.consumer.coordinator import ConsumerGroups
    from tidelog.broker.group.streams.coordinator import StreamsGroups
    from tidelog.broker.share.groups import ShareGroups

log = logging.getLogger("tidelog.group")


class GroupCoordinator:
    """Kafka's GroupCoordinator, composed of parts: ``membership`` (JoinGroup, SyncGroup,
    Heartbeat, LeaveGroup), ``rebalancer`` (the rebalance phases), ``offsets`` (committed
    offsets), ``offset_manager`` (the offset requests and expiry) and ``metadata_log`` (writes
    to ``__consumer_offsets``, load status). The groups dict is shared by the parts. This class
    adds the start-up replay, ListGroups, DescribeGroups and DeleteGroups."""

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
        self.metadata_log = GroupMetadataLog(config, log_, self.timer, self.replay_record)
        #: GroupMetadata values read by the load, applied when it ends (``_finish_load``).
        self._loaded_metadata: dict[str, GroupMetadataValue | None] = {}
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        self.rebalancer = Rebalancer(self.groups, self.metadata_log)
        self.membership = GroupMembership(self.groups, self.metadata_log, self.rebalancer)
        self.offset_manager = OffsetMetadataManager(
            config,
            self.groups,
            self.offsets,
            self.metadata_log,
            self.rebalancer,
            self.timer,
            self._drop_group,
            partition_exists,
        )
        # The membership requests, answered by their part (names the handlers call).
        self.join_group = self.membership.join_group
        self.sync_group = self.membership.sync_group
        self.heartbeat = self.membership.heartbeat
        self.leave_group = self.membership.leave_group
        # The offset requests, answered by their part.
        self.commit_offsets = self.offset_manager.commit_offsets
        self.commit_transactional_offsets = self.offset_manager.commit_transactional_offsets
        self.fetch_offsets = self.offset_manager.fetch_offsets
        self.delete_offsets = self.offset_manager.delete_offsets
        self.on_partitions_deleted = self.offset_manager.on_partitions_deleted
        self.expire_offsets = self.offset_manager.expire_offsets
        self._consumer_groups: ConsumerGroups | None = None
        #: Share groups (``broker/share/groups.py``), once installed: their records in
        #: ``__consumer_offsets`` are replayed by this coordinator's load.
        self.share_groups: ShareGroups | None = None
        #: Streams groups (``broker/group/streams``), once installed: their records in
        #: ``__consumer_offsets`` are replayed by this coordinator's load.
        self.streams_groups: StreamsGroups | None = None

    @property
    def partition_exists(self) -> Callable[[str, int], bool] | None:
        """OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION where this says no."""
        return self.offset_manager.partition_exists

    @partition_exists.setter
    def partition_exists(self, value: Callable[[str, int], bool] | None) -> None:
        self.offset_manager.partition_exists = value

    @property
    def consumer_groups(self) -> ConsumerGroups | None:
        """KIP-848 consumer groups (broker/group/consumer), installed beside this coordinator
        (None until then); the membership part checks them on JoinGroup."""
        return self._consumer_groups

    @consumer_groups.setter
    def consumer_groups(self, value: ConsumerGroups | None) -> None:
        self._consumer_groups = value
        self.membership.consumer_groups = value
        self.offset_manager.consumer_groups = value

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
        self._loaded_metadata = {}
        count = await self.metadata_log.runtime.load()
        self._finish_load(self._loaded_metadata)
        self._loaded_metadata = {}
        if self.consumer_groups is not None:
            for gid in list(self.groups):
                if self.consumer_groups.owns(gid) and self.groups[gid].is_empty:
                    del self.groups[gid]  # offsets of a consumer group, not a classic group
            self.consumer_groups.start_timers()
        if self.share_groups is not None:
            self.share_groups.loaded()
        if self.streams_groups is not None:
            for gid in list(self.groups):
                if self.streams_groups.owns(gid) and self.groups[gid].is_empty:
                    del self.groups[gid]  # offsets of a streams group, not a classic group
            self.streams_groups.loaded()
        self.status = "active"
        self.offset_manager.schedule_expiration()
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
        await self.metadata_log.stop()

    def replay_record(self, record: LogRecord) -> None:
        """Apply one ``__consumer_offsets`` record: at load, and once a write is durable."""
        if record.marker is not None:
            self.offset_manager.replay_end_transaction_marker(record.producer_id, record.marker)
            return
        key, value = record.key, record.value
        if key is None:
            return
        version = consumer_key_version(key)
        if self.consumer_groups is not None and version in CONSUMER_KEY_VERSIONS:
            self.consumer_groups.replay(key, value)
            return
        if version in STREAMS_KEY_VERSIONS:
            if self.streams_groups is not None:
                self.streams_groups.replay(key, value)
            return
        if version in SHARE_KEY_VERSIONS:
            if self.share_groups is not None:
                self.share_groups.replay(key, value)
            return
        try:
            k = decode_key(key)
            if isinstance(k, OffsetCommitKey):
                v = None if value is None else decode_offset_commit_value(value)
                self.offset_manager.replay(record.offset, record.producer_id, k, v)
            elif isinstance(k, GroupMetadataKey):
                if value is None:
                    self._loaded_metadata[k.group] = None
                    self.groups.pop(k.group, None)  # a simple group its offsets made, too
                else:
                    self._loaded_metadata[k.group] = decode_group_metadata_value(value)
        except SchemaError as e:
            log.warning("skipping a __consumer_offsets record that does not parse: %s", e)

    def complete_transaction(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool
    ) -> Awaitable[None]:
        """Write a transaction's COMMIT/ABORT marker to ``__consumer_offsets``-``partition``
        now (raises ``CoordinatorLogError``); once durable its replay commits or drops the
        producer's pending offsets (Kafka's GroupCoordinator.completeTransaction)."""
        return self.metadata_log.runtime.write_marker(
            partition, producer_id, producer_epoch, commit
        )

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

    # ------------------------------------------------------------ admin

    def group_count(self) -> int:
        """The groups this coordinator knows, of every type (Kafka's NumGroups; the
        ``tidelog_groups`` gauge of ``broker/metrics.py``): one group id counts once."""
        modern = [
            groups
            for groups in (self.consumer_groups, self.streams_groups, self.share_groups)
            if groups is not None
        ]
        classic = sum(1 for gid in self.groups if not any(m.owns(gid) for m in modern))
        return classic + sum(len(m.groups) for m in modern)

    def list_groups(self, states_filter: Sequence[str] = ()) -> tuple[ErrorCode, list[ListedGroup]]:
        error = self.metadata_log.inactive_error()
        if error is not None:
            return error, []
        wanted = {s.strip().lower() for s in states_filter}
        consumer = self.consumer_groups
        listed = [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_in(GroupState.DEAD)
            and (not wanted or g.state.value.lower() in wanted)
            # one group id is one group: a consumer group's id is never listed as classic too
            and not (consumer is not None and consumer.owns(g.group_id))
        ]
        if self.consumer_groups is not None:
            listed += [
                ListedGroup(gid, "consumer", g.state, "consumer")
                for gid, g in self.consumer_groups.groups.items()
                if not wanted or g.state.lower() in wanted
            ]
        if self.streams_groups is not None:
            listed += [
                ListedGroup(gid, "streams", g.state(), "streams")
                for gid, g in self.streams_groups.groups.items()
                if not wanted or g.state().lower() in wanted
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
            self.timer.cancel(hb_key(group.group_id, mid))
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
            modern = self.offset_manager.modern_group(gid)  # a consumer or streams group
            if group is None and modern is not None:
                if modern.has_members(gid):
                    results.append((gid, ErrorCode.non_empty_group))
                    continue
                modern.drop_if_empty(gid)
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
            write_error = await self.offset_manager.await_hw(gid, waiter)
            if write_error is not None:
                results[index] = (gid, write_error)
        return results
