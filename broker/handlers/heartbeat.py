"""Heartbeat (API 12) v0-4: keep a member's session alive; learn of rebalances.

NONE in Stable and CompletingRebalance, REBALANCE_IN_PROGRESS while the group prepares a
rebalance (the member must rejoin), ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
FENCED_INSTANCE_ID (v3+ static members) otherwise. Answered at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.heartbeat.v0.request import HeartbeatRequest as _HeartbeatRequestV0
    from kio.schema.heartbeat.v1.request import HeartbeatRequest as _HeartbeatRequestV1
    from kio.schema.heartbeat.v2.request import HeartbeatRequest as _HeartbeatRequestV2
    from kio.schema.heartbeat.v3.request import HeartbeatRequest as _HeartbeatRequestV3
    from kio.schema.heartbeat.v4.request import HeartbeatRequest as _HeartbeatRequestV4

    #: The request versions this handler serves (kio's classes).
    Request = (
        _HeartbeatRequestV0
        | _HeartbeatRequestV1
        | _HeartbeatRequestV2
        | _HeartbeatRequestV3
        | _HeartbeatRequestV4
    )
    from kio.schema.heartbeat.v0.response import HeartbeatResponse as _HeartbeatResponseV0
    from kio.schema.heartbeat.v1.response import HeartbeatResponse as _HeartbeatResponseV1
    from kio.schema.heartbeat.v2.response import HeartbeatResponse as _HeartbeatResponseV2
    from kio.schema.heartbeat.v3.response import HeartbeatResponse as _HeartbeatResponseV3
    from kio.schema.heartbeat.v4.response import HeartbeatResponse as _HeartbeatResponseV4

    #: The response versions it answers (kio's classes).
    Response = (
        _HeartbeatResponseV0
        | _HeartbeatResponseV1
        | _HeartbeatResponseV2
        | _HeartbeatResponseV3
        | _HeartbeatResponseV4
    )


API_KEY = 12


async def handle(ctx: RequestContext, request: Request) -> Response:
    groups = coordinator(ctx)
    if not allowed(ctx, Operation.READ, GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    elif groups is None:
        error = ErrorCode.coordinator_not_available
    else:
        error = groups.heartbeat(
            request.group_id,
            int(request.generation_id),
            request.member_id,
            getattr(request, "group_instance_id", None),
        )
    types = response_types(API_KEY, ctx.api_version)
    return cast(
        "Response", build(types.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error)
    )


SPEC = HandlerSpec(API_KEY, "Heartbeat", 0, 4, handle)
