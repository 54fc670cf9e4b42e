"""ListGroups (API 16) v0-5: every group this coordinator knows, with its protocol type.

v4 adds a case-insensitive state filter (KIP-518) and each group's state in the answer; v5
(KIP-848) a case-insensitive group type filter ("classic", "consumer", "share") and each
group's type.
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.group.results import ListedGroup
from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import CLUSTER, GROUP, Operation, allowed
from tidelog.broker.share.wire import share_listed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

API_KEY = 16


async def handle(ctx: RequestContext, request: Any) -> Any:
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
    return build(
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
    )


SPEC = HandlerSpec(API_KEY, "ListGroups", 0, 5, handle)
