"""DeleteRecords (API 21) v0-2: raise partitions' log start offsets.

Kafka behaviour kept (ReplicaManager.deleteRecordsOnLocalLog, Partition.deleteRecordsOnLeader):

- ``offset`` -1 means the high watermark; a negative offset or one above the HW is
  OFFSET_OUT_OF_RANGE; one at or below the current log start changes nothing;
- the answer's ``low_watermark`` is the partition's log start offset afterwards (-1 on error);
- an internal topic is INVALID_TOPIC_EXCEPTION; a topic whose ``cleanup.policy`` lacks
  ``delete`` is POLICY_VIOLATION; an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION;
- one replica, so nothing to wait for: the answer is sent as soon as the offset moved.

Consumers fetching below the new start get OFFSET_OUT_OF_RANGE and reset; ListOffsets -2 and
Fetch's ``log_start_offset`` report it at once. Segments wholly below it are deleted by the next
retention pass; the offset itself survives a restart through the log-start-offset checkpoint.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import TOPIC, Operation, allowed
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.protocol.schema import response_types
from tidelog.storage.errors import StorageError

if TYPE_CHECKING:
    from kio.schema.delete_records.v0.request import DeleteRecordsRequest as _DeleteRecordsRequestV0
    from kio.schema.delete_records.v1.request import DeleteRecordsRequest as _DeleteRecordsRequestV1
    from kio.schema.delete_records.v2.request import DeleteRecordsRequest as _DeleteRecordsRequestV2

    #: The request versions this handler serves (kio's classes).
    Request = _DeleteRecordsRequestV0 | _DeleteRecordsRequestV1 | _DeleteRecordsRequestV2
    from kio.schema.delete_records.v0.response import (
        DeleteRecordsResponse as _DeleteRecordsResponseV0,
    )
    from kio.schema.delete_records.v1.response import (
        DeleteRecordsResponse as _DeleteRecordsResponseV1,
    )
    from kio.schema.delete_records.v2.response import (
        DeleteRecordsResponse as _DeleteRecordsResponseV2,
    )

    #: The response versions it answers (kio's classes).
    Response = _DeleteRecordsResponseV0 | _DeleteRecordsResponseV1 | _DeleteRecordsResponseV2


API_KEY = 21
DELETE_TO_HIGH_WATERMARK = -1


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, low_watermark = await _delete(ctx, topic.name, p.partition_index, p.offset)
            partitions.append(
                types.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index,
                    low_watermark=low_watermark,
                    error_code=code,
                )
            )
        topics.append(types.DeleteRecordsTopicResult(name=topic.name, partitions=tuple(partitions)))
    return cast(
        "Response", types.DeleteRecordsResponse(throttle_time=timedelta(0), topics=tuple(topics))
    )


async def _delete(
    ctx: RequestContext, topic: str, partition: int, offset: int
) -> tuple[ErrorCode, int]:
    broker = ctx.broker
    if not allowed(ctx, Operation.DELETE, TOPIC, topic):
        return ErrorCode.topic_authorization_failed, -1
    info = broker.topics.get(topic)
    if info is not None and info.is_internal:
        return ErrorCode.invalid_topic_exception, -1
    partition_log = broker.topics.get_log(topic, partition)
    if partition_log is None:
        return ErrorCode.unknown_topic_or_partition, -1
    if not partition_log.config.delete_enabled:
        return ErrorCode.policy_violation, -1
    if offset < 0 and offset != DELETE_TO_HIGH_WATERMARK:
        return ErrorCode.offset_out_of_range, -1
    try:
        low_watermark = await broker.run_blocking(partition_log.delete_records, int(offset))
    except StorageError as exc:
        return error_code_for(exc.error_name), -1
    return ErrorCode.none, low_watermark


SPEC = HandlerSpec(API_KEY, "DeleteRecords", 0, 2, handle)
