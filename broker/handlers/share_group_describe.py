"""ShareGroupDescribe (key 77) v1: a share group's state, epochs and members' assignments.

An unknown group, or one that is a classic or consumer group, is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.group.wire import (
    GROUP_OPERATIONS,
    NO_THROTTLE,
    UNSET_OPERATIONS,
    assignment_entity,
    undescribed_group,
)
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.broker.share.admin import group_or_error
from tidelog.broker.share.wire import share_coordinator
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.share_group_describe.v1.request import (
        ShareGroupDescribeRequest as _ShareGroupDescribeRequestV1,
    )
    from kio.schema.share_group_describe.v1.response import (
        ShareGroupDescribeResponse as _ShareGroupDescribeResponseV1,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _ShareGroupDescribeRequestV1
    Response = _ShareGroupDescribeResponseV1


API_KEY = 77


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    sc = share_coordinator(ctx)
    out = []
    for raw in request.group_ids:
        group_id = str(raw)
        if sc is None:
            out.append(_error(types, group_id, ErrorCode.coordinator_not_available, None))
            continue
        if not allowed(ctx, Operation.DESCRIBE, GROUP, group_id):
            out.append(_error(types, group_id, ErrorCode.group_authorization_failed, None))
            continue
        group, error, message = group_or_error(sc, group_id)
        if group is None:
            out.append(_error(types, group_id, error, message))
            continue
        names = {
            tid: info.name
            for m in group.members.values()
            for tid in m.assignment
            if (info := ctx.broker.topics.by_id(tid)) is not None
        }
        members = tuple(
            build(
                types.Member,
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(m.subscribed)),
                assignment=assignment_entity(types, m.assignment, names),
            )
            for m in group.members.values()
        )
        out.append(
            build(
                types.DescribedGroup,
                error_code=ErrorCode.none,
                error_message=None,
                group_id=group_id,
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name="simple",
                members=members,
                authorized_operations=(
                    GROUP_OPERATIONS if request.include_authorized_operations else UNSET_OPERATIONS
                ),
            )
        )
    return cast(
        "Response",
        build(types.ShareGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(out)),
    )


def _error(types: Any, group_id: str, code: ErrorCode, message: str | None) -> Any:
    # As Kafka: a share group's entry that carries an error has epochs 0, not -1.
    return undescribed_group(
        types, group_id, code, message, group_epoch=0, assignment_epoch=0, assignor_name=""
    )


SPEC = HandlerSpec(API_KEY, "ShareGroupDescribe", 1, 1, handle)
