"""ConsumerGroupDescribe (key 69) v0-1: consumer groups with their epochs and members.

Per group: state (Empty, Assigning, Reconciling, Stable), group epoch, assignment epoch, the
assignor, and each member with its epoch, subscription, current assignment and target
assignment (topic id, name, partitions); v1 adds the member type (1: consumer protocol). An
unknown group answers GROUP_ID_NOT_FOUND "Group X not found."; a classic group "Group X is not a
consumer group.", as Kafka 4 does.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.group.consumer.model import ConsumerGroup
from tidelog.broker.group.modern import group_not_found
from tidelog.broker.group.wire import (
    GROUP_OPERATIONS,
    NO_THROTTLE,
    UNSET_OPERATIONS,
    assignment_entity,
    coordinator,
    described_groups,
    undescribed_group,
)
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.consumer_group_describe.v0.request import (
        ConsumerGroupDescribeRequest as _ConsumerGroupDescribeRequestV0,
    )
    from kio.schema.consumer_group_describe.v0.response import (
        ConsumerGroupDescribeResponse as _ConsumerGroupDescribeResponseV0,
    )
    from kio.schema.consumer_group_describe.v1.request import (
        ConsumerGroupDescribeRequest as _ConsumerGroupDescribeRequestV1,
    )
    from kio.schema.consumer_group_describe.v1.response import (
        ConsumerGroupDescribeResponse as _ConsumerGroupDescribeResponseV1,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _ConsumerGroupDescribeRequestV0 | _ConsumerGroupDescribeRequestV1
    Response = _ConsumerGroupDescribeResponseV0 | _ConsumerGroupDescribeResponseV1


API_KEY = 69
MEMBER_TYPE_CONSUMER = 1


def _group(
    types: Any, group: ConsumerGroup, assignor: str, names: dict[uuid.UUID, str], ops: bool
) -> Any:
    return build(
        types.DescribedGroup,
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=assignor,
        members=tuple(
            build(
                types.Member,
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=assignment_entity(types, m.assigned, names, by_name=True),
                target_assignment=assignment_entity(
                    types, group.target.get(m.member_id, {}), names, by_name=True
                ),
                member_type=MEMBER_TYPE_CONSUMER,
            )
            for m in group.members.values()
        ),
        authorized_operations=GROUP_OPERATIONS if ops else UNSET_OPERATIONS,
    )


def _error(types: Any, group_id: str, code: ErrorCode, message: str | None) -> Any:
    return undescribed_group(types, group_id, code, message, assignor_name="")


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    classic = coordinator(ctx)
    groups = None if classic is None else classic.consumer_groups
    if classic is None or groups is None:
        return error_response(ctx, request, ErrorCode.coordinator_not_available)
    names = groups.topic_names()
    ops = bool(request.include_authorized_operations)
    out = described_groups(
        request.group_ids,
        classic.metadata_log.inactive_error(),
        groups.describe,
        lambda group_id: group_not_found(group_id, "consumer", group_id in classic.groups),
        lambda group: _group(types, group, groups.assignor_name(group), names, ops),
        lambda group_id, code, message: _error(types, group_id, code, message),
    )
    return _response(types, out)


def _response(types: Any, groups: tuple[Any, ...]) -> Response:
    return cast(
        "Response",
        build(types.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=groups),
    )


def error_response(ctx: RequestContext, request: Request, code: ErrorCode) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    return _response(types, tuple(_error(types, g, code, None) for g in request.group_ids))


SPEC = HandlerSpec(API_KEY, "ConsumerGroupDescribe", 0, 1, handle)
