"""DeleteGroups (API 42) v0-2: delete empty groups and their committed offsets.

A group with members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND. Deleting writes
tombstones (null values) for every committed offset and for the group's metadata, so a restart
or log compaction forgets the group too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.broker.share.wire import delete_share_groups, split_share_groups
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

if TYPE_CHECKING:
    from kio.schema.delete_groups.v0.request import DeleteGroupsRequest as _DeleteGroupsRequestV0
    from kio.schema.delete_groups.v1.request import DeleteGroupsRequest as _DeleteGroupsRequestV1
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest as _DeleteGroupsRequestV2

    #: The request versions this handler serves (kio's classes).
    Request = _DeleteGroupsRequestV0 | _DeleteGroupsRequestV1 | _DeleteGroupsRequestV2
    from kio.schema.delete_groups.v0.response import DeleteGroupsResponse as _DeleteGroupsResponseV0
    from kio.schema.delete_groups.v1.response import DeleteGroupsResponse as _DeleteGroupsResponseV1
    from kio.schema.delete_groups.v2.response import DeleteGroupsResponse as _DeleteGroupsResponseV2

    #: The response versions it answers (kio's classes).
    Response = _DeleteGroupsResponseV0 | _DeleteGroupsResponseV1 | _DeleteGroupsResponseV2


API_KEY = 42


async def handle(ctx: RequestContext, request: Request) -> Response:
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
    return cast(
        "Response",
        types.DeleteGroupsResponse(
            throttle_time=NO_THROTTLE,
            results=tuple(
                types.DeletableGroupResult(group_id=g, error_code=error) for g, error in results
            ),
        ),
    )


SPEC = HandlerSpec(API_KEY, "DeleteGroups", 0, 2, handle)
