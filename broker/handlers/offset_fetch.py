"""OffsetFetch (API 9) v1-9: read committed offsets back.

A partition without a committed offset answers offset -1, leader epoch -1, metadata "" and no
error (as Kafka). v1 reports coordinator errors per partition; v2+ has a top-level error and
accepts a null topic list (every partition the group has committed); v5+ answers the leader
epoch; v8 asks for several groups at once (KIP-709). ``require_stable`` (v7+): a partition with a
transactional offset commit still pending answers UNSTABLE_OFFSET_COMMIT and offset -1, as
Kafka does (``OffsetMetadataManager.fetch_offsets``); the consumer retries until the
transaction ends. Without it, pending offsets are simply not seen (the last committed is).
v9 (KIP-848) names the member and its epoch: for a consumer group, an unknown member is
UNKNOWN_MEMBER_ID and another epoch STALE_MEMBER_EPOCH.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.group.results import OffsetFetchResult, PartitionOffset, TopicOffsets
from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, TOPIC, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.offset_fetch.v1.request import OffsetFetchRequest as _OffsetFetchRequestV1
    from kio.schema.offset_fetch.v2.request import OffsetFetchRequest as _OffsetFetchRequestV2
    from kio.schema.offset_fetch.v3.request import OffsetFetchRequest as _OffsetFetchRequestV3
    from kio.schema.offset_fetch.v4.request import OffsetFetchRequest as _OffsetFetchRequestV4
    from kio.schema.offset_fetch.v5.request import OffsetFetchRequest as _OffsetFetchRequestV5
    from kio.schema.offset_fetch.v6.request import OffsetFetchRequest as _OffsetFetchRequestV6
    from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as _OffsetFetchRequestV7
    from kio.schema.offset_fetch.v8.request import OffsetFetchRequest as _OffsetFetchRequestV8
    from kio.schema.offset_fetch.v9.request import OffsetFetchRequest as _OffsetFetchRequestV9

    #: The request versions this handler serves (kio's classes).
    Request = (
        _OffsetFetchRequestV1
        | _OffsetFetchRequestV2
        | _OffsetFetchRequestV3
        | _OffsetFetchRequestV4
        | _OffsetFetchRequestV5
        | _OffsetFetchRequestV6
        | _OffsetFetchRequestV7
        | _OffsetFetchRequestV8
        | _OffsetFetchRequestV9
    )
    from kio.schema.offset_fetch.v1.response import OffsetFetchResponse as _OffsetFetchResponseV1
    from kio.schema.offset_fetch.v2.response import OffsetFetchResponse as _OffsetFetchResponseV2
    from kio.schema.offset_fetch.v3.response import OffsetFetchResponse as _OffsetFetchResponseV3
    from kio.schema.offset_fetch.v4.response import OffsetFetchResponse as _OffsetFetchResponseV4
    from kio.schema.offset_fetch.v5.response import OffsetFetchResponse as _OffsetFetchResponseV5
    from kio.schema.offset_fetch.v6.response import OffsetFetchResponse as _OffsetFetchResponseV6
    from kio.schema.offset_fetch.v7.response import OffsetFetchResponse as _OffsetFetchResponseV7
    from kio.schema.offset_fetch.v8.response import OffsetFetchResponse as _OffsetFetchResponseV8
    from kio.schema.offset_fetch.v9.response import OffsetFetchResponse as _OffsetFetchResponseV9

    #: The response versions it answers (kio's classes).
    Response = (
        _OffsetFetchResponseV1
        | _OffsetFetchResponseV2
        | _OffsetFetchResponseV3
        | _OffsetFetchResponseV4
        | _OffsetFetchResponseV5
        | _OffsetFetchResponseV6
        | _OffsetFetchResponseV7
        | _OffsetFetchResponseV8
        | _OffsetFetchResponseV9
    )


API_KEY = 9

Wanted = list[tuple[str, list[int]]] | None


def _wanted(topics: Sequence[Any] | None) -> Wanted:
    if topics is None:
        return None
    return [(t.name, [int(i) for i in t.partition_indexes]) for t in topics]


def _fetch(
    ctx: RequestContext,
    group_id: str,
    wanted: Wanted,
    require_stable: bool = False,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> OffsetFetchResult:
    groups = coordinator(ctx)
    if not allowed(ctx, Operation.DESCRIBE, GROUP, group_id):
        return OffsetFetchResult(ErrorCode.group_authorization_failed)
    if groups is None:
        return OffsetFetchResult(ErrorCode.coordinator_not_available)
    consumer = groups.offset_manager.modern_group(group_id)
    if consumer is not None:
        # v9+ (KIP-848): a named member must exist with its current epoch.
        error = consumer.validate_offset_fetch(group_id, member_id, member_epoch)
        if error is not ErrorCode.none:
            return OffsetFetchResult(error)
    result = groups.fetch_offsets(group_id, wanted, require_stable)
    if ctx.broker.authorizer is not None:
        result = _authorized_topics(ctx, result, wanted)
    return result


def _authorized_topics(
    ctx: RequestContext, result: OffsetFetchResult, wanted: Wanted
) -> OffsetFetchResult:
    """Kafka: topics the principal may not DESCRIBE are left out of an "all topics" answer
    and answered TOPIC_AUTHORIZATION_FAILED when asked for by name."""
    topics = []
    for t in result.topics:
        if allowed(ctx, Operation.DESCRIBE, TOPIC, t.topic, log_denial=wanted is not None):
            topics.append(t)
        elif wanted is not None:
            error = ErrorCode.topic_authorization_failed
            topics.append(
                TopicOffsets(
                    t.topic, tuple(PartitionOffset(p.partition, error=error) for p in t.partitions)
                )
            )
    return dataclasses.replace(result, topics=tuple(topics))


def _topics(ctx: RequestContext, result: OffsetFetchResult, wanted: Wanted, *, v8: bool) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    topic_cls = types.OffsetFetchResponseTopics if v8 else types.OffsetFetchResponseTopic
    part_cls = types.OffsetFetchResponsePartitions if v8 else types.OffsetFetchResponsePartition
    topics: Sequence[TopicOffsets] = result.topics
    if result.error is not ErrorCode.none and ctx.api_version < 2 and wanted is not None:
        # v0-1 have no top-level error: every partition asked for carries it.
        topics = [
            TopicOffsets(t, tuple(PartitionOffset(p, error=result.error) for p in ps))
            for t, ps in wanted
        ]
    return tuple(
        topic_cls(
            name=t.topic,
            partitions=tuple(
                build(
                    part_cls,
                    partition_index=p.partition,
                    committed_offset=p.offset,
                    committed_leader_epoch=p.leader_epoch,
                    metadata=p.metadata,
                    error_code=p.error,
                )
                for p in t.partitions
            ),
        )
        for t in topics
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    require_stable = bool(getattr(request, "require_stable", False))  # v7+
    if hasattr(request, "groups"):  # v8+: several groups
        out = []
        for group in request.groups:
            wanted = _wanted(group.topics)
            result = _fetch(
                ctx,
                group.group_id,
                wanted,
                require_stable,
                getattr(group, "member_id", None),
                int(getattr(group, "member_epoch", -1)),
            )
            out.append(
                types.OffsetFetchResponseGroup(
                    group_id=group.group_id,
                    topics=_topics(ctx, result, wanted, v8=True),
                    error_code=result.error,
                )
            )
        return cast(
            "Response", types.OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=tuple(out))
        )
    wanted = _wanted(request.topics)
    result = _fetch(ctx, request.group_id, wanted, require_stable)
    return cast(
        "Response",
        build(
            types.OffsetFetchResponse,
            throttle_time=NO_THROTTLE,
            topics=_topics(ctx, result, wanted, v8=False),
            error_code=result.error,
        ),
    )


SPEC = HandlerSpec(API_KEY, "OffsetFetch", 1, 9, handle)
