"""The streams rebalance protocol of KIP-1071: StreamsGroupHeartbeat, StreamsGroupDescribe and
the offset-commit rules of streams groups, beside the classic and consumer group coordinators.

A heartbeat (Kafka's GroupMetadataManager.streamsGroupHeartbeat, simplified):

1. checks the request (group id; on join, member epoch 0: a rebalance timeout, a topology, a
   process id, empty task lists), the group's type (a classic or consumer group of that id
   answers GROUP_ID_NOT_FOUND "Group X is not a streams group."), and the member: an unknown id
   with an epoch other than 0 UNKNOWN_MEMBER_ID; an epoch above the member's, or below it
   unless it is the previous epoch, FENCED_MEMBER_EPOCH;
2. epoch -1 leaves (the member is removed, its tasks freed; the group epoch bumped); -2 (a
   static member's temporary leave) is answered the same way;
3. takes the topology of the first member (or a newer epoch of it), the member's process id,
   endpoint, rack and client tags; a new member, a changed topology or changed partition counts
   of the topology's topics bump the group epoch;
4. configures the topology against the topics that exist (``topology.configure``): missing
   internal topics are created with the partitions and configs declared (the answer reports
   MISSING_INTERNAL_TOPICS meanwhile), missing source topics are reported
   (MISSING_SOURCE_TOPICS) and leave the group without tasks;
5. when the group epoch is above the target assignment epoch, computes the target with the
   sticky assignor (``assignor``; ``group.streams.num.standby.replicas`` standby copies);
6. reconciles the member (``model.reconcile``: revocation before reassignment) and answers its
   epoch, the heartbeat interval, the status, and - when they changed or it joined - its tasks.

A member that sends no heartbeat for ``group.streams.session.timeout.ms`` is fenced: removed,
the group epoch bumped; so is a member that keeps tasks it must revoke past its rebalance
timeout.

State: every change is written as Kafka 4.4's StreamsGroup* records (``records``: group epoch,
topology, member metadata, target assignment, current member assignment, tombstones for removed
members) to the group's ``__consumer_offsets`` partition, and the heartbeat is answered once they
are covered by the high watermark (``state_records.diff_records``); at load ``replay`` rebuilds
the groups from them (``state_records.apply_record``).

Kafka divergence: the change is applied in memory, then written as the records of the
difference (Kafka applies the records by replaying them); the metadata hash is written 0 (the
partition counts are compared again after a load); no warm-up tasks; the endpoint information
(interactive queries) is answered for the members that declare an endpoint, every change of one
bumping its epoch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import CoordinatorLogError, KeyValue
from tidelog.broker.group import modern
from tidelog.broker.group.results import Refused
from tidelog.broker.group.streams import records as rec
from tidelog.broker.group.streams.assignor import MemberSpec, assign_tasks
from tidelog.broker.group.streams.model import (
    UNREVOKED_TASKS,
    StreamsGroup,
    StreamsMember,
    TaskSet,
    reconcile,
)
from tidelog.broker.group.streams.state_records import apply_record, diff_records, snapshot
from tidelog.broker.group.streams.topology import Status, Topology, configure

log = logging.getLogger("tidelog.group.streams")

__all__ = ["Host", "StreamsGroups", "StreamsHeartbeat", "StreamsHeartbeatResult"]


@dataclass(frozen=True, slots=True)
class Host:
    """What the streams-group protocol uses of the broker."""

    #: writes, timers, load state
    runtime: modern.GroupRuntime
    #: True when a classic or consumer group of that id exists
    other_group: Callable[[str], bool]
    #: name -> partition count of the topics that exist
    partitions: Callable[[], Mapping[str, int]]
    #: create internal topics: name -> (partitions, configs); failures are logged
    create_topics: Callable[[Mapping[str, tuple[int, Mapping[str, str]]]], Awaitable[None]]
    #: (session timeout ms, heartbeat interval ms, standby replicas)
    settings: Callable[[str], tuple[int, int, int]]
    max_size: int


@dataclass(frozen=True, slots=True)
class StreamsHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    topology: Topology | None
    reported: TaskSet | None
    process_id: str | None
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...] | None
    shutdown_application: bool
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    status: tuple[tuple[int, str], ...] | None = None
    tasks: TaskSet | None = None
    endpoint_information_epoch: int = 0
    #: (host, port) -> (active, standby) partitions by topic, when the client is behind
    endpoints: (
        tuple[tuple[tuple[str, int], dict[str, set[int]], dict[str, set[int]]], ...] | None
    ) = None


class StreamsGroups:
    """Streams groups of this coordinator (see the module docstring)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.groups: dict[str, StreamsGroup] = {}
        self._creating: set[str] = set()
        self._shutdown: set[str] = set()
        self.timers = modern.MemberTimers("streams", host.runtime)

    # ------------------------------------------------------------------ queries
    def owns(self, group_id: str) -> bool:
        return group_id in self.groups

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def describe(self, group_id: str) -> StreamsGroup | None:
        return self.groups.get(group_id)

    def drop_if_empty(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        if group is None or group.members:
            return False
        del self.groups[group_id]
        self._shutdown.discard(group_id)

        def key(version: int) -> bytes:
            return rec.encode_key(rec.StreamsKey(version, group_id))

        # Kafka's tombstones of a deleted streams group (its members are gone already).
        writes: list[KeyValue] = [
            (key(rec.TARGET_ASSIGNMENT_METADATA_KEY), None),
            (key(rec.METADATA_KEY), None),
            (key(rec.TOPOLOGY_KEY), None),
        ]
        modern.write_in_background(self.host.runtime, group_id, writes, "its deletion", log)
        return True

    # ------------------------------------------------------------------ heartbeat
    async def heartbeat(self, req: StreamsHeartbeat) -> StreamsHeartbeatResult:
        error = self.host.runtime.inactive_error()
        if error is not None:
            return StreamsHeartbeatResult(error, member_id=req.member_id)
        before = snapshot(self.groups.get(req.group_id))
        try:
            result, create = self._heartbeat(req)
        except Refused as exc:
            return StreamsHeartbeatResult(exc.error, exc.message, req.member_id)
        writes = diff_records(req.group_id, before, self.groups.get(req.group_id))
        if writes:
            try:
                await asyncio.wait_for(self.host.runtime.write(req.group_id, writes), 30)
            except CoordinatorLogError as exc:
                return StreamsHeartbeatResult(exc.error, str(exc) or None, result.member_id)
            except TimeoutError:
                return StreamsHeartbeatResult(ErrorCode.request_timed_out, None, result.member_id)
        if create:
            await self._create(create)
        return result

    async def _create(self, topics: Mapping[str, tuple[int, Mapping[str, str]]]) -> None:
        todo = {n: v for n, v in topics.items() if n not in self._creating}
        if not todo:
            return
        self._creating.update(todo)
        try:
            await self.host.create_topics(todo)
        finally:
            self._creating.difference_update(todo)

    def _validate(self, req: StreamsHeartbeat) -> None:
        modern.check_heartbeat(
            req.group_id,
            req.member_id,
            req.instance_id,
            req.member_epoch,
            req.rebalance_timeout_ms,
            member_id_always=True,
        )
        if req.member_epoch == 0:
            if req.topology is None:
                raise Refused(ErrorCode.invalid_request, "Topology must be non-null when joining.")
            if not req.process_id:
                raise Refused(ErrorCode.invalid_request, "ProcessId can't be empty.")
            if req.reported is None or not req.reported.is_empty():
                raise Refused(
                    ErrorCode.invalid_request,
                    "ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining.",
                )

    def _group_for(self, req: StreamsHeartbeat) -> StreamsGroup:
        group = self.groups.get(req.group_id)
        if group is not None:
            return group
        other = self.host.other_group(req.group_id)
        if other or req.member_epoch != 0:
            raise Refused(
                ErrorCode.group_id_not_found, modern.group_not_found(req.group_id, "streams", other)
            )
        group = StreamsGroup(req.group_id)
        self.groups[req.group_id] = group
        return group

    def _heartbeat(
        self, req: StreamsHeartbeat
    ) -> tuple[StreamsHeartbeatResult, dict[str, tuple[int, Mapping[str, str]]]]:
        self._validate(req)
        group = self._group_for(req)
        session_ms, interval_ms, standby_replicas = self.host.settings(group.group_id)
        if req.member_epoch in (
            modern.LEAVE_GROUP_MEMBER_EPOCH,
            modern.LEAVE_GROUP_STATIC_MEMBER_EPOCH,
        ):
            self._remove_member(group, req.member_id)
            return (
                StreamsHeartbeatResult(
                    ErrorCode.none,
                    member_id=req.member_id,
                    member_epoch=req.member_epoch,
                ),
                {},
            )
        member = self._member_for(group, req)
        joining = req.member_epoch == 0
        bump = member.member_id not in group.members
        if req.topology is not None and (
            group.topology is None or req.topology.epoch > group.topology.epoch
        ):
            group.topology = req.topology
            bump = True
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms
                if req.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            topology_epoch=(
                req.topology.epoch if req.topology is not None else member.topology_epoch
            ),
            process_id=req.process_id if req.process_id is not None else member.process_id,
            user_endpoint=(
                req.user_endpoint if req.user_endpoint is not None else member.user_endpoint
            ),
            client_tags=req.client_tags if req.client_tags is not None else member.client_tags,
            client_id=req.client_id,
            client_host=req.client_host,
        )
        if (
            updated.process_id != member.process_id
            or updated.rack_id != member.rack_id
            or updated.client_tags != member.client_tags
        ):
            bump = True
        if updated.user_endpoint != member.user_endpoint:
            group.endpoint_epoch += 1
        # The topology against the topics that exist.
        create: dict[str, tuple[int, Mapping[str, str]]] = {}
        status: list[tuple[int, str]] = []
        if group.topology is not None:
            existing = self.host.partitions()
            names = group.topology.topic_names()
            metadata = {n: existing[n] for n in names if n in existing}
            if metadata != group.metadata or not group.configured.tasks:
                group.metadata = metadata
                configured = configure(group.topology, metadata)
                if configured != group.configured:
                    group.configured = configured
                    bump = True
            create = dict(group.configured.missing_internal)
            status.extend(group.configured.status)
            if req.topology is not None and req.topology.epoch < group.topology.epoch:
                status.append(
                    (
                        Status.STALE_TOPOLOGY,
                        f"The member's topology epoch {req.topology.epoch} is behind the "
                        f"group's topology epoch {group.topology.epoch}.",
                    )
                )
        if req.shutdown_application:
            self._shutdown.add(group.group_id)
        if group.group_id in self._shutdown:
            status.append(
                (
                    Status.SHUTDOWN_APPLICATION,
                    "A KafkaStreams instance encountered a fatal error and requested a "
                    "shutdown for the entire application.",
                )
            )
        group.members[updated.member_id] = updated
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.target_epoch:
            self._compute_target(group, standby_replicas)
        before = updated.assigned
        reconciled = reconcile(
            updated,
            group.target_epoch,
            group.targets.get(updated.member_id),
            group.active_owned_by_others(updated.member_id),
            req.reported,
        )
        group.members[reconciled.member_id] = reconciled
        self._schedule_session(group.group_id, reconciled.member_id, session_ms)
        self._schedule_rebalance(
            group.group_id, reconciled, started=member.state != UNREVOKED_TASKS
        )
        send = joining or reconciled.assigned != before or reconciled.state != member.state
        endpoints = None
        if req.endpoint_information_epoch < group.endpoint_epoch:
            endpoints = self._endpoints(group)
        return (
            StreamsHeartbeatResult(
                ErrorCode.none,
                member_id=reconciled.member_id,
                member_epoch=reconciled.member_epoch,
                heartbeat_interval_ms=interval_ms,
                status=tuple(status),
                tasks=reconciled.assigned if send else None,
                endpoint_information_epoch=group.endpoint_epoch,
                endpoints=endpoints,
            ),
            create,
        )

    def _member_for(self, group: StreamsGroup, req: StreamsHeartbeat) -> StreamsMember:
        member = group.members.get(req.member_id)
        if member is None:
            if req.member_epoch != 0:
                raise Refused(
                    ErrorCode.unknown_member_id,
                    f"Member {req.member_id} is not a member of group {group.group_id}.",
                )
            modern.check_capacity("streams", len(group.members), self.host.max_size)
            return StreamsMember(member_id=req.member_id)
        if req.member_epoch == 0:
            return member  # a rejoin of a known member keeps its tasks until reconciled
        modern.check_member_epoch(
            "streams", req.member_epoch, member.member_epoch, member.previous_member_epoch
        )
        return member

    def _compute_target(self, group: StreamsGroup, standby_replicas: int) -> None:
        tasks = dict(group.configured.tasks) if group.configured.ready else {}
        if group.configured.missing_internal:
            tasks = {}
        specs = {}
        for m in group.members.values():
            old = group.targets.get(m.member_id)
            specs[m.member_id] = MemberSpec(
                process_id=m.process_id,
                active=old.active if old is not None else m.assigned.active,
                standby=old.standby if old is not None else m.assigned.standby,
            )
        group.targets = assign_tasks(tasks, specs, standby_replicas)
        group.target_epoch = group.group_epoch

    def _endpoints(
        self, group: StreamsGroup
    ) -> tuple[tuple[tuple[str, int], dict[str, set[int]], dict[str, set[int]]], ...]:
        topology = group.topology
        out = []
        for m in sorted(group.members.values(), key=lambda m: m.member_id):
            if m.user_endpoint is None or topology is None:
                continue
            active: dict[str, set[int]] = {}
            standby: dict[str, set[int]] = {}
            for sub in topology.subtopologies:
                sources = list(sub.source_topics) + [t.name for t in sub.repartition_source_topics]
                for p in m.assigned.active.get(sub.subtopology_id, frozenset()):
                    for t in sources:
                        active.setdefault(t, set()).add(p)
                for p in m.assigned.standby.get(sub.subtopology_id, frozenset()):
                    for t in sources:
                        standby.setdefault(t, set()).add(p)
            out.append((m.user_endpoint, active, standby))
        return tuple(out)

    # ------------------------------------------------------------------ membership
    def _remove_member(self, group: StreamsGroup, member_id: str) -> None:
        if group.members.pop(member_id, None) is None:
            return
        group.targets.pop(member_id, None)
        self.timers.cancel(group.group_id, member_id)
        group.group_epoch += 1
        if not group.members:
            self._shutdown.discard(group.group_id)

    def _schedule_session(self, group_id: str, member_id: str, session_ms: int) -> None:
        self.timers.schedule_session(
            group_id, member_id, session_ms, lambda: self._fence(group_id, member_id)
        )

    def _schedule_rebalance(self, group_id: str, member: StreamsMember, *, started: bool) -> None:
        """A member told to revoke tasks has its rebalance timeout, from the heartbeat that
        told it (``started``), to do it; it is fenced otherwise."""
        if member.state != UNREVOKED_TASKS:
            self.timers.cancel_rebalance(group_id, member.member_id)
            return
        epoch = member.member_epoch

        def expire() -> None:
            group = self.groups.get(group_id)
            now = None if group is None else group.members.get(member.member_id)
            if now is not None and now.state == UNREVOKED_TASKS and now.member_epoch == epoch:
                self._fence(group_id, member.member_id, "rebalance timeout")

        if started and member.rebalance_timeout_ms > 0:
            self.timers.schedule_rebalance(
                group_id, member.member_id, member.rebalance_timeout_ms, expire
            )

    def _fence(self, group_id: str, member_id: str, why: str = "session timeout") -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        log.info("streams group %s: member %s fenced (%s)", group_id, member_id, why)
        before = snapshot(group)
        self._remove_member(group, member_id)
        writes = diff_records(group_id, before, group)
        modern.write_in_background(
            self.host.runtime, group_id, writes, f"the removal of {member_id}", log
        )

    # ------------------------------------------------------------------ load
    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one StreamsGroup* record (at load)."""
        apply_record(self.groups, key, value)

    def loaded(self) -> None:
        """After the load: the topologies configured against today's topics, session timers
        started afresh."""
        existing = self.host.partitions()
        for group in self.groups.values():
            if group.topology is not None:
                names = group.topology.topic_names()
                group.metadata = {n: existing[n] for n in names if n in existing}
                group.configured = configure(group.topology, group.metadata)
            session_ms, _interval, _standby = self.host.settings(group.group_id)
            for member_id in group.members:
                self._schedule_session(group.group_id, member_id, session_ms)

    # ------------------------------------------------------------------ offsets
    def validate_offset_commit(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int
    ) -> ErrorCode:
        """Kafka's StreamsGroup.validateOffsetCommit."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if member_epoch < 0 and not member_id and not group.members:
            return ErrorCode.none  # an admin or a client without group management
        return modern.offset_member_error(group.members, member_id, member_epoch)

    def validate_transactional_offset_commit(
        self, group_id: str, member_id: str, generation_id: int
    ) -> ErrorCode:
        if generation_id < 0 and not member_id:
            return ErrorCode.none
        error = self.validate_offset_commit(group_id, member_id, generation_id, 5)
        return ErrorCode.illegal_generation if error is ErrorCode.stale_member_epoch else error

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        if member_id is None or (not member_id and member_epoch < 0):
            return ErrorCode.none
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        return modern.offset_member_error(group.members, member_id, member_epoch)

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        group = self.groups.get(group_id)
        if group is None or group.topology is None or not group.members:
            return False
        return topic in group.topology.topic_names()
