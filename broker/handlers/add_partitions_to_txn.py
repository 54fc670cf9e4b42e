"""AddPartitionsToTxn (API 24) v0-3: the partitions a transaction will write to.

The client versions only (v4+ are Kafka's broker-to-broker batched verification, not served).
Partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, nothing stored (as KafkaApis); else every partition carries the
coordinator's answer (``broker/txn/coordinator.py``: INVALID_PRODUCER_ID_MAPPING,
PRODUCER_FENCED / INVALID_PRODUCER_EPOCH before v2, CONCURRENT_TRANSACTIONS, ...).
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers._txn_common import for_version, transactions
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import TOPIC, TRANSACTIONAL_ID, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

API_KEY = 24


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    wanted = [(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions]
    errors: dict[tuple[str, int], ErrorCode] = {}
    unknown = {tp for tp in wanted if ctx.broker.topics.get_log(tp[0], tp[1]) is None}
    transactional_id = request.v3_and_below_transactional_id
    coordinator = transactions(ctx)
    denied: set[str] = set()
    if not allowed(ctx, Operation.WRITE, TRANSACTIONAL_ID, transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
        unknown = set()
    elif denied := {t for t, _ in wanted if not allowed(ctx, Operation.WRITE, TOPIC, t)}:
        error = ErrorCode.operation_not_attempted  # Kafka: the others are not attempted
    elif coordinator is None:
        error = ErrorCode.coordinator_not_available
    elif unknown:
        error = ErrorCode.operation_not_attempted
    else:
        error = await coordinator.add_partitions(
            request.v3_and_below_transactional_id,
            int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch),
            wanted,
        )
    for tp in wanted:
        if tp[0] in denied:
            errors[tp] = ErrorCode.topic_authorization_failed
        else:
            errors[tp] = ErrorCode.unknown_topic_or_partition if tp in unknown else error
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(
            types.AddPartitionsToTxnPartitionResult(
                partition_index=partition, partition_error_code=for_version(ctx, code)
            )
        )
    return types.AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            types.AddPartitionsToTxnTopicResult(name=name, results_by_partition=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )


SPEC = HandlerSpec(API_KEY, "AddPartitionsToTxn", 0, 3, handle)
