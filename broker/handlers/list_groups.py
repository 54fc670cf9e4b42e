"""ListGroups (API 16) v0-5: every group this coordinator knows, with its protocol type.

v4 adds a case-insensitive state filter (KIP-518) and each group's state in the answer; v5
(KIP-848) a case-insensitive group type filter ("classic", "consumer", "share") and each
group's type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tidelog.broker.group.results import ListedGroup
from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import CLUSTER, GROUP, Operation, allowed
from tidelog.broker.share.wire import share_listed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.list_groups.v0.request import ListGroupsRequest as _ListGroupsRequestV0
    from kio.schema.list_groups.v1.request import ListGroupsRequest as _ListGroupsRequestV1
    from kio.schema.list_groups.v2.request import ListGroupsRequest as _ListGroupsRequestV2
    from kio.schema.list_groups.v3.request import ListGroupsRequest as _ListGroupsRequestV3
    from kio.schema.list_groups.v4.request import ListGroupsRequest as _ListGroupsRequestV4
    from kio.schema.list_groups.v5.request import ListGroupsRequest as _ListGroupsRequestV5

    #: The request versions this handler serves (kio's classes).
    Request = (
        _ListGroupsRequestV0
        | _ListGroupsRequestV1
        | _ListGroupsRequestV2
        | _ListGroupsRequestV3
        | _ListGroupsRequestV4
        | _ListGroupsRequestV5
    )
    from kio.schema.list_groups.v0.response import ListGroupsResponse as _ListGroupsResponseV0
    from kio.schema.list_groups.v1.response import ListGroupsResponse as _ListGroupsResponseV1
    from kio.schema.list_groups.v2.response import ListGroupsResponse as _ListGroupsResponseV2
    from kio.schema.list_groups.v3.response import ListGroupsResponse as _ListGroupsResponseV3
    from kio.schema.list_groups.v4.response import ListGroupsResponse as _ListGroupsResponseV4
    from kio.schema.list_groups.v5.response import ListGroupsResponse as _ListGroupsResponseV5

    #: The response versions it answers (kio's classes).
    Response = (
        _ListGroupsResponseV0
        | _ListGroupsResponseV1
        | _ListGroupsResponseV2
        | _ListGroupsResponseV3
        | _ListGroupsResponseV4
        | _ListGroupsResponseV5
    )


API_KEY = 16


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    groups = coordinator(ctx)
    listed: list[ListedGroup] = []
    if groups is None:
        error = ErrorCode.coordinator_not_available
    else:
        error, listed = groups.list_groups(tuple(getattr(request, "states_filter", ())))
        listed += share_listed(ctx, tuple(getattr(request, "states_filter", ())))
        if not allowed(ctx, Operation.DESCRIBE, CLUSTER, log_denial=False):
            # Kafka: without DESCRIBE on the cluster, the groups the principal may DESCRIBE.
            listed = [
                g
                for g in listed
                if allowed(ctx, Operation.DESCRIBE, GROUP, g.group_id, log_denial=False)
            ]
        types_filter = {t.strip().lower() for t in getattr(request, "types_filter", ())}
        if types_filter:
            listed = [g for g in listed if g.group_type.lower() in types_filter]
    return cast(
        "Response",
        build(
            types.ListGroupsResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            groups=tuple(
                build(
                    types.ListedGroup,
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type=g.group_type,
                )
                for g in listed
            ),
        ),
    )


SPEC = HandlerSpec(API_KEY, "ListGroups", 0, 5, handle)
