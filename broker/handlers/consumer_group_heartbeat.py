"""ConsumerGroupHeartbeat (key 68) v0-1: the member side of KIP-848 consumer groups.

Joins (member epoch 0), heartbeats, leaves (-1, static -2); the answer carries the member id
(v0: made by the coordinator; v1: the client's own), the member epoch, the heartbeat interval
and, when it changed, the member's assignment as topic ids and partitions. The protocol is in
``broker/group/consumer/coordinator.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tidelog.broker.group.consumer.heartbeat import HeartbeatRequest, owned_from_wire
from tidelog.broker.group.wire import (
    assignment_entity,
    client_host,
    coordinator,
    heartbeat_answer,
    ms,
)
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

if TYPE_CHECKING:
    from kio.schema.consumer_group_heartbeat.v0.request import (
        ConsumerGroupHeartbeatRequest as _ConsumerGroupHeartbeatRequestV0,
    )
    from kio.schema.consumer_group_heartbeat.v0.response import (
        ConsumerGroupHeartbeatResponse as _ConsumerGroupHeartbeatResponseV0,
    )
    from kio.schema.consumer_group_heartbeat.v1.request import (
        ConsumerGroupHeartbeatRequest as _ConsumerGroupHeartbeatRequestV1,
    )
    from kio.schema.consumer_group_heartbeat.v1.response import (
        ConsumerGroupHeartbeatResponse as _ConsumerGroupHeartbeatResponseV1,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _ConsumerGroupHeartbeatRequestV0 | _ConsumerGroupHeartbeatRequestV1
    Response = _ConsumerGroupHeartbeatResponseV0 | _ConsumerGroupHeartbeatResponseV1


API_KEY = 68


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    classic = coordinator(ctx)
    groups = None if classic is None else classic.consumer_groups
    if groups is None:
        return error_response(ctx, request, ErrorCode.coordinator_not_available)
    names = request.subscribed_topic_names
    result = await groups.heartbeat(
        HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=int(request.member_epoch),
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=ms(request.rebalance_timeout),
            subscribed_topic_names=None if names is None else tuple(str(n) for n in names),
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor,
            owned=owned_from_wire(request.topic_partitions),
            client_id=ctx.client_id or "",
            client_host=client_host(ctx),
            api_version=ctx.api_version,
        )
    )
    assignment = None
    if result.assignment is not None:
        assignment = assignment_entity(types, result.assignment)
    return cast(
        "Response",
        heartbeat_answer(
            types.ConsumerGroupHeartbeatResponse,
            result.error,
            result.message,
            result.member_id,
            result.member_epoch,
            result.heartbeat_interval_ms,
            assignment=assignment,
        ),
    )


def error_response(ctx: RequestContext, request: Request, code: ErrorCode) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    return cast(
        "Response",
        heartbeat_answer(
            types.ConsumerGroupHeartbeatResponse, code, None, None, -1, 0, assignment=None
        ),
    )


SPEC = HandlerSpec(API_KEY, "ConsumerGroupHeartbeat", 0, 1, handle)
