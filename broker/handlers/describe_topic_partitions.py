"""DescribeTopicPartitions (key 75) v0, KIP-966: topics and partitions, paged by a cursor.

What Kafka 4's ``kafka-topics.sh --describe`` sends. As Kafka's
DescribeTopicPartitionsRequestHandler answers:

* an empty topic list means every topic; topics come sorted by name, starting at the cursor's
  topic and partition when a cursor is given (its topic must then be among those asked for,
  else INVALID_REQUEST for the whole answer);
* at most ``response_partition_limit`` partitions (capped by Kafka's
  ``max.request.partition.size.limit``, 2000) are answered; when more remain, ``next_cursor``
  names the first one left out;
* an unknown topic answers UNKNOWN_TOPIC_OR_PARTITION with a zero id, an illegal name
  INVALID_TOPIC_EXCEPTION;
* each partition: leader this node, leader epoch 0, replicas = isr = [node.id], empty ELR lists.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.handlers.metadata import TOPIC_OPERATIONS, error_topic, partition_states
from tidelog.broker.topics import TopicInfo, topic_name_error
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.describe_topic_partitions.v0.request import (
        DescribeTopicPartitionsRequest as Request,
    )
    from kio.schema.describe_topic_partitions.v0.response import (
        DescribeTopicPartitionsResponse as Response,
    )


API_KEY = 75
#: Kafka's max.request.partition.size.limit default.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000


def _error_topic(types: Any, name: str, code: ErrorCode) -> Any:
    return error_topic(
        types.DescribeTopicPartitionsResponseTopic, name, code, operations=TOPIC_OPERATIONS
    )


def _topic(types: Any, node: int, info: TopicInfo, first: int, count: int) -> Any:
    return build(
        types.DescribeTopicPartitionsResponseTopic,
        error_code=ErrorCode.none,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.is_internal,
        partitions=partition_states(
            types.DescribeTopicPartitionsResponsePartition, node, range(first, first + count)
        ),
        topic_authorized_operations=TOPIC_OPERATIONS,
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    broker = ctx.broker
    asked = sorted({t.name for t in request.topics})
    names = asked if asked else sorted(info.name for info in broker.topics)
    cursor = request.cursor
    if cursor is not None:
        if asked and cursor.topic_name not in asked:
            return cast(
                "Response",
                build(
                    types.DescribeTopicPartitionsResponse,
                    throttle_time=timedelta(0),
                    topics=tuple(_error_topic(types, n, ErrorCode.invalid_request) for n in asked),
                    next_cursor=None,
                ),
            )
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(min(int(request.response_partition_limit), MAX_REQUEST_PARTITION_SIZE_LIMIT), 1)
    topics: list[Any] = []
    next_cursor = None
    for name in names:
        if topic_name_error(name) is not None:
            topics.append(_error_topic(types, name, ErrorCode.invalid_topic_exception))
            continue
        info = broker.topics.get(name)
        if info is None:
            topics.append(_error_topic(types, name, ErrorCode.unknown_topic_or_partition))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        first = max(int(first), 0)
        if budget == 0:
            next_cursor = build(types.Cursor, topic_name=name, partition_index=first)
            break
        count = max(min(info.partitions - first, budget), 0)
        topics.append(_topic(types, broker.node_id, info, first, count))
        budget -= count
        if first + count < info.partitions:
            next_cursor = build(types.Cursor, topic_name=name, partition_index=first + count)
            break
    return cast(
        "Response",
        build(
            types.DescribeTopicPartitionsResponse,
            throttle_time=timedelta(0),
            topics=tuple(topics),
            next_cursor=next_cursor,
        ),
    )


SPEC = HandlerSpec(
    api_key=API_KEY, name="DescribeTopicPartitions", min_version=0, max_version=0, handle=handle
)
