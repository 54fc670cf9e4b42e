"""CreatePartitions (API 37) v0-3: grow a topic to more partitions.

Kafka behaviour kept (ControllerApis.createPartitions, ReplicationControlManager
.createPartitions):

- a topic named twice is answered once, INVALID_REQUEST "Duplicate topic name.";
- an unknown topic is UNKNOWN_TOPIC_OR_PARTITION;
- ``count`` equal to the current count is INVALID_PARTITIONS "Topic already has N
  partition(s).", lower is INVALID_PARTITIONS "The topic T currently has N partition(s); M would
  not be an increase.";
- ``assignments`` is null (the broker places the new partitions) or one entry per new partition,
  each naming registered brokers once, as many as the topic's replication factor (1 here); else
  INVALID_REPLICA_ASSIGNMENT with Kafka's messages;
- ``validate_only`` checks everything and creates nothing.

The new partitions' logs are created with the topic's current config, and the registry is
persisted; Metadata shows them at once.

Kafka divergence: growing ``__consumer_offsets`` would move every group to another coordinator
partition; tidelog refuses it (INVALID_TOPIC_EXCEPTION) where Kafka allows it.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers._configs import ApiError
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import TOPIC, Operation, allowed
from tidelog.broker.topics import TopicError
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.protocol.schema import build, response_types
from tidelog.storage.errors import StorageError

if TYPE_CHECKING:
    from kio.schema.create_partitions.v0.request import (
        CreatePartitionsRequest as _CreatePartitionsRequestV0,
    )
    from kio.schema.create_partitions.v1.request import (
        CreatePartitionsRequest as _CreatePartitionsRequestV1,
    )
    from kio.schema.create_partitions.v2.request import (
        CreatePartitionsRequest as _CreatePartitionsRequestV2,
    )
    from kio.schema.create_partitions.v3.request import (
        CreatePartitionsRequest as _CreatePartitionsRequestV3,
    )

    #: The request versions this handler serves (kio's classes).
    Request = (
        _CreatePartitionsRequestV0
        | _CreatePartitionsRequestV1
        | _CreatePartitionsRequestV2
        | _CreatePartitionsRequestV3
    )
    from kio.schema.create_partitions.v0.response import (
        CreatePartitionsResponse as _CreatePartitionsResponseV0,
    )
    from kio.schema.create_partitions.v1.response import (
        CreatePartitionsResponse as _CreatePartitionsResponseV1,
    )
    from kio.schema.create_partitions.v2.response import (
        CreatePartitionsResponse as _CreatePartitionsResponseV2,
    )
    from kio.schema.create_partitions.v3.response import (
        CreatePartitionsResponse as _CreatePartitionsResponseV3,
    )

    #: The response versions it answers (kio's classes).
    Response = (
        _CreatePartitionsResponseV0
        | _CreatePartitionsResponseV1
        | _CreatePartitionsResponseV2
        | _CreatePartitionsResponseV3
    )


log = logging.getLogger("tidelog.admin")

API_KEY = 37
REPLICATION_FACTOR = 1


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    results = []
    seen: set[str] = set()
    for topic in request.topics:
        if topic.name in seen:
            continue
        seen.add(topic.name)
        if counts[topic.name] > 1:
            error = ApiError(ErrorCode.invalid_request, "Duplicate topic name.")
        else:
            error = _grow(ctx, topic, bool(request.validate_only))
        results.append(
            build(
                types.CreatePartitionsTopicResult,
                name=topic.name,
                error_code=error.code,
                error_message=error.message,
            )
        )
    return cast(
        "Response",
        types.CreatePartitionsResponse(throttle_time=timedelta(0), results=tuple(results)),
    )


def _grow(ctx: RequestContext, topic: Any, validate_only: bool) -> ApiError:
    broker = ctx.broker
    if not allowed(ctx, Operation.ALTER, TOPIC, topic.name):
        return ApiError(ErrorCode.topic_authorization_failed, "Authorization failed.")
    info = broker.topics.get(topic.name)
    if info is None:
        return ApiError(
            ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
        )
    count = int(topic.count)
    if count == info.partitions:
        return ApiError(
            ErrorCode.invalid_partitions, f"Topic already has {info.partitions} partition(s)."
        )
    if count < info.partitions:
        return ApiError(
            ErrorCode.invalid_partitions,
            f"The topic {info.name} currently has {info.partitions} partition(s); {count} would "
            "not be an increase.",
        )
    if info.is_internal:
        return ApiError(
            ErrorCode.invalid_topic_exception,
            f"Cannot add partitions to internal topic {info.name}",
        )
    additional = count - info.partitions
    if topic.assignments is not None:
        bad = _check_assignments(topic.assignments, additional, broker.node_id)
        if bad is not None:
            return bad
    try:
        broker.topics.add_partitions(info.name, count, validate_only=validate_only)
    except (TopicError, StorageError) as exc:
        log.warning("growing topic %s to %d partitions failed: %s", info.name, count, exc)
        return ApiError(error_code_for(exc.error_name), str(exc))
    if not validate_only:
        log.info(
            "topic %s grown from %d to %d partitions by %s",
            info.name,
            info.partitions,
            count,
            ctx.client_id,
        )
    return ApiError(ErrorCode.none)


def _check_assignments(assignments: Any, additional: int, node_id: int) -> ApiError | None:
    if len(assignments) != additional:
        return _bad_assignment(
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified."
        )
    for assignment in assignments:
        replicas = sorted(int(b) for b in assignment.broker_ids)
        if not replicas:
            return _bad_assignment(
                "The manual partition assignment includes an empty replica list."
            )
        previous = None
        for broker_id in replicas:
            if broker_id != node_id:
                return _bad_assignment(
                    f"The manual partition assignment includes broker {broker_id}, but no such "
                    "broker is registered."
                )
            if broker_id == previous:
                return _bad_assignment(
                    f"The manual partition assignment includes the broker {broker_id} more than "
                    "once."
                )
            previous = broker_id
        if len(replicas) != REPLICATION_FACTOR:
            return _bad_assignment(
                f"The manual partition assignment includes a partition with {len(replicas)} "
                "replica(s), but this is not consistent with previous partitions, which have "
                f"{REPLICATION_FACTOR} replica(s)."
            )
    return None


def _bad_assignment(message: str) -> ApiError:
    return ApiError(ErrorCode.invalid_replica_assignment, message)


SPEC = HandlerSpec(API_KEY, "CreatePartitions", 0, 3, handle)
