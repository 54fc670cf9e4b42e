"""Share-group admin: describe, list, delete groups; describe, alter and delete their offsets.

As Kafka: a share group's "offset" of a partition is its share-partition start offset; the
lag (DescribeShareGroupOffsets v1) is the records from there to the HW not yet acknowledged or
archived. Altering or deleting offsets needs an empty group (NON_EMPTY_GROUP); altering resets
the share partition to the offset (a new state epoch, nothing in flight); deleting forgets it
(a tombstone in ``__share_group_state``), so the next assignment starts afresh from
``share.auto.offset.reset``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from tidelog.broker.share.coordinator import PartitionKey, ShareCoordinator
from tidelog.broker.share.groups import ShareGroup
from tidelog.broker.share.partition import RecordState, SharePartition

__all__ = (
    "PartitionOffset",
    "alter_offsets",
    "delete_group",
    "delete_offsets",
    "describe_offsets",
    "group_or_error",
)


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    topic_name: str
    topic_id: uuid.UUID
    partition: int
    start_offset: int
    lag: int
    error: ErrorCode = ErrorCode.none


def group_or_error(
    sc: ShareCoordinator, group_id: str
) -> tuple[ShareGroup | None, ErrorCode, str | None]:
    other = sc.groups.host.other_group_type(group_id)
    if other is not None:
        return None, ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
    group = sc.groups.groups.get(group_id)
    if group is None:
        return None, ErrorCode.group_id_not_found, f"Group {group_id} not found."
    return group, ErrorCode.none, None


def lag_of(sc: ShareCoordinator, topic_name: str, partition: int, sp: SharePartition) -> int:
    log = sc.broker.topics.get_log(topic_name, partition)
    if log is None:
        return -1
    done = sum(1 for r in sp.records.values() if r.state in _DONE)
    return max(log.high_watermark - sp.start_offset - done, 0)


_DONE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


def describe_offsets(
    sc: ShareCoordinator, group_id: str, wanted: Sequence[tuple[str, Sequence[int]]] | None
) -> list[PartitionOffset]:
    """The start offsets of the group's share partitions: all (``wanted`` None) or those
    asked for (an unknown topic answers UNKNOWN_TOPIC_OR_PARTITION, a partition with no
    state start offset -1)."""
    out: list[PartitionOffset] = []
    known = sc.group_partitions(group_id)
    if wanted is None:
        for (tid, p), sp in sorted(known.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            info = sc.broker.topics.by_id(tid)
            if info is not None:
                out.append(
                    PartitionOffset(
                        info.name, tid, p, sp.start_offset, lag_of(sc, info.name, p, sp)
                    )
                )
        return out
    for name, partitions in wanted:
        info = sc.broker.topics.get(name)
        if info is None:
            out += [
                PartitionOffset(
                    name, uuid.UUID(int=0), p, -1, -1, ErrorCode.unknown_topic_or_partition
                )
                for p in partitions
            ]
            continue
        for p in partitions:
            state = known.get((info.topic_id, p))
            if state is None:
                out.append(PartitionOffset(name, info.topic_id, p, -1, -1))
            else:
                lag = lag_of(sc, name, p, state)
                out.append(PartitionOffset(name, info.topic_id, p, state.start_offset, lag))
    return out


def _check_empty(sc: ShareCoordinator, group_id: str) -> tuple[ErrorCode, str | None]:
    if sc.groups.host.other_group_type(group_id) is not None:
        return ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
    group = sc.groups.groups.get(group_id)
    if group is not None and group.members:
        return ErrorCode.non_empty_group, f"Share group {group_id} is not empty."
    return ErrorCode.none, None


async def alter_offsets(
    sc: ShareCoordinator, group_id: str, wanted: Sequence[tuple[str, Sequence[tuple[int, int]]]]
) -> tuple[ErrorCode, str | None, list[tuple[str, uuid.UUID, int, ErrorCode]]]:
    error, message = _check_empty(sc, group_id)
    if error is not ErrorCode.none:
        return error, message, []
    results: list[tuple[str, uuid.UUID, int, ErrorCode]] = []
    changed: list[tuple[PartitionKey, SharePartition | None]] = []
    for name, partitions in wanted:
        info = sc.broker.topics.get(name)
        for p, offset in partitions:
            if info is None or not 0 <= p < info.partitions:
                tid = uuid.UUID(int=0) if info is None else info.topic_id
                results.append((name, tid, p, ErrorCode.unknown_topic_or_partition))
                continue
            log = sc.broker.topics.get_log(name, p)
            key = (group_id, info.topic_id, p)
            old = sc.partitions.get(key)
            assert log is not None
            start = min(max(offset, log.log_start_offset), log.high_watermark)
            sp = sc.new_share_partition(group_id, start, 0 if old is None else old.state_epoch + 1)
            sc.partitions[key] = sp
            changed.append((key, sp))
            results.append((name, info.topic_id, p, ErrorCode.none))
    if changed:
        await sc.write_state(changed)
    return ErrorCode.none, None, results


async def delete_offsets(
    sc: ShareCoordinator, group_id: str, topic_names: Sequence[str]
) -> tuple[ErrorCode, str | None, list[tuple[str, uuid.UUID, ErrorCode]]]:
    error, message = _check_empty(sc, group_id)
    if error is not ErrorCode.none:
        return error, message, []
    results: list[tuple[str, uuid.UUID, ErrorCode]] = []
    gone: list[tuple[PartitionKey, SharePartition | None]] = []
    for name in topic_names:
        info = sc.broker.topics.get(name)
        if info is None:
            results.append((name, uuid.UUID(int=0), ErrorCode.unknown_topic_or_partition))
            continue
        for key in [k for k in sc.partitions if k[0] == group_id and k[1] == info.topic_id]:
            sc.drop_partition(key)
            gone.append((key, None))
        results.append((name, info.topic_id, ErrorCode.none))
    if gone:
        await sc.write_state(gone)
    return ErrorCode.none, None, results


async def delete_group(sc: ShareCoordinator, group_id: str) -> ErrorCode:
    error = sc.groups.delete(group_id)
    if error is not ErrorCode.none:
        return error
    gone: list[tuple[PartitionKey, SharePartition | None]] = [
        (key, None) for key in list(sc.partitions) if key[0] == group_id
    ]
    for key, _ in gone:
        sc.drop_partition(key)
    if gone:
        await sc.write_state(gone)
    return ErrorCode.none
