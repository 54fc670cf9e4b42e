"""Helpers the share-group handlers share: the coordinator look-up and wire conversions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidelog.broker.handlers.base import RequestContext
    from tidelog.broker.share.coordinator import ShareCoordinator

__all__ = (
    "ack_batches",
    "delete_share_groups",
    "not_classic_if_share",
    "share_coordinator",
    "share_listed",
    "split_share_groups",
    "topic_readable",
)


def share_coordinator(ctx: RequestContext) -> ShareCoordinator | None:
    return ctx.broker.share_groups


def topic_readable(ctx: RequestContext, topic_id: Any) -> bool:
    """READ on the topic of ``topic_id`` (as Kafka checks for ShareFetch and ShareAcknowledge);
    an unknown id is left to the coordinator (UNKNOWN_TOPIC_ID)."""
    from tidelog.broker.security.access import TOPIC, Operation, allowed

    info = ctx.broker.topics.by_id(topic_id)
    return info is None or allowed(ctx, Operation.READ, TOPIC, info.name)


def ack_batches(batches: Any, version: int) -> tuple[list[Any], bool]:
    """A request partition's acknowledgement batches as ``AckBatch``es; the flag is False when
    one uses Renew (4) on a version before 2, which knows no Renew."""
    from tidelog.broker.share.coordinator import AckBatch

    out = []
    valid = True
    for b in batches:
        kinds = tuple(int(t) for t in b.acknowledge_types)
        if version < 2 and 4 in kinds:
            valid = False
        out.append(AckBatch(int(b.first_offset), int(b.last_offset), kinds))
    return out, valid


def share_listed(ctx: RequestContext, states_filter: tuple[str, ...]) -> list[Any]:
    """ListGroups' entries for the share groups (protocol type and group type "share")."""
    from tidelog.broker.group.results import ListedGroup

    sc = share_coordinator(ctx)
    if sc is None:
        return []
    wanted = {s.strip().lower() for s in states_filter}
    return [
        ListedGroup(gid, "share", g.state, "share")
        for gid, g in sc.groups.groups.items()
        if not wanted or g.state.lower() in wanted
    ]


def not_classic_if_share(ctx: RequestContext, described: Any) -> Any:
    """DescribeGroups of a share group: GROUP_ID_NOT_FOUND, as Kafka 4 answers for a group
    that is not a classic one ("Group <id> is not a classic group.")."""
    from tidelog.broker.group.results import DescribedGroup
    from tidelog.protocol.errors import ErrorCode

    sc = share_coordinator(ctx)
    if sc is None or described.group_id not in sc.groups.groups:
        return described
    return DescribedGroup(described.group_id, ErrorCode.group_id_not_found, state="")


def split_share_groups(ctx: RequestContext, names: list[str]) -> tuple[list[str], list[str]]:
    """(share group ids, the others) of a DeleteGroups request."""
    sc = share_coordinator(ctx)
    if sc is None:
        return [], names
    known = sc.groups.groups
    return [n for n in names if n in known], [n for n in names if n not in known]


async def delete_share_groups(ctx: RequestContext, names: list[str]) -> list[tuple[str, Any]]:
    from tidelog.broker.share.admin import delete_group

    sc = share_coordinator(ctx)
    if sc is None:
        return []
    return [(n, await delete_group(sc, n)) for n in names]
