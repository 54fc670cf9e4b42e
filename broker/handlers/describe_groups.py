"""DescribeGroups (API 15) v0-5: state, protocol and members of groups.

As Kafka: an unknown group is described as state "Dead" with no error; member metadata and the
protocol name are given only for a Stable group; assignments always. v3+ may ask for the
authorized operations (no authorizer here: READ, DELETE and DESCRIBE); v4+ shows members'
``group.instance.id``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tidelog.broker.group.results import DescribedGroup
from tidelog.broker.group.wire import (
    GROUP_OPERATIONS,
    NO_THROTTLE,
    UNSET_OPERATIONS,
    coordinator,
)
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.broker.share.wire import not_classic_if_share
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.describe_groups.v0.request import (
        DescribeGroupsRequest as _DescribeGroupsRequestV0,
    )
    from kio.schema.describe_groups.v1.request import (
        DescribeGroupsRequest as _DescribeGroupsRequestV1,
    )
    from kio.schema.describe_groups.v2.request import (
        DescribeGroupsRequest as _DescribeGroupsRequestV2,
    )
    from kio.schema.describe_groups.v3.request import (
        DescribeGroupsRequest as _DescribeGroupsRequestV3,
    )
    from kio.schema.describe_groups.v4.request import (
        DescribeGroupsRequest as _DescribeGroupsRequestV4,
    )
    from kio.schema.describe_groups.v5.request import (
        DescribeGroupsRequest as _DescribeGroupsRequestV5,
    )

    #: The request versions this handler serves (kio's classes).
    Request = (
        _DescribeGroupsRequestV0
        | _DescribeGroupsRequestV1
        | _DescribeGroupsRequestV2
        | _DescribeGroupsRequestV3
        | _DescribeGroupsRequestV4
        | _DescribeGroupsRequestV5
    )
    from kio.schema.describe_groups.v0.response import (
        DescribeGroupsResponse as _DescribeGroupsResponseV0,
    )
    from kio.schema.describe_groups.v1.response import (
        DescribeGroupsResponse as _DescribeGroupsResponseV1,
    )
    from kio.schema.describe_groups.v2.response import (
        DescribeGroupsResponse as _DescribeGroupsResponseV2,
    )
    from kio.schema.describe_groups.v3.response import (
        DescribeGroupsResponse as _DescribeGroupsResponseV3,
    )
    from kio.schema.describe_groups.v4.response import (
        DescribeGroupsResponse as _DescribeGroupsResponseV4,
    )
    from kio.schema.describe_groups.v5.response import (
        DescribeGroupsResponse as _DescribeGroupsResponseV5,
    )

    #: The response versions it answers (kio's classes).
    Response = (
        _DescribeGroupsResponseV0
        | _DescribeGroupsResponseV1
        | _DescribeGroupsResponseV2
        | _DescribeGroupsResponseV3
        | _DescribeGroupsResponseV4
        | _DescribeGroupsResponseV5
    )


API_KEY = 15


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    group_ids = [str(g) for g in request.groups]
    groups = coordinator(ctx)
    if groups is None:
        described = [
            DescribedGroup(g, ErrorCode.coordinator_not_available, state="") for g in group_ids
        ]
    else:
        described = groups.describe_groups(group_ids)
        described = [not_classic_if_share(ctx, d) for d in described]
    if ctx.broker.authorizer is not None:
        described = [
            d
            if allowed(ctx, Operation.DESCRIBE, GROUP, d.group_id)
            else DescribedGroup(d.group_id, ErrorCode.group_authorization_failed, state="")
            for d in described
        ]
    operations = (
        GROUP_OPERATIONS if getattr(request, "include_authorized_operations", False) else None
    )
    out = tuple(
        build(
            types.DescribedGroup,
            error_code=d.error,
            group_id=d.group_id,
            group_state=d.state,
            protocol_type=d.protocol_type,
            protocol_data=d.protocol_data,
            members=tuple(
                build(
                    types.DescribedGroupMember,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in d.members
            ),
            authorized_operations=(
                operations
                if operations is not None and d.error is ErrorCode.none
                else UNSET_OPERATIONS
            ),
        )
        for d in described
    )
    return cast(
        "Response", build(types.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=out)
    )


SPEC = HandlerSpec(API_KEY, "DescribeGroups", 0, 5, handle)
