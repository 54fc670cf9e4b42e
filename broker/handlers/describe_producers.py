"""DescribeProducers (API 61) v0: the active producers of partitions (kafka-transactions.sh
describe-producers).

For each partition asked for: every producer its producer state knows (id, epoch, last
sequence, last timestamp, coordinator epoch of its last marker, first offset of its open
transaction or -1), as Kafka's ``Partition.activeProducerState``. An unknown partition answers
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import TOPIC, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

if TYPE_CHECKING:
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest as Request
    from kio.schema.describe_producers.v0.response import DescribeProducersResponse as Response
API_KEY = 61


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    topics = []
    for t in request.topics:
        partitions = []
        for index in t.partition_indexes:
            partition_log = ctx.broker.topics.get_log(t.name, int(index))
            if not allowed(ctx, Operation.READ, TOPIC, t.name):
                partitions.append(
                    types.PartitionResponse(
                        partition_index=index,
                        error_code=ErrorCode.topic_authorization_failed,
                        error_message=None,
                        active_producers=(),
                    )
                )
                continue
            if partition_log is None:
                partitions.append(
                    types.PartitionResponse(
                        partition_index=index,
                        error_code=ErrorCode.unknown_topic_or_partition,
                        error_message=None,
                        active_producers=(),
                    )
                )
                continue
            active = [
                types.ProducerState(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.producer_epoch,
                    last_sequence=entry.last_sequence,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=entry.current_txn_first_offset,
                )
                for _, entry in sorted(partition_log.producer_state.producers.items())
            ]
            partitions.append(
                types.PartitionResponse(
                    partition_index=index,
                    error_code=ErrorCode.none,
                    error_message=None,
                    active_producers=tuple(active),
                )
            )
        topics.append(types.TopicResponse(name=t.name, partitions=tuple(partitions)))
    return cast(
        "Response", types.DescribeProducersResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))
    )


SPEC = HandlerSpec(API_KEY, "DescribeProducers", 0, 0, handle)
