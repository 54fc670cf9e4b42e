"""DeleteGroups (API 42) v0-2: delete empty groups and their committed offsets.

A group with members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND. Deleting writes
tombstones (null values) for every committed offset and for the group's metadata, so a restart
or log compaction forgets the group too.
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.broker.share.wire import delete_share_groups, split_share_groups
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

API_KEY = 42


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    names = [str(g) for g in request.groups_names]
    groups = coordinator(ctx)
    if groups is None:
        results = [(g, ErrorCode.coordinator_not_available) for g in names]
    else:
        permitted = [g for g in names if allowed(ctx, Operation.DELETE, GROUP, g)]
        shared, classic = split_share_groups(ctx, permitted)
        results = await groups.delete_groups(classic) if classic else []
        results += await delete_share_groups(ctx, shared)
        results += [(g, ErrorCode.group_authorization_failed) for g in names if g not in permitted]
    return types.DeleteGroupsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            types.DeletableGroupResult(group_id=g, error_code=error) for g, error in results
        ),
    )


SPEC = HandlerSpec(API_KEY, "DeleteGroups", 0, 2, handle)
