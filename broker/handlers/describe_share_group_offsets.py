"""DescribeShareGroupOffsets (key 90) v0-1: share-partition start offsets (v1: and lag).

``topics`` null asks for every partition the group has state for. An unknown group is
GROUP_ID_NOT_FOUND; an unknown topic UNKNOWN_TOPIC_OR_PARTITION on its partitions.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, cast

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.broker.share.admin import PartitionOffset, describe_offsets, group_or_error
from tidelog.broker.share.wire import share_coordinator
from tidelog.broker.topics import LEADER_EPOCH
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.describe_share_group_offsets.v0.request import (
        DescribeShareGroupOffsetsRequest as _DescribeShareGroupOffsetsRequestV0,
    )
    from kio.schema.describe_share_group_offsets.v1.request import (
        DescribeShareGroupOffsetsRequest as _DescribeShareGroupOffsetsRequestV1,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _DescribeShareGroupOffsetsRequestV0 | _DescribeShareGroupOffsetsRequestV1
    from kio.schema.describe_share_group_offsets.v0.response import (
        DescribeShareGroupOffsetsResponse as _DescribeShareGroupOffsetsResponseV0,
    )
    from kio.schema.describe_share_group_offsets.v1.response import (
        DescribeShareGroupOffsetsResponse as _DescribeShareGroupOffsetsResponseV1,
    )

    #: The response versions it answers (kio's classes).
    Response = _DescribeShareGroupOffsetsResponseV0 | _DescribeShareGroupOffsetsResponseV1


API_KEY = 90


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    sc = share_coordinator(ctx)
    out = []
    for g in request.groups:
        group_id = str(g.group_id)
        error, message = ErrorCode.none, None
        offsets: list[PartitionOffset] = []
        if sc is None:
            error = ErrorCode.coordinator_not_available
        elif not allowed(ctx, Operation.DESCRIBE, GROUP, group_id):
            error = ErrorCode.group_authorization_failed
        else:
            group, error, message = group_or_error(sc, group_id)
            if group is not None or (
                sc.group_partitions(group_id) and sc.groups.host.other_group_type(group_id) is None
            ):
                error, message = ErrorCode.none, None
                wanted = (
                    None
                    if g.topics is None
                    else [(str(t.topic_name), [int(p) for p in t.partitions]) for t in g.topics]
                )
                offsets = describe_offsets(sc, group_id, wanted)
        by_topic: dict[str, list[PartitionOffset]] = {}
        for o in offsets:
            by_topic.setdefault(o.topic_name, []).append(o)
        out.append(
            build(
                types.DescribeShareGroupOffsetsResponseGroup,
                group_id=group_id,
                error_code=error,
                error_message=message,
                topics=tuple(
                    build(
                        types.DescribeShareGroupOffsetsResponseTopic,
                        topic_name=name,
                        topic_id=parts[0].topic_id if parts else uuid.UUID(int=0),
                        partitions=tuple(
                            build(
                                types.DescribeShareGroupOffsetsResponsePartition,
                                partition_index=o.partition,
                                start_offset=o.start_offset,
                                leader_epoch=LEADER_EPOCH if o.start_offset >= 0 else -1,
                                lag=o.lag,
                                error_code=o.error,
                                error_message=None,
                            )
                            for o in parts
                        ),
                    )
                    for name, parts in by_topic.items()
                ),
            )
        )
    return cast(
        "Response",
        build(
            types.DescribeShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, groups=tuple(out)
        ),
    )


SPEC = HandlerSpec(API_KEY, "DescribeShareGroupOffsets", 0, 1, handle)
