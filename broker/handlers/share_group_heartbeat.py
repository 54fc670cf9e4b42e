"""ShareGroupHeartbeat (key 76) v1: join (epoch 0), heartbeat, leave (-1) a share group.

The answer carries the member epoch, the heartbeat interval and, when it changed, the member's
assignment (topic ids and partitions). Membership is ``broker/share/groups.py``. READ on the
group and DESCRIBE on each subscribed topic are checked, as Kafka does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.group.wire import assignment_entity, client_host, heartbeat_answer
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, TOPIC, Operation, allowed
from tidelog.broker.share.wire import share_coordinator
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

if TYPE_CHECKING:
    from kio.schema.share_group_heartbeat.v1.request import (
        ShareGroupHeartbeatRequest as _ShareGroupHeartbeatRequestV1,
    )
    from kio.schema.share_group_heartbeat.v1.response import (
        ShareGroupHeartbeatResponse as _ShareGroupHeartbeatResponseV1,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _ShareGroupHeartbeatRequestV1
    Response = _ShareGroupHeartbeatResponseV1


API_KEY = 76


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    coordinator = share_coordinator(ctx)
    if coordinator is None:
        return _answer(types, ErrorCode.coordinator_not_available, None, None, 0, 0, None)
    if not allowed(ctx, Operation.READ, GROUP, str(request.group_id)):
        return _answer(types, ErrorCode.group_authorization_failed, None, None, 0, 0, None)
    names = request.subscribed_topic_names
    if names and not all(allowed(ctx, Operation.DESCRIBE, TOPIC, str(n)) for n in set(names)):
        # As Kafka: DESCRIBE on every subscribed topic, else TOPIC_AUTHORIZATION_FAILED.
        return _answer(types, ErrorCode.topic_authorization_failed, None, None, 0, 0, None)
    result = await coordinator.groups.heartbeat(
        str(request.group_id),
        str(request.member_id),
        int(request.member_epoch),
        request.rack_id,
        None if names is None else tuple(str(n) for n in names),
        ctx.client_id or "",
        client_host(ctx),
    )
    if result.error is not ErrorCode.none:
        # As Kafka: an error answer carries only the code and message (epoch 0, no member id).
        return _answer(types, result.error, result.message, None, 0, 0, None)
    assignment = None
    if result.assignment is not None:
        assignment = assignment_entity(types, result.assignment)
    return _answer(
        types,
        result.error,
        result.message,
        result.member_id,
        result.member_epoch,
        result.heartbeat_interval_ms,
        assignment,
    )


def _answer(
    types: Any,
    error: ErrorCode,
    message: str | None,
    member_id: str | None,
    member_epoch: int,
    interval_ms: int,
    assignment: Any,
) -> Response:
    return cast(
        "Response",
        heartbeat_answer(
            types.ShareGroupHeartbeatResponse,
            error,
            message,
            member_id,
            member_epoch,
            interval_ms,
            assignment=assignment,
        ),
    )


SPEC = HandlerSpec(API_KEY, "ShareGroupHeartbeat", 1, 1, handle)
