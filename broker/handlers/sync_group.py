"""SyncGroup (API 14) v0-5: the leader hands out assignments; everyone receives theirs.

Parked in CompletingRebalance until the leader's assignment is stored in
``__consumer_offsets``; answered at once in Stable. v3+ carries ``group.instance.id``; v5 adds
the protocol type and name, checked against the group's (INCONSISTENT_GROUP_PROTOCOL) and
echoed in the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tidelog.broker.group.results import SyncGroupResult
from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.sync_group.v0.request import SyncGroupRequest as _SyncGroupRequestV0
    from kio.schema.sync_group.v1.request import SyncGroupRequest as _SyncGroupRequestV1
    from kio.schema.sync_group.v2.request import SyncGroupRequest as _SyncGroupRequestV2
    from kio.schema.sync_group.v3.request import SyncGroupRequest as _SyncGroupRequestV3
    from kio.schema.sync_group.v4.request import SyncGroupRequest as _SyncGroupRequestV4
    from kio.schema.sync_group.v5.request import SyncGroupRequest as _SyncGroupRequestV5

    #: The request versions this handler serves (kio's classes).
    Request = (
        _SyncGroupRequestV0
        | _SyncGroupRequestV1
        | _SyncGroupRequestV2
        | _SyncGroupRequestV3
        | _SyncGroupRequestV4
        | _SyncGroupRequestV5
    )
    from kio.schema.sync_group.v0.response import SyncGroupResponse as _SyncGroupResponseV0
    from kio.schema.sync_group.v1.response import SyncGroupResponse as _SyncGroupResponseV1
    from kio.schema.sync_group.v2.response import SyncGroupResponse as _SyncGroupResponseV2
    from kio.schema.sync_group.v3.response import SyncGroupResponse as _SyncGroupResponseV3
    from kio.schema.sync_group.v4.response import SyncGroupResponse as _SyncGroupResponseV4
    from kio.schema.sync_group.v5.response import SyncGroupResponse as _SyncGroupResponseV5

    #: The response versions it answers (kio's classes).
    Response = (
        _SyncGroupResponseV0
        | _SyncGroupResponseV1
        | _SyncGroupResponseV2
        | _SyncGroupResponseV3
        | _SyncGroupResponseV4
        | _SyncGroupResponseV5
    )


API_KEY = 14


def _response(ctx: RequestContext, result: SyncGroupResult) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    return cast(
        "Response",
        build(
            types.SyncGroupResponse,
            throttle_time=NO_THROTTLE,
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        ),
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    groups = coordinator(ctx)
    if not allowed(ctx, Operation.READ, GROUP, request.group_id):
        return _response(ctx, SyncGroupResult(ErrorCode.group_authorization_failed))
    if groups is None:
        return _response(ctx, SyncGroupResult(ErrorCode.coordinator_not_available))
    result = await groups.sync_group(
        request.group_id,
        int(request.generation_id),
        request.member_id,
        getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        {a.member_id: a.assignment for a in request.assignments},
    )
    return _response(ctx, result)


def error_response(ctx: RequestContext, request: Request, error_code: ErrorCode) -> Response:
    return _response(ctx, SyncGroupResult(error_code))


SPEC = HandlerSpec(API_KEY, "SyncGroup", 0, 5, handle)
