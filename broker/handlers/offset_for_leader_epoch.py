"""OffsetForLeaderEpoch (key 23) v2-4: the end offset of a leader epoch, for truncation checks.

A consumer that sees a new leader epoch asks where its last fetched epoch ended, to learn
whether the log was truncated under it (KIP-320). tidelog has one leader epoch per partition,
``LEADER_EPOCH`` (0), held since the partition was made, so its epoch cache has one entry
``(0, start offset 0)``. Per partition, as Kafka's Partition.lastOffsetForLeaderEpoch and
LeaderEpochFileCache.endOffsetFor answer:

* ``current_leader_epoch`` (the client's view; -1 means "do not check"): above ours
  UNKNOWN_LEADER_EPOCH, below ours FENCED_LEADER_EPOCH;
* ``leader_epoch`` equal to ours: ``(0, log end offset)``; above ours, or -1 (undefined):
  ``(-1, -1)``; below ours (an epoch before the first one): ``(leader_epoch, 0)``, the start of
  the next known epoch.

Unknown topics or partitions answer UNKNOWN_TOPIC_OR_PARTITION. Kafka 4 serves v2-4 (v0-1 were
removed by KIP-896); a follower's ``replica_id`` is accepted like a consumer's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.topics import LEADER_EPOCH
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.offset_for_leader_epoch.v2.request import (
        OffsetForLeaderEpochRequest as _OffsetForLeaderEpochRequestV2,
    )
    from kio.schema.offset_for_leader_epoch.v3.request import (
        OffsetForLeaderEpochRequest as _OffsetForLeaderEpochRequestV3,
    )
    from kio.schema.offset_for_leader_epoch.v4.request import (
        OffsetForLeaderEpochRequest as _OffsetForLeaderEpochRequestV4,
    )

    #: The request versions this handler serves (kio's classes).
    Request = (
        _OffsetForLeaderEpochRequestV2
        | _OffsetForLeaderEpochRequestV3
        | _OffsetForLeaderEpochRequestV4
    )
    from kio.schema.offset_for_leader_epoch.v2.response import (
        OffsetForLeaderEpochResponse as _OffsetForLeaderEpochResponseV2,
    )
    from kio.schema.offset_for_leader_epoch.v3.response import (
        OffsetForLeaderEpochResponse as _OffsetForLeaderEpochResponseV3,
    )
    from kio.schema.offset_for_leader_epoch.v4.response import (
        OffsetForLeaderEpochResponse as _OffsetForLeaderEpochResponseV4,
    )

    #: The response versions it answers (kio's classes).
    Response = (
        _OffsetForLeaderEpochResponseV2
        | _OffsetForLeaderEpochResponseV3
        | _OffsetForLeaderEpochResponseV4
    )


API_KEY = 23
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def end_offset_for(
    current_leader_epoch: int, leader_epoch: int, log_end_offset: int
) -> tuple[ErrorCode, int, int]:
    """(error, epoch, end offset) of ``leader_epoch`` on a partition at ``log_end_offset``."""
    if current_leader_epoch != -1:
        if current_leader_epoch > LEADER_EPOCH:
            return ErrorCode.unknown_leader_epoch, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if current_leader_epoch < LEADER_EPOCH:
            return ErrorCode.fenced_leader_epoch, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if leader_epoch == UNDEFINED_EPOCH or leader_epoch > LEADER_EPOCH:
        return ErrorCode.none, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if leader_epoch == LEADER_EPOCH:
        return ErrorCode.none, LEADER_EPOCH, log_end_offset
    return ErrorCode.none, leader_epoch, 0  # older than the first epoch: where ours began


def _partition(types: Any, index: int, code: ErrorCode, epoch: int, offset: int) -> Any:
    return build(
        types.EpochEndOffset,
        error_code=code,
        partition=index,
        leader_epoch=epoch,
        end_offset=offset,
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            index = int(p.partition)
            partition_log = ctx.broker.topics.get_log(t.topic, index)
            if partition_log is None:
                code, epoch, offset = ErrorCode.unknown_topic_or_partition, -1, -1
            else:
                code, epoch, offset = end_offset_for(
                    int(p.current_leader_epoch), int(p.leader_epoch), partition_log.log_end_offset
                )
            parts.append(_partition(types, index, code, epoch, offset))
        topics.append(
            build(types.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(parts))
        )
    return cast(
        "Response",
        build(types.OffsetForLeaderEpochResponse, throttle_time=timedelta(0), topics=tuple(topics)),
    )


def error_response(ctx: RequestContext, request: Request, code: ErrorCode) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    topics = tuple(
        build(
            types.OffsetForLeaderTopicResult,
            topic=t.topic,
            partitions=tuple(
                _partition(types, int(p.partition), code, -1, -1) for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return cast(
        "Response",
        build(types.OffsetForLeaderEpochResponse, throttle_time=timedelta(0), topics=topics),
    )


SPEC = HandlerSpec(
    api_key=API_KEY, name="OffsetForLeaderEpoch", min_version=2, max_version=4, handle=handle
)
