"""CreateTopics (key 19) v2-7.

num_partitions -1 means ``num.partitions``; replication factor must be -1 or 1 (one node);
manual assignments must name only this node. Configs are validated by the config package
(INVALID_CONFIG with its message). ``validate_only`` checks everything and creates nothing.
v5+ answers carry the partition count, replication factor and every topic config; v7+ the id.
Partition logs are made in a worker thread. A topic whose logs cannot be made (out of file
descriptors, out of disk) answers KAFKA_STORAGE_ERROR with a message naming the fix, as Kafka's
per-topic ApiError does; nothing of it is left, and the other topics of the request go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from kio.static.constants import uuid_zero

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import CLUSTER, TOPIC, Operation, allowed
from tidelog.broker.topics import EXCESSIVE_PARTITIONS, MAX_PARTITIONS_PER_REQUEST, TopicError
from tidelog.config.topic import describe_topic_configs
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.create_topics.v2.request import CreateTopicsRequest as _CreateTopicsRequestV2
    from kio.schema.create_topics.v3.request import CreateTopicsRequest as _CreateTopicsRequestV3
    from kio.schema.create_topics.v4.request import CreateTopicsRequest as _CreateTopicsRequestV4
    from kio.schema.create_topics.v5.request import CreateTopicsRequest as _CreateTopicsRequestV5
    from kio.schema.create_topics.v6.request import CreateTopicsRequest as _CreateTopicsRequestV6
    from kio.schema.create_topics.v7.request import CreateTopicsRequest as _CreateTopicsRequestV7

    #: The request versions this handler serves (kio's classes).
    Request = (
        _CreateTopicsRequestV2
        | _CreateTopicsRequestV3
        | _CreateTopicsRequestV4
        | _CreateTopicsRequestV5
        | _CreateTopicsRequestV6
        | _CreateTopicsRequestV7
    )
    from kio.schema.create_topics.v2.response import CreateTopicsResponse as _CreateTopicsResponseV2
    from kio.schema.create_topics.v3.response import CreateTopicsResponse as _CreateTopicsResponseV3
    from kio.schema.create_topics.v4.response import CreateTopicsResponse as _CreateTopicsResponseV4
    from kio.schema.create_topics.v5.response import CreateTopicsResponse as _CreateTopicsResponseV5
    from kio.schema.create_topics.v6.response import CreateTopicsResponse as _CreateTopicsResponseV6
    from kio.schema.create_topics.v7.response import CreateTopicsResponse as _CreateTopicsResponseV7

    #: The response versions it answers (kio's classes).
    Response = (
        _CreateTopicsResponseV2
        | _CreateTopicsResponseV3
        | _CreateTopicsResponseV4
        | _CreateTopicsResponseV5
        | _CreateTopicsResponseV6
        | _CreateTopicsResponseV7
    )


API_KEY = 19
log = logging.getLogger("tidelog.create_topics")


def _config_entries(
    ctx: RequestContext, types: Any, configs: dict[str, str | None]
) -> tuple[Any, ...]:
    entries = describe_topic_configs(ctx.broker.config, configs)
    return tuple(
        types.CreatableTopicConfigs(
            name=e.name,
            value=None if e.sensitive else e.value,
            read_only=e.read_only,
            config_source=e.source,
            is_sensitive=e.sensitive,
        )
        for e in entries
    )


def _result(
    types: Any,
    name: str,
    code: ErrorCode,
    message: str | None,
    *,
    topic_id: Any = uuid_zero,
    num_partitions: int = -1,
    replication_factor: int = -1,
    configs: tuple[Any, ...] = (),
) -> Any:
    return build(
        types.CreatableTopicResult,
        name=name,
        topic_id=topic_id,
        error_code=code,
        error_message=message,
        num_partitions=num_partitions,
        replication_factor=replication_factor,
        configs=configs,
    )


async def _create_one(ctx: RequestContext, types: Any, topic: Any, validate_only: bool) -> Any:
    broker = ctx.broker
    name = topic.name
    num_partitions = int(topic.num_partitions)
    replication_factor = int(topic.replication_factor)
    assignments = tuple(topic.assignments or ())
    if assignments:
        if num_partitions != -1 or replication_factor != -1:
            return _result(
                types,
                name,
                ErrorCode.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        for a in assignments:
            if tuple(a.broker_ids) != (broker.node_id,):
                return _result(
                    types,
                    name,
                    ErrorCode.invalid_replica_assignment,
                    f"Partition {a.partition_index} is assigned to brokers "
                    f"{list(a.broker_ids)}; the only broker is {broker.node_id}.",
                )
        indexes = sorted(int(a.partition_index) for a in assignments)
        if indexes != list(range(len(indexes))):
            return _result(
                types,
                name,
                ErrorCode.invalid_replica_assignment,
                "Partitions should be a consecutive 0-based integer sequence.",
            )
        num_partitions = len(assignments)
    if num_partitions == -1:
        num_partitions = broker.config.num_partitions
    if num_partitions < 1:
        return _result(
            types,
            name,
            ErrorCode.invalid_partitions,
            "Number of partitions was set to an invalid non-positive value.",
        )
    if replication_factor not in (-1, 1):
        return _result(
            types,
            name,
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only 1 "
            "broker(s) are registered.",
        )
    configs: dict[str, str | None] = {c.name: c.value for c in (topic.configs or ())}
    try:
        if validate_only:
            broker.topics.check_new_topic(name, num_partitions, configs)
            topic_id = uuid_zero
        else:
            created = await broker.topics.create_topic_async(
                name, num_partitions, configs, broker.run_blocking
            )
            topic_id = created.topic_id
    except TopicError as exc:
        return _result(types, name, error_code_for(exc.error_name), exc.message)
    except Exception as exc:  # as Kafka's ApiError.fromThrowable: this topic fails, not the request
        log.exception("creating topic %s failed", name)
        return _result(types, name, ErrorCode.unknown_server_error, f"{type(exc).__name__}: {exc}")
    return _result(
        types,
        name,
        ErrorCode.none,
        None,
        topic_id=topic_id,
        num_partitions=num_partitions,
        replication_factor=1,
        configs=_config_entries(ctx, types, configs) if ctx.api_version >= 5 else (),
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    counts = Counter(t.name for t in request.topics)
    default = ctx.broker.config.num_partitions
    wanted = sum(
        default if t.num_partitions == -1 else max(t.num_partitions, 0) for t in request.topics
    )
    if wanted > MAX_PARTITIONS_PER_REQUEST:  # as Kafka's controller: the whole request fails
        return cast(
            "Response",
            build(
                types.CreateTopicsResponse,
                throttle_time=timedelta(0),
                topics=tuple(
                    _result(types, t.name, ErrorCode.policy_violation, EXCESSIVE_PARTITIONS)
                    for t in request.topics
                ),
            ),
        )
    results: list[Any] = []
    for topic in request.topics:
        if results:
            await asyncio.sleep(0)  # other connections are served between two topics
        if counts[topic.name] > 1:
            results.append(
                _result(
                    types,
                    topic.name,
                    ErrorCode.invalid_request,
                    "Create topics request from client contains multiple entries for the "
                    f"following topics: {topic.name}",
                )
            )
            continue
        if not (
            allowed(ctx, Operation.CREATE, CLUSTER, log_denial=False)
            or allowed(ctx, Operation.CREATE, TOPIC, topic.name)
        ):
            code = ErrorCode.topic_authorization_failed
            results.append(_result(types, topic.name, code, "Authorization failed."))
            continue
        results.append(await _create_one(ctx, types, topic, bool(request.validate_only)))
    return cast(
        "Response",
        build(types.CreateTopicsResponse, throttle_time=timedelta(0), topics=tuple(results)),
    )


def error_response(ctx: RequestContext, request: Request, code: ErrorCode) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    return cast(
        "Response",
        build(
            types.CreateTopicsResponse,
            throttle_time=timedelta(0),
            topics=tuple(_result(types, t.name, code, None) for t in request.topics),
        ),
    )


SPEC = HandlerSpec(
    api_key=API_KEY, name="CreateTopics", min_version=2, max_version=7, handle=handle
)
