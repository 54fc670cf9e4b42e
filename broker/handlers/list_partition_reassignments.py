"""ListPartitionReassignments (key 46) v0: ongoing reassignments - never any on one node.

AlterPartitionReassignments completes at once (the only valid target is the current replica),
so the answer is always an empty list; topics asked for that do not exist are left out, as
Kafka's ReplicationControlManager leaves them out.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.list_partition_reassignments.v0.request import (
        ListPartitionReassignmentsRequest as Request,
    )
    from kio.schema.list_partition_reassignments.v0.response import (
        ListPartitionReassignmentsResponse as Response,
    )


API_KEY = 46


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    return cast(
        "Response",
        build(
            types.ListPartitionReassignmentsResponse,
            throttle_time=timedelta(0),
            error_code=ErrorCode.none,
            error_message=None,
            topics=(),
        ),
    )


SPEC = HandlerSpec(
    api_key=API_KEY, name="ListPartitionReassignments", min_version=0, max_version=0, handle=handle
)
