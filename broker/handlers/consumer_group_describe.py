"""ConsumerGroupDescribe (key 69) v0-1: consumer groups with their epochs and members.

Per group: state (Empty, Assigning, Reconciling, Stable), group epoch, assignment epoch, the
assignor, and each member with its epoch, subscription, current assignment and target
assignment (topic id, name, partitions); v1 adds the member type (1: consumer protocol). An
unknown group answers GROUP_ID_NOT_FOUND "Group X not found."; a classic group "Group X is not a
consumer group.", as Kafka 4 does.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from tidelog.broker.group.consumer.model import ConsumerGroup
from tidelog.broker.group.modern import group_not_found
from tidelog.broker.group.wire import (
    GROUP_OPERATIONS,
    NO_THROTTLE,
    UNSET_OPERATIONS,
    assignment_entity,
    coordinator,
    undescribed_group,
)
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.consumer_group_describe.v0.request import (
        ConsumerGroupDescribeRequest as _ConsumerGroupDescribeRequestV0,
    )
    from kio.schema.consumer_group_describe.v1.request import (
        ConsumerGroupDescribeRequest as _ConsumerGroupDescribeRequestV1,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _ConsumerGroupDescribeRequestV0 | _ConsumerGroupDescribeRequestV1


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


async def handle(ctx: RequestContext, request: Request) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    classic = coordinator(ctx)
    groups = None if classic is None else classic.consumer_groups
    out = []
    inactive = (
        ErrorCode.coordinator_not_available
        if classic is None
        else classic.metadata_log.inactive_error()
    )
    names = groups.topic_names() if groups is not None else {}
    for group_id in request.group_ids:
        if inactive is not None or groups is None:
            out.append(
                _error(types, group_id, inactive or ErrorCode.coordinator_not_available, None)
            )
            continue
        group = groups.describe(group_id)
        if group is None:
            message = group_not_found(
                group_id, "consumer", classic is not None and group_id in classic.groups
            )
            out.append(_error(types, group_id, ErrorCode.group_id_not_found, message))
            continue
        ops = bool(request.include_authorized_operations)
        out.append(_group(types, group, groups.assignor_name(group), names, ops))
    return build(types.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(out))


def error_response(ctx: RequestContext, request: Request, code: ErrorCode) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    return build(
        types.ConsumerGroupDescribeResponse,
        throttle_time=NO_THROTTLE,
        groups=tuple(_error(types, g, code, None) for g in request.group_ids),
    )


SPEC = HandlerSpec(API_KEY, "ConsumerGroupDescribe", 0, 1, handle)
