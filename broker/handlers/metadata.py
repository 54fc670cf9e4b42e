"""Metadata (key 3) v0-13: brokers, cluster id, controller, topics and their partitions.

One broker (this node) leads every partition: leader epoch 0, replicas = isr = [node.id].
Topics missing from the registry are created when ``auto.create.topics.enable`` is on and (v4+)
the request allows it, with ``num.partitions`` partitions, as Kafka does; illegal names answer
INVALID_TOPIC_EXCEPTION and are never created. A null topic list (v0: an empty one) means all
topics. From v12 a topic may be asked for by id: as Kafka does, a request with any non-zero topic
id is answered by id alone (the names, often empty strings from the Java Admin, are ignored and
zero ids dropped); unknown ids answer UNKNOWN_TOPIC_ID with a null name. Ids in v10-11 answer
INVALID_REQUEST; an entry with neither a name nor an id answers UNKNOWN_TOPIC_ID.

Answers whose every topic is described (the common case: all topics, or topics that exist) are
encoded by ``protocol.fast.metadata`` and returned as a ``RawBody``: its partition arrays are
encoded once per partition count and shared, so a full-cluster answer of 20,000 partitions costs
~0.1 ms (~1 ms for the first, which encodes the array) instead of 70-170 ms in kio's writer.
Answers with an error entry (unknown topic, denial, failed auto-create, ...) are built as kio
entities and encoded by kio, as before.
"""

from __future__ import annotations

import functools
import logging
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from kio.static.constants import uuid_zero

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.request_channel import RawBody
from tidelog.broker.security.access import CLUSTER, TOPIC, Operation, allowed
from tidelog.broker.security.acls import CLUSTER_NAME, ResourceType
from tidelog.broker.topics import (
    INTERNAL_TOPICS,
    LEADER_EPOCH,
    TopicError,
    TopicInfo,
    nonzero_topic_id,
    topic_name_error,
)
from tidelog.protocol.errors import ErrorCode, error_code_for
from tidelog.protocol.fast.metadata import (
    UNSET_OPERATIONS,
    MetadataBroker,
    MetadataTopic,
    encode_metadata_body,
)
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.metadata.v0.request import MetadataRequest as _MetadataRequestV0
    from kio.schema.metadata.v1.request import MetadataRequest as _MetadataRequestV1
    from kio.schema.metadata.v2.request import MetadataRequest as _MetadataRequestV2
    from kio.schema.metadata.v3.request import MetadataRequest as _MetadataRequestV3
    from kio.schema.metadata.v4.request import MetadataRequest as _MetadataRequestV4
    from kio.schema.metadata.v5.request import MetadataRequest as _MetadataRequestV5
    from kio.schema.metadata.v6.request import MetadataRequest as _MetadataRequestV6
    from kio.schema.metadata.v7.request import MetadataRequest as _MetadataRequestV7
    from kio.schema.metadata.v8.request import MetadataRequest as _MetadataRequestV8
    from kio.schema.metadata.v9.request import MetadataRequest as _MetadataRequestV9
    from kio.schema.metadata.v10.request import MetadataRequest as _MetadataRequestV10
    from kio.schema.metadata.v11.request import MetadataRequest as _MetadataRequestV11
    from kio.schema.metadata.v12.request import MetadataRequest as _MetadataRequestV12
    from kio.schema.metadata.v13.request import MetadataRequest as _MetadataRequestV13

    #: The request versions this handler serves (kio's classes).
    Request = (
        _MetadataRequestV0
        | _MetadataRequestV1
        | _MetadataRequestV2
        | _MetadataRequestV3
        | _MetadataRequestV4
        | _MetadataRequestV5
        | _MetadataRequestV6
        | _MetadataRequestV7
        | _MetadataRequestV8
        | _MetadataRequestV9
        | _MetadataRequestV10
        | _MetadataRequestV11
        | _MetadataRequestV12
        | _MetadataRequestV13
    )
    from kio.schema.metadata.v0.response import MetadataResponse as _MetadataResponseV0
    from kio.schema.metadata.v1.response import MetadataResponse as _MetadataResponseV1
    from kio.schema.metadata.v2.response import MetadataResponse as _MetadataResponseV2
    from kio.schema.metadata.v3.response import MetadataResponse as _MetadataResponseV3
    from kio.schema.metadata.v4.response import MetadataResponse as _MetadataResponseV4
    from kio.schema.metadata.v5.response import MetadataResponse as _MetadataResponseV5
    from kio.schema.metadata.v6.response import MetadataResponse as _MetadataResponseV6
    from kio.schema.metadata.v7.response import MetadataResponse as _MetadataResponseV7
    from kio.schema.metadata.v8.response import MetadataResponse as _MetadataResponseV8
    from kio.schema.metadata.v9.response import MetadataResponse as _MetadataResponseV9
    from kio.schema.metadata.v10.response import MetadataResponse as _MetadataResponseV10
    from kio.schema.metadata.v11.response import MetadataResponse as _MetadataResponseV11
    from kio.schema.metadata.v12.response import MetadataResponse as _MetadataResponseV12
    from kio.schema.metadata.v13.response import MetadataResponse as _MetadataResponseV13

    #: The response versions it answers (kio's classes).
    Response = (
        _MetadataResponseV0
        | _MetadataResponseV1
        | _MetadataResponseV2
        | _MetadataResponseV3
        | _MetadataResponseV4
        | _MetadataResponseV5
        | _MetadataResponseV6
        | _MetadataResponseV7
        | _MetadataResponseV8
        | _MetadataResponseV9
        | _MetadataResponseV10
        | _MetadataResponseV11
        | _MetadataResponseV12
        | _MetadataResponseV13
    )


API_KEY = 3
log = logging.getLogger("tidelog.metadata")

#: Kafka's AclOperation codes allowed on a topic with no authorizer: READ, WRITE, CREATE,
#: DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
#: ... and on the cluster: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
#: ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS.
_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12, 13, 14))
#: Answers up to this size are sent as one bytes object (one write), larger ones as chunks.
_JOIN_BELOW = 65536


def _operations(ctx: RequestContext, rtype: ResourceType, name: str, all_ops: int) -> int:
    """The authorized-operations bit set: every operation without an authorizer."""
    if ctx.broker.authorizer is None:
        return all_ops
    bits = 0
    for op in range(32):
        if all_ops & (1 << op) and allowed(ctx, Operation(op), rtype, name, log_denial=False):
            bits |= 1 << op
    return bits


def partition_states(cls: Any, node: int, indexes: range) -> tuple[Any, ...]:
    """The partitions ``indexes`` of a topic as this single node describes them (``cls``: the
    response's partition type, Metadata's or DescribeTopicPartitions'): no error, this node the
    leader at ``LEADER_EPOCH``, its only replica and in-sync replica, none offline, and empty
    eligible-leader-replica lists where ``cls`` has them (KIP-966)."""
    return tuple(
        build(
            cls,
            error_code=ErrorCode.none,
            partition_index=i,
            leader_id=node,
            leader_epoch=LEADER_EPOCH,
            replica_nodes=(node,),
            isr_nodes=(node,),
            eligible_leader_replicas=(),
            last_known_elr=(),
            offline_replicas=(),
        )
        for i in indexes
    )


@functools.lru_cache(maxsize=256)
def _partitions(types: Any, count: int, node: int) -> tuple[Any, ...]:
    """The partition entries of a topic with ``count`` partitions: the same for every topic
    (one node leads them all), so they are built once per version and count (20,000 partitions
    cost ~150 ms of entity building per Metadata request otherwise)."""
    return partition_states(types.MetadataResponsePartition, node, range(count))


def _topic(ctx: RequestContext, info: TopicInfo, include_operations: bool) -> MetadataTopic:
    """A described topic: its partitions, all led by this node."""
    return MetadataTopic(
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.is_internal,
        partition_count=info.partitions,
        leader_id=ctx.broker.node_id,
        leader_epoch=LEADER_EPOCH,
        authorized_operations=(
            _operations(ctx, TOPIC, info.name, TOPIC_OPERATIONS)
            if include_operations
            else UNSET_OPERATIONS
        ),
    )


def _topic_entity(types: Any, topic: MetadataTopic) -> Any:
    """``topic`` as kio's entity (answers that also carry error entries)."""
    return build(
        types.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=_partitions(types, topic.partition_count, topic.leader_id),
        topic_authorized_operations=topic.authorized_operations,
    )


def error_topic(
    cls: Any,
    name: str | None,
    code: ErrorCode,
    topic_id: Any = uuid_zero,
    operations: int = UNSET_OPERATIONS,
) -> Any:
    """A topic entry carrying only ``code`` (no partitions), for Metadata's
    ``MetadataResponseTopic`` and DescribeTopicPartitions' topic entity."""
    return build(
        cls,
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=name in INTERNAL_TOPICS,
        partitions=(),
        topic_authorized_operations=operations,
    )


def _error_topic(types: Any, name: str | None, code: ErrorCode, topic_id: Any = uuid_zero) -> Any:
    return error_topic(types.MetadataResponseTopic, name, code, topic_id)


def _wanted(ctx: RequestContext, request: Request) -> tuple[Any, ...] | None:
    """The requested topic entries, or None for all topics."""
    topics = request.topics
    if topics is None or (ctx.api_version == 0 and not topics):
        return None
    return tuple(topics)


def _by_id(types: Any, ctx: RequestContext, ids: list[uuid.UUID], include_ops: bool) -> list[Any]:
    answers = []
    for topic_id in ids:
        info = ctx.broker.topics.by_id(topic_id)
        if info is None:
            answers.append(_error_topic(types, None, ErrorCode.unknown_topic_id, topic_id))
        elif not allowed(ctx, Operation.DESCRIBE, TOPIC, info.name):
            answers.append(
                _error_topic(types, None, ErrorCode.topic_authorization_failed, topic_id)
            )
        else:
            answers.append(_topic(ctx, info, include_ops))
    return answers


def _allow_auto_create(ctx: RequestContext, request: Request) -> bool:
    if not ctx.broker.config.auto_create_topics_enable:
        return False
    return bool(getattr(request, "allow_auto_topic_creation", True))


async def handle(ctx: RequestContext, request: Request) -> Response | RawBody:
    types = response_types(API_KEY, ctx.api_version)
    broker = ctx.broker
    topics = broker.topics
    include_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    wanted = _wanted(ctx, request)
    answers: list[Any] = []
    if wanted is None:
        # Only the topics the principal may DESCRIBE (denials here are not logged: Kafka).
        answers = [
            _topic(ctx, info, include_ops)
            for info in topics
            if allowed(ctx, Operation.DESCRIBE, TOPIC, info.name, log_denial=False)
        ]
    else:
        ids = [nonzero_topic_id(getattr(entry, "topic_id", None)) for entry in wanted]
        if any(ids) and ctx.api_version < 12:
            # Kafka: "Topic IDs are not supported in requests for version 10/11".
            return error_response(ctx, request, ErrorCode.invalid_request)
        if any(ids):
            # Kafka decides by the ids: when any is non-zero the request is by id (names, empty
            # or not, are ignored) and zero ids are dropped.
            answers = _by_id(types, ctx, [tid for tid in dict.fromkeys(ids) if tid], include_ops)
            wanted = ()
        auto_create = _allow_auto_create(ctx, request)
        for entry in wanted:
            name = getattr(entry, "name", None)
            if name is None:  # neither a name nor an id
                answers.append(_error_topic(types, None, ErrorCode.unknown_topic_id))
                continue
            if not allowed(ctx, Operation.DESCRIBE, TOPIC, name):
                answers.append(_error_topic(types, name, ErrorCode.topic_authorization_failed))
                continue
            info = topics.get(name)
            if info is not None:
                answers.append(_topic(ctx, info, include_ops))
                continue
            if topic_name_error(name) is not None:
                answers.append(_error_topic(types, name, ErrorCode.invalid_topic_exception))
                continue
            # Kafka divergence: the topic is created before the answer (Kafka's first answer
            # is UNKNOWN_TOPIC_OR_PARTITION while its controller creates it).
            if not auto_create or name in INTERNAL_TOPICS:
                answers.append(_error_topic(types, name, ErrorCode.unknown_topic_or_partition))
                continue
            if not (
                allowed(ctx, Operation.CREATE, CLUSTER, log_denial=False)
                or allowed(ctx, Operation.CREATE, TOPIC, name)
            ):
                answers.append(_error_topic(types, name, ErrorCode.topic_authorization_failed))
                continue
            try:
                info = topics.create_topic(name, broker.config.num_partitions)
            except TopicError as exc:
                log.warning("auto-creating topic %r failed: %s", name, exc.message)
                answers.append(_error_topic(types, name, error_code_for(exc.error_name)))
                continue
            answers.append(_topic(ctx, info, include_ops))
    endpoint = broker.endpoint_for(ctx.listener_name)
    rack = broker.config.get("broker.rack")
    this_broker = MetadataBroker(
        node_id=broker.node_id,
        host=endpoint.advertised_host,
        port=broker.advertised_port(endpoint),
        rack=rack if isinstance(rack, str) else None,
    )
    include_cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    cluster_operations = (
        _operations(ctx, CLUSTER, CLUSTER_NAME, _CLUSTER_OPERATIONS)
        if include_cluster_ops
        else UNSET_OPERATIONS
    )
    if all(type(answer) is MetadataTopic for answer in answers):
        chunks = encode_metadata_body(
            ctx.api_version,
            (this_broker,),
            broker.cluster_id,
            broker.node_id,
            answers,
            cluster_authorized_operations=cluster_operations,
        )
        if len(chunks) > 1 and sum(len(chunk) for chunk in chunks) <= _JOIN_BELOW:
            chunks = [b"".join(chunks)]
        return RawBody(tuple(chunks))
    return cast(
        "Response",
        build(
            types.MetadataResponse,
            throttle_time=timedelta(0),
            brokers=(build(types.MetadataResponseBroker, **this_broker._asdict()),),
            cluster_id=broker.cluster_id,
            controller_id=broker.node_id,
            topics=tuple(
                _topic_entity(types, answer) if type(answer) is MetadataTopic else answer
                for answer in answers
            ),
            cluster_authorized_operations=cluster_operations,
            error_code=ErrorCode.none,
        ),
    )


def error_response(ctx: RequestContext, request: Request, code: ErrorCode) -> Response:
    """Before v13 (no top-level error): every requested topic carries the error."""
    types = response_types(API_KEY, ctx.api_version)
    wanted = _wanted(ctx, request) or ()
    return cast(
        "Response",
        build(
            types.MetadataResponse,
            throttle_time=timedelta(0),
            brokers=(),
            cluster_id=None,
            controller_id=-1,
            topics=tuple(_error_topic(types, getattr(t, "name", None), code) for t in wanted),
            cluster_authorized_operations=UNSET_OPERATIONS,
            error_code=code,
        ),
    )


SPEC = HandlerSpec(api_key=API_KEY, name="Metadata", min_version=0, max_version=13, handle=handle)


def with_throttle_time(ctx: RequestContext, response: RawBody, throttle_ms: int) -> RawBody:
    """``response`` (``protocol.fast.metadata``) carrying ``throttle_ms`` (client quotas): v3+
    bodies start with the throttle time."""
    if ctx.api_version < 3:
        return response
    first, *rest = response.chunks
    return RawBody((throttle_ms.to_bytes(4, "big") + bytes(first[4:]), *rest))
