"""AlterShareGroupOffsets (key 91) v0: reset an empty share group's start offsets.

A group with members is NON_EMPTY_GROUP (top level); a classic or consumer group id
GROUP_ID_NOT_FOUND; an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION. The offset is
clamped to the partition's [log start, HW] as Kafka's reset tool does.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, Operation, allowed
from tidelog.broker.share.admin import alter_offsets
from tidelog.broker.share.wire import share_coordinator
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.alter_share_group_offsets.v0.request import (
        AlterShareGroupOffsetsRequest as _AlterShareGroupOffsetsRequestV0,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _AlterShareGroupOffsetsRequestV0
    from kio.schema.alter_share_group_offsets.v0.response import (
        AlterShareGroupOffsetsResponse as _AlterShareGroupOffsetsResponseV0,
    )

    #: The response versions it answers (kio's classes).
    Response = _AlterShareGroupOffsetsResponseV0


API_KEY = 91


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    sc = share_coordinator(ctx)
    group_id = str(request.group_id)
    if sc is None:
        return _answer(types, ErrorCode.coordinator_not_available, None, [])
    if not allowed(ctx, Operation.READ, GROUP, group_id):
        return _answer(types, ErrorCode.group_authorization_failed, None, [])
    wanted = [
        (str(t.topic_name), [(int(p.partition_index), int(p.start_offset)) for p in t.partitions])
        for t in request.topics
    ]
    error, message, results = await alter_offsets(sc, group_id, wanted)
    return _answer(types, error, message, results)


def _answer(
    types: Any,
    error: ErrorCode,
    message: str | None,
    results: list[tuple[str, uuid.UUID, int, ErrorCode]],
) -> Response:
    by_topic: dict[str, list[tuple[str, uuid.UUID, int, ErrorCode]]] = {}
    for r in results:
        by_topic.setdefault(r[0], []).append(r)
    return cast(
        "Response",
        build(
            types.AlterShareGroupOffsetsResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message,
            responses=tuple(
                build(
                    types.AlterShareGroupOffsetsResponseTopic,
                    topic_name=name,
                    topic_id=rows[0][1],
                    partitions=tuple(
                        build(
                            types.AlterShareGroupOffsetsResponsePartition,
                            partition_index=p,
                            error_code=code,
                            error_message=None,
                        )
                        for _n, _t, p, code in rows
                    ),
                )
                for name, rows in by_topic.items()
            ),
        ),
    )


SPEC = HandlerSpec(API_KEY, "AlterShareGroupOffsets", 0, 0, handle)
