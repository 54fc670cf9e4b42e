"""Streams-group state as Kafka 4.4's StreamsGroup* records of ``__consumer_offsets``, and
back: ``snapshot`` and ``diff_records`` give the records that take a group from one state to
the next (Kafka's order: member metadata, group epoch, topology, target assignment, current
assignments; tombstones for removed members); ``apply_record`` applies one record read back at
start-up, in log order (the byte layouts are ``records``).
"""

from __future__ import annotations

from dataclasses import replace

from tidelog.broker.coordinator.log import KeyValue
from tidelog.broker.group.streams import records as rec
from tidelog.broker.group.streams.assignor import TaskAssignment
from tidelog.broker.group.streams.model import EMPTY_TASKS, StreamsGroup, StreamsMember, TaskSet
from tidelog.broker.group.streams.topology import Topology

__all__ = ["Snapshot", "apply_record", "diff_records", "snapshot"]


Snapshot = tuple[int, int, Topology | None, dict[str, StreamsMember], dict[str, TaskAssignment]]


def snapshot(group: StreamsGroup | None) -> Snapshot | None:
    if group is None:
        return None
    return (
        group.group_epoch,
        group.target_epoch,
        group.topology,
        dict(group.members),
        dict(group.targets),
    )


def _metadata_part(m: StreamsMember) -> StreamsMember:
    return replace(
        m,
        member_epoch=0,
        previous_member_epoch=-1,
        state="",
        assigned=EMPTY_TASKS,
        revoking=EMPTY_TASKS,
    )


def _assignment_part(m: StreamsMember) -> tuple[int, int, str, TaskSet, TaskSet]:
    return (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.revoking)


def diff_records(
    group_id: str, before: Snapshot | None, group: StreamsGroup | None
) -> list[KeyValue]:
    """The StreamsGroup* records that take ``before`` to ``group`` (Kafka's order: member
    metadata, group epoch, topology, target assignment, current assignments)."""
    if group is None:
        return []
    epoch, target_epoch, topology, members, targets = before or (0, 0, None, {}, {})
    fresh = before is None

    def key(version: int, member_id: str | None = None) -> bytes:
        return rec.encode_key(rec.StreamsKey(version, group_id, member_id))

    out: list[KeyValue] = []
    for mid in sorted(set(members) - set(group.members)):
        out.append((key(rec.CURRENT_MEMBER_ASSIGNMENT_KEY, mid), None))
        if mid in targets:
            out.append((key(rec.TARGET_ASSIGNMENT_MEMBER_KEY, mid), None))
        out.append((key(rec.MEMBER_METADATA_KEY, mid), None))
    for mid, m in sorted(group.members.items()):
        old = members.get(mid)
        if old is None or _metadata_part(old) != _metadata_part(m):
            out.append((key(rec.MEMBER_METADATA_KEY, mid), rec.encode_member_metadata_value(m)))
    if fresh or group.group_epoch != epoch:
        out.append((key(rec.METADATA_KEY), rec.encode_metadata_value(group.group_epoch)))
    if group.topology is not None and group.topology != topology:
        out.append((key(rec.TOPOLOGY_KEY), rec.encode_topology_value(group.topology)))
    if group.target_epoch != target_epoch:
        for mid, t in sorted(group.targets.items()):
            if targets.get(mid) != t:
                out.append(
                    (key(rec.TARGET_ASSIGNMENT_MEMBER_KEY, mid), rec.encode_target_member_value(t))
                )
        out.append(
            (
                key(rec.TARGET_ASSIGNMENT_METADATA_KEY),
                rec.encode_assignment_epoch_value(group.target_epoch),
            )
        )
    for mid, m in sorted(group.members.items()):
        old = members.get(mid)
        if old is None or _assignment_part(old) != _assignment_part(m):
            out.append(
                (
                    key(rec.CURRENT_MEMBER_ASSIGNMENT_KEY, mid),
                    rec.encode_current_assignment_value(m),
                )
            )
    return out


def apply_record(groups: dict[str, StreamsGroup], key: bytes, value: bytes | None) -> None:
    """Apply one StreamsGroup* record to ``groups`` (at load)."""
    k = rec.decode_key(key)
    group = groups.get(k.group_id)
    if k.version == rec.METADATA_KEY and value is None:
        groups.pop(k.group_id, None)
        return
    if group is None:
        if value is None:
            return
        group = groups[k.group_id] = StreamsGroup(k.group_id)
    mid = k.member_id or ""
    if k.version == rec.METADATA_KEY and value is not None:
        group.group_epoch = rec.decode_epoch(value)
    elif k.version == rec.TOPOLOGY_KEY:
        group.topology = None if value is None else rec.decode_topology_value(value)
    elif k.version == rec.TARGET_ASSIGNMENT_METADATA_KEY:
        group.target_epoch = 0 if value is None else rec.decode_epoch(value)
    elif k.version == rec.TARGET_ASSIGNMENT_MEMBER_KEY:
        if value is None:
            group.targets.pop(mid, None)
        else:
            group.targets[mid] = rec.decode_target_member_value(value)
    elif k.version == rec.MEMBER_METADATA_KEY:
        if value is None:
            group.members.pop(mid, None)
            return
        old = group.members.get(mid, StreamsMember(member_id=mid))
        new = rec.decode_member_metadata_value(mid, value)
        group.members[mid] = replace(
            new,
            member_epoch=old.member_epoch,
            previous_member_epoch=old.previous_member_epoch,
            state=old.state,
            assigned=old.assigned,
            revoking=old.revoking,
        )
    elif k.version == rec.CURRENT_MEMBER_ASSIGNMENT_KEY:
        old = group.members.get(mid, StreamsMember(member_id=mid))
        if value is None:
            group.members[mid] = replace(
                old,
                member_epoch=0,
                previous_member_epoch=-1,
                assigned=EMPTY_TASKS,
                revoking=EMPTY_TASKS,
            )
            return
        epoch, previous, state, assigned, revoking = rec.decode_current_assignment_value(value)
        group.members[mid] = replace(
            old,
            member_epoch=epoch,
            previous_member_epoch=previous,
            state=state,
            assigned=assigned,
            revoking=revoking,
        )
