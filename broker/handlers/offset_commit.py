"""OffsetCommit (API 8) v2-9: store consumers' positions in ``__consumer_offsets``.

Answered once the commit is appended and the high watermark covers it (at most
``offsets.commit.timeout.ms``). Version differences kept: v2-4 carry a retention time (kept as
the offset's expire timestamp, OffsetCommitValue v1, as Kafka does when one is given); v6+ the
leader epoch; v7+ ``group.instance.id``. A generation of -1 with no member id is a "simple"
commit (admin client, manual assignment), accepted while the group is empty. Unknown topics or
partitions are UNKNOWN_TOPIC_OR_PARTITION, metadata longer than ``offset.metadata.max.bytes``
OFFSET_METADATA_TOO_LARGE. v9 (KIP-848): for a consumer group the generation field is the
member epoch - an unknown member is UNKNOWN_MEMBER_ID, another epoch STALE_MEMBER_EPOCH, a
version below 9 from a member UNSUPPORTED_VERSION; a classic group answers as before, except a
missing group with a generation is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.group.results import CommitPartition, PartitionError
from tidelog.broker.group.wire import NO_THROTTLE, coordinator, ms
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, TOPIC, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.offset_commit.v2.request import OffsetCommitRequest as _OffsetCommitRequestV2
    from kio.schema.offset_commit.v3.request import OffsetCommitRequest as _OffsetCommitRequestV3
    from kio.schema.offset_commit.v4.request import OffsetCommitRequest as _OffsetCommitRequestV4
    from kio.schema.offset_commit.v5.request import OffsetCommitRequest as _OffsetCommitRequestV5
    from kio.schema.offset_commit.v6.request import OffsetCommitRequest as _OffsetCommitRequestV6
    from kio.schema.offset_commit.v7.request import OffsetCommitRequest as _OffsetCommitRequestV7
    from kio.schema.offset_commit.v8.request import OffsetCommitRequest as _OffsetCommitRequestV8
    from kio.schema.offset_commit.v9.request import OffsetCommitRequest as _OffsetCommitRequestV9

    #: The request versions this handler serves (kio's classes).
    Request = (
        _OffsetCommitRequestV2
        | _OffsetCommitRequestV3
        | _OffsetCommitRequestV4
        | _OffsetCommitRequestV5
        | _OffsetCommitRequestV6
        | _OffsetCommitRequestV7
        | _OffsetCommitRequestV8
        | _OffsetCommitRequestV9
    )
    from kio.schema.offset_commit.v2.response import OffsetCommitResponse as _OffsetCommitResponseV2
    from kio.schema.offset_commit.v3.response import OffsetCommitResponse as _OffsetCommitResponseV3
    from kio.schema.offset_commit.v4.response import OffsetCommitResponse as _OffsetCommitResponseV4
    from kio.schema.offset_commit.v5.response import OffsetCommitResponse as _OffsetCommitResponseV5
    from kio.schema.offset_commit.v6.response import OffsetCommitResponse as _OffsetCommitResponseV6
    from kio.schema.offset_commit.v7.response import OffsetCommitResponse as _OffsetCommitResponseV7
    from kio.schema.offset_commit.v8.response import OffsetCommitResponse as _OffsetCommitResponseV8
    from kio.schema.offset_commit.v9.response import OffsetCommitResponse as _OffsetCommitResponseV9

    #: The response versions it answers (kio's classes).
    Response = (
        _OffsetCommitResponseV2
        | _OffsetCommitResponseV3
        | _OffsetCommitResponseV4
        | _OffsetCommitResponseV5
        | _OffsetCommitResponseV6
        | _OffsetCommitResponseV7
        | _OffsetCommitResponseV8
        | _OffsetCommitResponseV9
    )


API_KEY = 8


def _partitions(request: Request) -> list[CommitPartition]:
    return [
        CommitPartition(
            topic.name,
            int(p.partition_index),
            int(p.committed_offset),
            int(getattr(p, "committed_leader_epoch", -1)),
            p.committed_metadata,
        )
        for topic in request.topics
        for p in topic.partitions
    ]


def _response(ctx: RequestContext, results: list[PartitionError]) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    by_topic: dict[str, list[Any]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            types.OffsetCommitResponsePartition(partition_index=r.partition, error_code=r.error)
        )
    topics = tuple(
        types.OffsetCommitResponseTopic(name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
    return cast(
        "Response", build(types.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    partitions = _partitions(request)
    groups = coordinator(ctx)
    if not allowed(ctx, Operation.READ, GROUP, request.group_id):
        return error_response(ctx, request, ErrorCode.group_authorization_failed)
    if groups is None:
        return error_response(ctx, request, ErrorCode.coordinator_not_available)
    denied: list[PartitionError] = []
    if ctx.broker.authorizer is not None:
        readable = {p.topic for p in partitions if allowed(ctx, Operation.READ, TOPIC, p.topic)}
        denied = [
            PartitionError(p.topic, p.partition, ErrorCode.topic_authorization_failed)
            for p in partitions
            if p.topic not in readable
        ]
        partitions = [p for p in partitions if p.topic in readable]
    retention_ms = ms(getattr(request, "retention_time", None)) if ctx.api_version <= 4 else -1
    results = await groups.commit_offsets(
        request.group_id,
        int(request.generation_id_or_member_epoch),
        request.member_id,
        partitions,
        group_instance_id=getattr(request, "group_instance_id", None),
        retention_ms=retention_ms,
        api_version=ctx.api_version,
    )
    return _response(ctx, [*results, *denied])


def error_response(ctx: RequestContext, request: Request, error_code: ErrorCode) -> Response:
    return _response(
        ctx, [PartitionError(p.topic, p.partition, error_code) for p in _partitions(request)]
    )


SPEC = HandlerSpec(API_KEY, "OffsetCommit", 2, 9, handle)
