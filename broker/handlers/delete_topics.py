"""DeleteTopics (API 20) v1-6: forget topics and delete their logs (by name; v6 also by id).

Kafka behaviour kept (ControllerApis.deleteTopics, ReplicationControlManager):

- ``delete.topic.enable=false``: every topic is answered TOPIC_DELETION_DISABLED (v3+), or
  INVALID_REQUEST before v3;
- a name (or id) given twice is answered once, INVALID_REQUEST "Duplicate topic name." and
  the topic is not deleted; v6 entries with both a name and an id, or neither, are INVALID_REQUEST;
- an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID;
- deletion is immediate (one node, no replicas to wait for): the registry forgets the topic and
  storage renames each partition directory to ``<topic>-<p>.<uuid>-delete`` for later removal.

Kafka divergence: Kafka's broker lets a client delete ``__consumer_offsets`` (only the
kafka-topics tool refuses). tidelog's group coordinator keeps that topic open and loaded, so it
refuses internal topics with INVALID_TOPIC_EXCEPTION, the answer Kafka gives to DeleteRecords on
an internal topic.

After a deletion, long-poll fetchers waiting on the topic's partitions are woken (they then find
the partition gone), and the group coordinator, if it offers ``on_partitions_deleted``, is told so
it can drop committed offsets of those partitions as Kafka does; the share coordinator drops the
share partitions of the topic.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import TOPIC, Operation, allowed
from tidelog.broker.topics import TopicError, TopicInfo
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.protocol.schema import build, response_types
from tidelog.storage.errors import StorageError

if TYPE_CHECKING:
    from kio.schema.delete_topics.v1.request import DeleteTopicsRequest as _DeleteTopicsRequestV1
    from kio.schema.delete_topics.v2.request import DeleteTopicsRequest as _DeleteTopicsRequestV2
    from kio.schema.delete_topics.v3.request import DeleteTopicsRequest as _DeleteTopicsRequestV3
    from kio.schema.delete_topics.v4.request import DeleteTopicsRequest as _DeleteTopicsRequestV4
    from kio.schema.delete_topics.v5.request import DeleteTopicsRequest as _DeleteTopicsRequestV5
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest as _DeleteTopicsRequestV6

    #: The request versions this handler serves (kio's classes).
    Request = (
        _DeleteTopicsRequestV1
        | _DeleteTopicsRequestV2
        | _DeleteTopicsRequestV3
        | _DeleteTopicsRequestV4
        | _DeleteTopicsRequestV5
        | _DeleteTopicsRequestV6
    )
    from kio.schema.delete_topics.v1.response import DeleteTopicsResponse as _DeleteTopicsResponseV1
    from kio.schema.delete_topics.v2.response import DeleteTopicsResponse as _DeleteTopicsResponseV2
    from kio.schema.delete_topics.v3.response import DeleteTopicsResponse as _DeleteTopicsResponseV3
    from kio.schema.delete_topics.v4.response import DeleteTopicsResponse as _DeleteTopicsResponseV4
    from kio.schema.delete_topics.v5.response import DeleteTopicsResponse as _DeleteTopicsResponseV5
    from kio.schema.delete_topics.v6.response import DeleteTopicsResponse as _DeleteTopicsResponseV6

    #: The response versions it answers (kio's classes).
    Response = (
        _DeleteTopicsResponseV1
        | _DeleteTopicsResponseV2
        | _DeleteTopicsResponseV3
        | _DeleteTopicsResponseV4
        | _DeleteTopicsResponseV5
        | _DeleteTopicsResponseV6
    )


log = logging.getLogger("tidelog.admin")

API_KEY = 20
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class _Result:
    name: str | None
    topic_id: uuid.UUID
    code: ErrorCode
    message: str | None = None


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    wanted = _requested(request)
    if not ctx.broker.config.get("delete.topic.enable"):
        if ctx.api_version >= 3:
            code, message = ErrorCode.topic_deletion_disabled, "Topic deletion is disabled."
        else:
            code, message = ErrorCode.invalid_request, "Topic deletion is disabled."
        results = [_Result(name, tid or ZERO_UUID, code, message) for name, tid in wanted]
    else:
        results = _delete_all(ctx, wanted)
    return cast(
        "Response",
        types.DeleteTopicsResponse(
            throttle_time=timedelta(0),
            responses=tuple(
                build(
                    types.DeletableTopicResult,
                    name=r.name if ctx.api_version >= 6 else (r.name or ""),
                    topic_id=r.topic_id,
                    error_code=r.code,
                    error_message=r.message,
                )
                for r in results
            ),
        ),
    )


def _requested(request: Request) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, id) of each entry: ``topic_names`` (v1-5) or ``topics`` (v6)."""
    if hasattr(request, "topics"):
        out: list[tuple[str | None, uuid.UUID | None]] = []
        for t in request.topics:
            tid = t.topic_id if t.topic_id is not None and t.topic_id != ZERO_UUID else None
            out.append((t.name, tid))
        return out
    return [(name, None) for name in request.topic_names]


def _delete_all(
    ctx: RequestContext, wanted: list[tuple[str | None, uuid.UUID | None]]
) -> list[_Result]:
    topics = ctx.broker.topics
    results: list[_Result] = []
    counts: dict[tuple[str | None, uuid.UUID | None], int] = {}
    for key in wanted:
        counts[key] = counts.get(key, 0) + 1
    reported: set[tuple[str | None, uuid.UUID | None]] = set()
    to_delete: list[TopicInfo] = []
    for key in wanted:
        if key in reported:
            continue
        reported.add(key)
        name, tid = key
        if name is not None and tid is not None:
            message = "You may not specify both topic name and topic id."
            results.append(_Result(name, tid, ErrorCode.invalid_request, message))
            continue
        if name is None and tid is None:
            message = "Neither topic name nor id were specified."
            results.append(_Result(None, ZERO_UUID, ErrorCode.invalid_request, message))
            continue
        if counts[key] > 1:
            what = "name" if name is not None else "id"
            message = f"Duplicate topic {what}."
            results.append(_Result(name, tid or ZERO_UUID, ErrorCode.invalid_request, message))
            continue
        if name is not None:
            info = topics.get(name)
        else:
            assert tid is not None
            info = topics.by_id(tid)
        checked = info.name if info is not None else name
        if checked is not None and ctx.broker.authorizer is not None:
            # Kafka: without DESCRIBE a topic named by id is "unknown" (its existence is not
            # revealed); by name, and without DELETE, TOPIC_AUTHORIZATION_FAILED.
            code = None
            if not allowed(ctx, Operation.DESCRIBE, TOPIC, checked):
                code = (
                    ErrorCode.unknown_topic_id
                    if name is None
                    else ErrorCode.topic_authorization_failed
                )
            elif not allowed(ctx, Operation.DELETE, TOPIC, checked):
                code = ErrorCode.topic_authorization_failed
            if code is not None:
                results.append(_Result(name, tid or ZERO_UUID, code, None))
                continue
        if info is None:
            code = (
                ErrorCode.unknown_topic_or_partition
                if name is not None
                else ErrorCode.unknown_topic_id
            )
            results.append(_Result(name, tid or ZERO_UUID, code))
            continue
        if info.is_internal:
            results.append(
                _Result(
                    info.name,
                    info.topic_id,
                    ErrorCode.invalid_topic_exception,
                    f"Cannot delete internal topic {info.name}",
                )
            )
            continue
        if any(t.topic_id == info.topic_id for t in to_delete):
            message = "The provided topic name maps to an ID that was already supplied."
            results.append(_Result(name, info.topic_id, ErrorCode.invalid_request, message))
            continue
        to_delete.append(info)
        results.append(_Result(info.name, info.topic_id, ErrorCode.none))
    failed: dict[uuid.UUID, _Result] = {}
    for info in to_delete:
        outcome = _delete_one(ctx, info)
        if outcome is not None:
            failed[info.topic_id] = outcome
    return [failed.get(r.topic_id, r) if r.code == ErrorCode.none else r for r in results]


def _delete_one(ctx: RequestContext, info: TopicInfo) -> _Result | None:
    broker = ctx.broker
    try:
        broker.topics.delete_topic(info.name)
    except (TopicError, StorageError) as exc:
        log.warning("deleting topic %s failed: %s", info.name, exc)
        return _Result(info.name, info.topic_id, error_code_for(exc.error_name), str(exc))
    partitions = [(info.name, p) for p in range(info.partitions)]
    for topic, partition in partitions:
        # HW waiters, and produce answers still waiting for an fsync of the deleted log
        broker.log_flusher.partition_removed(topic, partition)
    hook = getattr(broker.groups, "on_partitions_deleted", None)
    if hook is not None:
        try:
            hook(partitions)
        except Exception:
            log.exception("the group coordinator failed to forget partitions of %s", info.name)
    if broker.share_groups is not None:
        broker.share_groups.on_topic_deleted(info.topic_id)
    log.info("topic %s (id %s) deleted by %s", info.name, info.topic_id, ctx.client_id)
    return None


SPEC = HandlerSpec(API_KEY, "DeleteTopics", 1, 6, handle)
