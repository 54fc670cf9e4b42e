"""OffsetDelete (API 47) v0: delete a group's committed offsets of some partitions (KIP-496).

Allowed for an empty group, and for a consumer group's topics it no longer subscribes to
(GROUP_SUBSCRIBED_TO_TOPIC for the others); a non-empty group of another protocol type is
NON_EMPTY_GROUP. Deleted offsets are written as tombstones.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.group.results import OffsetDeleteResult, PartitionError
from tidelog.broker.group.wire import coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, TOPIC, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

if TYPE_CHECKING:
    from kio.schema.offset_delete.v0.request import OffsetDeleteRequest as Request
    from kio.schema.offset_delete.v0.response import OffsetDeleteResponse as Response
API_KEY = 47


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    groups = coordinator(ctx)
    wanted = [(t.name, [int(p.partition_index) for p in t.partitions]) for t in request.topics]
    if not allowed(ctx, Operation.DELETE, GROUP, request.group_id):
        result = OffsetDeleteResult(ErrorCode.group_authorization_failed)
    elif groups is None:
        result = OffsetDeleteResult(ErrorCode.coordinator_not_available)
    else:
        denied: list[PartitionError] = []
        if ctx.broker.authorizer is not None:  # Kafka: READ on each topic
            readable = [(t, ps) for t, ps in wanted if allowed(ctx, Operation.READ, TOPIC, t)]
            error = ErrorCode.topic_authorization_failed
            denied = [
                PartitionError(t, p, error)
                for t, ps in wanted
                if (t, ps) not in readable
                for p in ps
            ]
            wanted = readable
        result = await groups.delete_offsets(request.group_id, wanted)
        if denied:
            result = OffsetDeleteResult(result.error, (*result.partitions, *denied))
    by_topic: dict[str, list[Any]] = {}
    for p in result.partitions:
        by_topic.setdefault(p.topic, []).append(
            types.OffsetDeleteResponsePartition(partition_index=p.partition, error_code=p.error)
        )
    return cast(
        "Response",
        types.OffsetDeleteResponse(
            error_code=result.error,
            throttle_time=timedelta(0),
            topics=tuple(
                types.OffsetDeleteResponseTopic(name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
        ),
    )


SPEC = HandlerSpec(API_KEY, "OffsetDelete", 0, 0, handle)
