"""ListOffsets (key 2) v1-8: offsets by special timestamp or by time.

-1 (latest): the HW, or with isolation level 1 (READ_COMMITTED, v2+) the last stable offset;
-2 (earliest) and -4 (earliest local, v8+): the log start offset; -3 (max timestamp, v7+): the
offset and timestamp of the record with the largest timestamp; t >= 0: the first offset whose
timestamp is >= t, below the HW (READ_COMMITTED: the LSO), else offset -1 and timestamp -1.
Time look-ups read index and segment files, so they run in the worker pool.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import TOPIC, Operation, allowed
from tidelog.broker.topics import LEADER_EPOCH
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.protocol.schema import build, response_types
from tidelog.storage.errors import StorageError

if TYPE_CHECKING:
    from kio.schema.list_offsets.v1.request import ListOffsetsRequest as _ListOffsetsRequestV1
    from kio.schema.list_offsets.v2.request import ListOffsetsRequest as _ListOffsetsRequestV2
    from kio.schema.list_offsets.v3.request import ListOffsetsRequest as _ListOffsetsRequestV3
    from kio.schema.list_offsets.v4.request import ListOffsetsRequest as _ListOffsetsRequestV4
    from kio.schema.list_offsets.v5.request import ListOffsetsRequest as _ListOffsetsRequestV5
    from kio.schema.list_offsets.v6.request import ListOffsetsRequest as _ListOffsetsRequestV6
    from kio.schema.list_offsets.v7.request import ListOffsetsRequest as _ListOffsetsRequestV7
    from kio.schema.list_offsets.v8.request import ListOffsetsRequest as _ListOffsetsRequestV8

    #: The request versions this handler serves (kio's classes).
    Request = (
        _ListOffsetsRequestV1
        | _ListOffsetsRequestV2
        | _ListOffsetsRequestV3
        | _ListOffsetsRequestV4
        | _ListOffsetsRequestV5
        | _ListOffsetsRequestV6
        | _ListOffsetsRequestV7
        | _ListOffsetsRequestV8
    )
    from kio.schema.list_offsets.v1.response import ListOffsetsResponse as _ListOffsetsResponseV1
    from kio.schema.list_offsets.v2.response import ListOffsetsResponse as _ListOffsetsResponseV2
    from kio.schema.list_offsets.v3.response import ListOffsetsResponse as _ListOffsetsResponseV3
    from kio.schema.list_offsets.v4.response import ListOffsetsResponse as _ListOffsetsResponseV4
    from kio.schema.list_offsets.v5.response import ListOffsetsResponse as _ListOffsetsResponseV5
    from kio.schema.list_offsets.v6.response import ListOffsetsResponse as _ListOffsetsResponseV6
    from kio.schema.list_offsets.v7.response import ListOffsetsResponse as _ListOffsetsResponseV7
    from kio.schema.list_offsets.v8.response import ListOffsetsResponse as _ListOffsetsResponseV8

    #: The response versions it answers (kio's classes).
    Response = (
        _ListOffsetsResponseV1
        | _ListOffsetsResponseV2
        | _ListOffsetsResponseV3
        | _ListOffsetsResponseV4
        | _ListOffsetsResponseV5
        | _ListOffsetsResponseV6
        | _ListOffsetsResponseV7
        | _ListOffsetsResponseV8
    )


API_KEY = 2
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4


async def _lookup(
    ctx: RequestContext, topic: str, partition: int, timestamp: int, read_committed: bool = False
) -> tuple[ErrorCode, int, int]:
    """(error, offset, timestamp) for one partition."""
    partition_log = ctx.broker.topics.get_log(topic, partition)
    if partition_log is None:
        return ErrorCode.unknown_topic_or_partition, -1, -1
    # Kafka's lastFetchableOffset
    fetchable = partition_log.last_stable_offset if read_committed else partition_log.high_watermark
    if timestamp == LATEST:
        return ErrorCode.none, fetchable, -1
    if timestamp == EARLIEST or (timestamp == EARLIEST_LOCAL and ctx.api_version >= 8):
        return ErrorCode.none, partition_log.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP and ctx.api_version >= 7:
        try:
            found = await ctx.broker.run_blocking(partition_log.offset_of_max_timestamp)
        except StorageError as exc:
            return error_code_for(exc.error_name), -1, -1
        if found is None:
            return ErrorCode.none, -1, -1
        return ErrorCode.none, found[0], found[1]
    if timestamp < 0:
        return ErrorCode.invalid_request, -1, -1
    try:
        found = await ctx.broker.run_blocking(partition_log.offset_for_timestamp, timestamp)
    except StorageError as exc:
        return error_code_for(exc.error_name), -1, -1
    if found is None or found[0] >= fetchable:
        return ErrorCode.none, -1, -1
    return ErrorCode.none, found[0], found[1]


def _partition(types: Any, index: int, code: ErrorCode, offset: int, timestamp: int) -> Any:
    return build(
        types.ListOffsetsPartitionResponse,
        partition_index=index,
        error_code=code,
        timestamp=timestamp,
        offset=offset,
        leader_epoch=LEADER_EPOCH if code == ErrorCode.none and offset >= 0 else -1,
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    read_committed = int(getattr(request, "isolation_level", 0)) == 1
    topics = []
    for t in request.topics:
        parts = []
        may_describe = allowed(ctx, Operation.DESCRIBE, TOPIC, t.name)
        for p in t.partitions:
            if not may_describe:
                code, offset, ts = ErrorCode.topic_authorization_failed, -1, -1
                parts.append(_partition(types, int(p.partition_index), code, offset, ts))
                continue
            code, offset, ts = await _lookup(
                ctx, t.name, int(p.partition_index), int(p.timestamp), read_committed
            )
            parts.append(_partition(types, int(p.partition_index), code, offset, ts))
        topics.append(types.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return cast(
        "Response",
        build(types.ListOffsetsResponse, throttle_time=timedelta(0), topics=tuple(topics)),
    )


def error_response(ctx: RequestContext, request: Request, code: ErrorCode) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    topics = tuple(
        types.ListOffsetsTopicResponse(
            name=t.name,
            partitions=tuple(
                _partition(types, int(p.partition_index), code, -1, -1) for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return cast(
        "Response", build(types.ListOffsetsResponse, throttle_time=timedelta(0), topics=topics)
    )


SPEC = HandlerSpec(api_key=API_KEY, name="ListOffsets", min_version=1, max_version=8, handle=handle)
