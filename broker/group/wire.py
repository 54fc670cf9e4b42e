"""Small helpers the group handlers share: finding the coordinator, zero durations, the
assignment entity of the KIP-848 and KIP-932 APIs, the fields every heartbeat answer of those
APIs and KIP-1071's carries, a Describe API's entry for a group it cannot describe and its loop
over the groups asked for, and the task ids of the streams APIs."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build

if TYPE_CHECKING:
    from tidelog.broker.group.coordinator import GroupCoordinator
    from tidelog.broker.handlers.base import RequestContext

NO_THROTTLE = timedelta(0)
#: DescribeGroups' authorized_operations when the client did not ask for them.
UNSET_OPERATIONS = -(2**31)
#: AclOperation READ (3), DELETE (6), DESCRIBE (8): what a group allows without an authorizer
#: (the Describe APIs' ``authorized_operations`` when asked for).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)

G = TypeVar("G")


def coordinator(ctx: RequestContext) -> GroupCoordinator | None:
    """The broker's group coordinator, or None when it is not wired in."""
    from tidelog.broker.group.coordinator import GroupCoordinator

    groups: Any = getattr(ctx.broker, "groups", None)
    return groups if isinstance(groups, GroupCoordinator) else None


def client_host(ctx: RequestContext) -> str:
    """How Kafka shows a member's host: ``InetAddress.toString()``, e.g. ``/127.0.0.1``."""
    return f"/{ctx.client_host}"


def ms(value: Any, default: int = -1) -> int:
    """A kio duration field (timedelta) or a plain number, in milliseconds."""
    if value is None:
        return default
    if isinstance(value, timedelta):
        return int(value / timedelta(milliseconds=1))
    return int(value)


def assignment_entity(
    types: Any,
    parts: Mapping[uuid.UUID, Iterable[int]],
    names: Mapping[uuid.UUID, str] | None = None,
    *,
    by_name: bool = False,
) -> Any:
    """A member's assignment as the KIP-848 and KIP-932 APIs carry it: ``types.Assignment`` of
    ``types.TopicPartitions`` (the topic id, its name where the entity has one, the partitions in
    order), topics in id order, or in name order when ``by_name`` (ConsumerGroupDescribe)."""
    known = names or {}

    def key(item: tuple[uuid.UUID, Iterable[int]]) -> str:
        return known.get(item[0], "") if by_name else str(item[0])

    return build(
        types.Assignment,
        topic_partitions=tuple(
            build(
                types.TopicPartitions,
                topic_id=tid,
                topic_name=known.get(tid, ""),
                partitions=tuple(sorted(ps)),
            )
            for tid, ps in sorted(parts.items(), key=key)
        ),
    )


def heartbeat_answer(
    response: Any,
    error: ErrorCode,
    message: str | None,
    member_id: str | None,
    member_epoch: int,
    heartbeat_interval_ms: int,
    **fields: Any,
) -> Any:
    """A ConsumerGroupHeartbeat, StreamsGroupHeartbeat or ShareGroupHeartbeat answer: the
    fields they share, and the API's own ``fields``."""
    return build(
        response,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        member_id=member_id,
        member_epoch=member_epoch,
        heartbeat_interval=timedelta(milliseconds=heartbeat_interval_ms),
        **fields,
    )


def undescribed_group(
    types: Any, group_id: str, error: ErrorCode, message: str | None, **fields: Any
) -> Any:
    """A Describe API's entry (``types.DescribedGroup``) for a group it does not describe: the
    error, no state, epochs -1, no members; the API's own empty ``fields``."""
    return build(
        types.DescribedGroup,
        **{
            "error_code": error,
            "error_message": message,
            "group_id": group_id,
            "group_state": "",
            "group_epoch": -1,
            "assignment_epoch": -1,
            "members": (),
            "authorized_operations": UNSET_OPERATIONS,
            **fields,
        },
    )


def described_groups(
    group_ids: Iterable[str],
    unavailable: ErrorCode | None,
    describe: Callable[[str], G | None],
    not_found: Callable[[str], str],
    entry: Callable[[G], Any],
    error: Callable[[str, ErrorCode, str | None], Any],
) -> tuple[Any, ...]:
    """A Describe API's entries for ``group_ids``: each ``unavailable`` while the coordinator
    is (not available, loading); GROUP_ID_NOT_FOUND with ``not_found``'s message for a group
    ``describe`` does not know; else ``entry`` of the group. ``error`` builds an entry with an
    error (``undescribed_group`` with the API's own fields)."""
    out = []
    for group_id in group_ids:
        if unavailable is not None:
            out.append(error(group_id, unavailable, None))
            continue
        group = describe(group_id)
        if group is None:
            out.append(error(group_id, ErrorCode.group_id_not_found, not_found(group_id)))
            continue
        out.append(entry(group))
    return tuple(out)


def task_ids(types: Any, tasks: Mapping[str, Iterable[int]]) -> tuple[Any, ...]:
    """A streams API's tasks (subtopology -> partitions) as ``types.TaskIds``, in order."""
    return tuple(
        build(types.TaskIds, subtopology_id=s, partitions=tuple(sorted(ps)))
        for s, ps in sorted(tasks.items())
        if ps
    )
