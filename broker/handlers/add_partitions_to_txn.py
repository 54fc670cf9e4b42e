"""AddPartitionsToTxn (API 24) v0-5: the partitions a transaction will write to.

v0-3 are what clients send (one transaction; the Java client caps at v3, librdkafka and the
Python clients too). Partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION and the
others OPERATION_NOT_ATTEMPTED, nothing stored (as KafkaApis); else every partition carries the
coordinator's answer (``broker/txn/coordinator.py``: INVALID_PRODUCER_ID_MAPPING,
PRODUCER_FENCED / INVALID_PRODUCER_EPOCH before v2, CONCURRENT_TRANSACTIONS, ...).

v4 and v5 are Kafka's broker-to-broker form (a partition leader asking the coordinator, KIP-890):
a batch of transactions, CLUSTER_ACTION on the cluster required (else
CLUSTER_AUTHORIZATION_FAILED at the top), each transaction either ``verify_only`` (are these
partitions in the open transaction of this producer? NONE or INVALID_TXN_STATE per partition,
nothing written: Kafka's handleVerifyPartitionsInTransaction) or an add of transaction version 2
(what Produce v12 does inside tidelog). v5 only adds the error TRANSACTION_ABORTABLE, never sent
here. A transactional id listed twice is answered INVALID_REQUEST for its partitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.add_partitions_to_txn.v4.request import (
    AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV4,
)
from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV5,
)

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers._txn_common import for_version, transactions
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import (
    CLUSTER,
    TOPIC,
    TRANSACTIONAL_ID,
    Operation,
    allowed,
)
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

#: v4+: the broker-to-broker batched form (KIP-890).
BatchedRequest = _AddPartitionsToTxnRequestV4 | _AddPartitionsToTxnRequestV5
BATCHED = (_AddPartitionsToTxnRequestV4, _AddPartitionsToTxnRequestV5)

if TYPE_CHECKING:
    from kio.schema.add_partitions_to_txn.v0.request import (
        AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV0,
    )
    from kio.schema.add_partitions_to_txn.v1.request import (
        AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV1,
    )
    from kio.schema.add_partitions_to_txn.v2.request import (
        AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV2,
    )
    from kio.schema.add_partitions_to_txn.v3.request import (
        AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV3,
    )

    #: v0-3: one transaction, what clients send.
    ClientRequest = (
        _AddPartitionsToTxnRequestV0
        | _AddPartitionsToTxnRequestV1
        | _AddPartitionsToTxnRequestV2
        | _AddPartitionsToTxnRequestV3
    )
    #: The request versions this handler serves (kio's classes).
    Request = ClientRequest | BatchedRequest

API_KEY = 24

Errors = dict[tuple[str, int], ErrorCode]


async def _one(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    wanted: Sequence[tuple[str, int]],
    *,
    verify_only: bool = False,
    client_txn_version: int = 0,
    check_transactional_id: bool = True,
) -> Errors:
    """One transaction's partitions and their error codes."""
    unknown = {tp for tp in wanted if ctx.broker.topics.get_log(tp[0], tp[1]) is None}
    coordinator = transactions(ctx)
    denied: set[str] = set()
    if check_transactional_id and not allowed(
        ctx, Operation.WRITE, TRANSACTIONAL_ID, transactional_id
    ):
        error = ErrorCode.transactional_id_authorization_failed
        unknown = set()
    elif denied := {t for t, _ in wanted if not allowed(ctx, Operation.WRITE, TOPIC, t)}:
        error = ErrorCode.operation_not_attempted  # Kafka: the others are not attempted
    elif coordinator is None:
        error = ErrorCode.coordinator_not_available
    elif unknown:
        error = ErrorCode.operation_not_attempted
    elif verify_only:
        return coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, wanted)
    else:
        error = await coordinator.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            wanted,
            client_txn_version=client_txn_version,
        )
    errors: Errors = {}
    for tp in wanted:
        if tp[0] in denied:
            errors[tp] = ErrorCode.topic_authorization_failed
        else:
            errors[tp] = ErrorCode.unknown_topic_or_partition if tp in unknown else error
    return errors


def _topic_results(ctx: RequestContext, types: Any, errors: Errors) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(
            types.AddPartitionsToTxnPartitionResult(
                partition_index=partition, partition_error_code=for_version(ctx, code)
            )
        )
    return tuple(
        types.AddPartitionsToTxnTopicResult(name=name, results_by_partition=tuple(parts))
        for name, parts in by_topic.items()
    )


async def handle(ctx: RequestContext, request: Request) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    if isinstance(request, BATCHED):
        return await _batched(ctx, request, types)
    wanted = [(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions]
    errors = await _one(
        ctx,
        request.v3_and_below_transactional_id,
        int(request.v3_and_below_producer_id),
        int(request.v3_and_below_producer_epoch),
        wanted,
    )
    return build(
        types.AddPartitionsToTxnResponse,
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=_topic_results(ctx, types, errors),
    )


async def _batched(ctx: RequestContext, request: BatchedRequest, types: Any) -> Any:
    """v4+: the broker-to-broker form, one result per transaction."""
    if not allowed(ctx, Operation.CLUSTER_ACTION, CLUSTER):
        return build(
            types.AddPartitionsToTxnResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            results_by_transaction=(),
        )
    seen: dict[str, int] = {}
    for transaction in request.transactions:
        seen[transaction.transactional_id] = seen.get(transaction.transactional_id, 0) + 1
    results = []
    for transaction in request.transactions:
        wanted = [(t.name, int(p)) for t in transaction.topics for p in t.partitions]
        if seen[transaction.transactional_id] > 1 or not transaction.transactional_id:
            errors: Errors = {tp: ErrorCode.invalid_request for tp in wanted}
        else:
            errors = await _one(
                ctx,
                transaction.transactional_id,
                int(transaction.producer_id),
                int(transaction.producer_epoch),
                wanted,
                verify_only=bool(transaction.verify_only),
                client_txn_version=2,
                check_transactional_id=False,  # CLUSTER_ACTION covers it, as in Kafka
            )
        results.append(
            types.AddPartitionsToTxnResult(
                transactional_id=transaction.transactional_id,
                topic_results=_topic_results(ctx, types, errors),
            )
        )
    return build(
        types.AddPartitionsToTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results_by_transaction=tuple(results),
    )


SPEC = HandlerSpec(API_KEY, "AddPartitionsToTxn", 0, 5, handle)
