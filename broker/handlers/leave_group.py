"""LeaveGroup (API 13) v0-5: members leave; the group rebalances without them.

v0-2 name one member and answer one error; v3+ name a batch of members (KIP-345), by member id
or, for an administrative removal, by group instance id alone, and answer per member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tidelog.broker.group.results import MemberIdentity
from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.leave_group.v0.request import LeaveGroupRequest as _LeaveGroupRequestV0
    from kio.schema.leave_group.v1.request import LeaveGroupRequest as _LeaveGroupRequestV1
    from kio.schema.leave_group.v2.request import LeaveGroupRequest as _LeaveGroupRequestV2
    from kio.schema.leave_group.v3.request import LeaveGroupRequest as _LeaveGroupRequestV3
    from kio.schema.leave_group.v4.request import LeaveGroupRequest as _LeaveGroupRequestV4
    from kio.schema.leave_group.v5.request import LeaveGroupRequest as _LeaveGroupRequestV5

    #: The request versions this handler serves (kio's classes).
    Request = (
        _LeaveGroupRequestV0
        | _LeaveGroupRequestV1
        | _LeaveGroupRequestV2
        | _LeaveGroupRequestV3
        | _LeaveGroupRequestV4
        | _LeaveGroupRequestV5
    )
    from kio.schema.leave_group.v0.response import LeaveGroupResponse as _LeaveGroupResponseV0
    from kio.schema.leave_group.v1.response import LeaveGroupResponse as _LeaveGroupResponseV1
    from kio.schema.leave_group.v2.response import LeaveGroupResponse as _LeaveGroupResponseV2
    from kio.schema.leave_group.v3.response import LeaveGroupResponse as _LeaveGroupResponseV3
    from kio.schema.leave_group.v4.response import LeaveGroupResponse as _LeaveGroupResponseV4
    from kio.schema.leave_group.v5.response import LeaveGroupResponse as _LeaveGroupResponseV5

    #: The response versions it answers (kio's classes).
    Response = (
        _LeaveGroupResponseV0
        | _LeaveGroupResponseV1
        | _LeaveGroupResponseV2
        | _LeaveGroupResponseV3
        | _LeaveGroupResponseV4
        | _LeaveGroupResponseV5
    )


API_KEY = 13


def _identities(ctx: RequestContext, request: Request) -> list[MemberIdentity]:
    if not hasattr(request, "members"):  # v0-2: one member
        return [MemberIdentity(request.member_id)]
    return [MemberIdentity(m.member_id, m.group_instance_id) for m in request.members]


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    groups = coordinator(ctx)
    if not allowed(ctx, Operation.READ, GROUP, request.group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    if groups is None:
        return error_response(ctx, request, ErrorCode.coordinator_not_available)
    result = groups.leave_group(request.group_id, _identities(ctx, request))
    if ctx.api_version < 3:
        error = result.error
        if error is ErrorCode.none and result.members:
            error = result.members[0].error
        return cast(
            "Response", build(types.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error)
        )
    members = tuple(
        types.MemberResponse(
            member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error
        )
        for m in result.members
    )
    return cast(
        "Response",
        types.LeaveGroupResponse(
            throttle_time=NO_THROTTLE, error_code=result.error, members=members
        ),
    )


def error_response(ctx: RequestContext, request: Request, error_code: ErrorCode) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    return cast(
        "Response",
        build(
            types.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error_code, members=()
        ),
    )


SPEC = HandlerSpec(API_KEY, "LeaveGroup", 0, 5, handle)
