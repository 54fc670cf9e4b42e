"""DeleteShareGroupOffsets (key 92) v0: forget an empty share group's state for topics.

A group with members is NON_EMPTY_GROUP (top level); an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION on its entry.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, cast

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.broker.share.admin import delete_offsets
from tidelog.broker.share.wire import share_coordinator
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.delete_share_group_offsets.v0.request import (
        DeleteShareGroupOffsetsRequest as _DeleteShareGroupOffsetsRequestV0,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _DeleteShareGroupOffsetsRequestV0
    from kio.schema.delete_share_group_offsets.v0.response import (
        DeleteShareGroupOffsetsResponse as _DeleteShareGroupOffsetsResponseV0,
    )

    #: The response versions it answers (kio's classes).
    Response = _DeleteShareGroupOffsetsResponseV0


API_KEY = 92


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    sc = share_coordinator(ctx)
    group_id = str(request.group_id)
    results: list[tuple[str, uuid.UUID, ErrorCode]] = []
    message: str | None = None
    if sc is None:
        error = ErrorCode.coordinator_not_available
    elif not allowed(ctx, Operation.DELETE, GROUP, group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error, message, results = await delete_offsets(
            sc, group_id, [str(t.topic_name) for t in request.topics]
        )
    return cast(
        "Response",
        build(
            types.DeleteShareGroupOffsetsResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message,
            responses=tuple(
                build(
                    types.DeleteShareGroupOffsetsResponseTopic,
                    topic_name=name,
                    topic_id=tid,
                    error_code=code,
                    error_message=None,
                )
                for name, tid, code in results
            ),
        ),
    )


SPEC = HandlerSpec(API_KEY, "DeleteShareGroupOffsets", 0, 0, handle)
