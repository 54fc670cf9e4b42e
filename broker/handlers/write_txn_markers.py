"""WriteTxnMarkers (API 27) v1: write COMMIT/ABORT markers to partitions of this broker.

Kafka's coordinator sends it to partition leaders; here the coordinator writes its markers
directly through storage, so this API serves the Admin client's ``abortTransaction``
(``tidelog transactions abort``, kafka-transactions.sh abort) for hanging transactions. Each
partition's marker goes through the broker's one ``PartitionWriter`` and the HW is awaited
(``_WAIT_MS``); a ``__consumer_offsets`` partition's marker is written by the group coordinator
(``complete_transaction``), whose replay drops or commits the transaction's pending offsets.
Per-partition errors as Kafka's storage answers them: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_PRODUCER_EPOCH (a marker epoch below the producer's), TRANSACTION_COORDINATOR_FENCED
(an older coordinator epoch).
Kafka divergence: a marker for a producer with no open transaction in the partition (one that
never wrote there, or whose transaction already ended) is refused with INVALID_TXN_STATE and
nothing is stored, where Kafka's leader would append it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidelog.broker.coordinator.log import CoordinatorLogError
from tidelog.broker.group.config import OFFSETS_TOPIC
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import CLUSTER, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

if TYPE_CHECKING:
    from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest as Request


API_KEY = 27
_WAIT_MS = 30_000


async def _write(ctx: RequestContext, marker: Any, topic: str, partition: int) -> ErrorCode:
    broker = ctx.broker
    partition_log = broker.topics.get_log(topic, partition)
    if partition_log is None:
        return ErrorCode.unknown_topic_or_partition
    producer_id = int(marker.producer_id)
    entry = partition_log.producer_state.last_entry(producer_id)
    if entry is None or entry.current_txn_first_offset < 0:
        return ErrorCode.invalid_txn_state
    commit = bool(marker.transaction_result)
    try:
        if topic == OFFSETS_TOPIC:
            await broker.groups.complete_transaction(
                partition, producer_id, int(marker.producer_epoch), commit
            )
        else:
            await broker.partition_writer.append_marker(
                topic,
                partition,
                producer_id=producer_id,
                producer_epoch=int(marker.producer_epoch),
                coordinator_epoch=int(marker.coordinator_epoch),
                commit=commit,
                timeout_ms=_WAIT_MS,
            ).durable
    except CoordinatorLogError as exc:
        return exc.error
    return ErrorCode.none


async def handle(ctx: RequestContext, request: Request) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    results = []
    cluster_ok = allowed(ctx, Operation.CLUSTER_ACTION, CLUSTER)
    for marker in request.markers:
        topics = []
        for t in marker.topics:
            parts = []
            for index in t.partition_indexes:
                error = (
                    await _write(ctx, marker, t.name, int(index))
                    if cluster_ok
                    else ErrorCode.cluster_authorization_failed
                )
                parts.append(
                    types.WritableTxnMarkerPartitionResult(partition_index=index, error_code=error)
                )
            topics.append(types.WritableTxnMarkerTopicResult(name=t.name, partitions=tuple(parts)))
        results.append(
            types.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=tuple(topics))
        )
    return types.WriteTxnMarkersResponse(markers=tuple(results))


SPEC = HandlerSpec(API_KEY, "WriteTxnMarkers", 1, 1, handle)
