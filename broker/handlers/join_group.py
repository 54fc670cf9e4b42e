"""JoinGroup (API 11) v0-9: join a classic group; answered when the rebalance completes.

Version differences kept: v0 has no rebalance timeout (the session timeout stands in); v4+ makes
a new member without an id rejoin with the one it is given (MEMBER_ID_REQUIRED, KIP-394); v5+
carries ``group.instance.id`` (static membership, KIP-345); v7+ answers the protocol type and a
nullable protocol name; v9 lets a static leader skip a needless assignment (KIP-814). The
coordinator (``broker.group``) holds the parked request until the join phase ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tidelog.broker.group.membership import JoinRequest
from tidelog.broker.group.results import JoinGroupResult, Protocol
from tidelog.broker.group.wire import NO_THROTTLE, client_host, coordinator, ms
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.join_group.v0.request import JoinGroupRequest as _JoinGroupRequestV0
    from kio.schema.join_group.v1.request import JoinGroupRequest as _JoinGroupRequestV1
    from kio.schema.join_group.v2.request import JoinGroupRequest as _JoinGroupRequestV2
    from kio.schema.join_group.v3.request import JoinGroupRequest as _JoinGroupRequestV3
    from kio.schema.join_group.v4.request import JoinGroupRequest as _JoinGroupRequestV4
    from kio.schema.join_group.v5.request import JoinGroupRequest as _JoinGroupRequestV5
    from kio.schema.join_group.v6.request import JoinGroupRequest as _JoinGroupRequestV6
    from kio.schema.join_group.v7.request import JoinGroupRequest as _JoinGroupRequestV7
    from kio.schema.join_group.v8.request import JoinGroupRequest as _JoinGroupRequestV8
    from kio.schema.join_group.v9.request import JoinGroupRequest as _JoinGroupRequestV9

    #: The request versions this handler serves (kio's classes).
    Request = (
        _JoinGroupRequestV0
        | _JoinGroupRequestV1
        | _JoinGroupRequestV2
        | _JoinGroupRequestV3
        | _JoinGroupRequestV4
        | _JoinGroupRequestV5
        | _JoinGroupRequestV6
        | _JoinGroupRequestV7
        | _JoinGroupRequestV8
        | _JoinGroupRequestV9
    )
    from kio.schema.join_group.v0.response import JoinGroupResponse as _JoinGroupResponseV0
    from kio.schema.join_group.v1.response import JoinGroupResponse as _JoinGroupResponseV1
    from kio.schema.join_group.v2.response import JoinGroupResponse as _JoinGroupResponseV2
    from kio.schema.join_group.v3.response import JoinGroupResponse as _JoinGroupResponseV3
    from kio.schema.join_group.v4.response import JoinGroupResponse as _JoinGroupResponseV4
    from kio.schema.join_group.v5.response import JoinGroupResponse as _JoinGroupResponseV5
    from kio.schema.join_group.v6.response import JoinGroupResponse as _JoinGroupResponseV6
    from kio.schema.join_group.v7.response import JoinGroupResponse as _JoinGroupResponseV7
    from kio.schema.join_group.v8.response import JoinGroupResponse as _JoinGroupResponseV8
    from kio.schema.join_group.v9.response import JoinGroupResponse as _JoinGroupResponseV9

    #: The response versions it answers (kio's classes).
    Response = (
        _JoinGroupResponseV0
        | _JoinGroupResponseV1
        | _JoinGroupResponseV2
        | _JoinGroupResponseV3
        | _JoinGroupResponseV4
        | _JoinGroupResponseV5
        | _JoinGroupResponseV6
        | _JoinGroupResponseV7
        | _JoinGroupResponseV8
        | _JoinGroupResponseV9
    )


API_KEY = 11


def _response(ctx: RequestContext, result: JoinGroupResult) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    nullable = ctx.api_version >= 7
    members = tuple(
        build(
            types.JoinGroupResponseMember,
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            metadata=m.metadata,
        )
        for m in result.members
    )
    return cast(
        "Response",
        build(
            types.JoinGroupResponse,
            throttle_time=NO_THROTTLE,
            error_code=result.error,
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name if nullable else (result.protocol_name or ""),
            leader=result.leader,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=members,
        ),
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    groups = coordinator(ctx)
    if not allowed(ctx, Operation.READ, GROUP, request.group_id):
        return _response(
            ctx, JoinGroupResult(ErrorCode.group_authorization_failed, request.member_id)
        )
    if groups is None:
        return _response(
            ctx, JoinGroupResult(ErrorCode.coordinator_not_available, request.member_id)
        )
    session_ms = ms(request.session_timeout)
    rebalance_ms = ms(getattr(request, "rebalance_timeout", None))
    if ctx.api_version == 0 or rebalance_ms < 0:
        rebalance_ms = session_ms
    result = await groups.join_group(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            protocol_type=request.protocol_type,
            protocols=tuple(Protocol(p.name, p.metadata) for p in request.protocols),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            group_instance_id=getattr(request, "group_instance_id", None),
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
            require_known_member_id=ctx.api_version >= 4,
            supports_skip_assignment=ctx.api_version >= 9,
        )
    )
    return _response(ctx, result)


def error_response(ctx: RequestContext, request: Request, error_code: ErrorCode) -> Response:
    return _response(ctx, JoinGroupResult(error_code, request.member_id))


SPEC = HandlerSpec(API_KEY, "JoinGroup", 0, 9, handle)
