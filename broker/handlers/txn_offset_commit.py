"""TxnOffsetCommit (API 28) v0-5: offsets committed as part of a transaction.

The producer must hold the transactional id's current producer id and epoch and have an open
transaction holding the group's ``__consumer_offsets`` partition, added by AddOffsetsToTxn
(INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED - INVALID_PRODUCER_EPOCH before v3 - or
INVALID_TXN_STATE otherwise, nothing stored); the group checks the member as OffsetCommit
does (v3+ carries generation, member and instance ids; for a KIP-848 consumer group the
generation is the member epoch). The offsets are written to ``__consumer_offsets`` as a
transactional batch and stay invisible to OffsetFetch until the transaction's marker is
replayed (``OffsetMetadataManager.commit_transactional_offsets``,
``broker/group/offset_metadata_manager.py``).

v5 is transaction version 2 (KIP-890 part 2): the client sends no AddOffsetsToTxn, so the
group's ``__consumer_offsets`` partition is added to the transaction here first (the
coordinator's AddPartitionsToTxn, as Kafka's group coordinator asks the transaction
coordinator); its errors are answered for every partition (CONCURRENT_TRANSACTIONS, ...; a
fenced epoch as INVALID_PRODUCER_EPOCH, as Kafka's AddPartitionsToTxnManager answers it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidelog.broker.group.config import OFFSETS_TOPIC
from tidelog.broker.group.results import CommitPartition, PartitionError
from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers._txn_common import for_version, transactions
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, TOPIC, TRANSACTIONAL_ID, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.txn_offset_commit.v0.request import (
        TxnOffsetCommitRequest as _TxnOffsetCommitRequestV0,
    )
    from kio.schema.txn_offset_commit.v1.request import (
        TxnOffsetCommitRequest as _TxnOffsetCommitRequestV1,
    )
    from kio.schema.txn_offset_commit.v2.request import (
        TxnOffsetCommitRequest as _TxnOffsetCommitRequestV2,
    )
    from kio.schema.txn_offset_commit.v3.request import (
        TxnOffsetCommitRequest as _TxnOffsetCommitRequestV3,
    )
    from kio.schema.txn_offset_commit.v4.request import (
        TxnOffsetCommitRequest as _TxnOffsetCommitRequestV4,
    )
    from kio.schema.txn_offset_commit.v5.request import (
        TxnOffsetCommitRequest as _TxnOffsetCommitRequestV5,
    )

    #: The request versions this handler serves (kio's classes).
    Request = (
        _TxnOffsetCommitRequestV0
        | _TxnOffsetCommitRequestV1
        | _TxnOffsetCommitRequestV2
        | _TxnOffsetCommitRequestV3
        | _TxnOffsetCommitRequestV4
        | _TxnOffsetCommitRequestV5
    )


API_KEY = 28


async def handle(ctx: RequestContext, request: Request) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    partitions = [
        CommitPartition(
            t.name,
            int(p.partition_index),
            int(p.committed_offset),
            int(getattr(p, "committed_leader_epoch", -1)),
            p.committed_metadata,
        )
        for t in request.topics
        for p in t.partitions
    ]
    txn = transactions(ctx)
    groups = coordinator(ctx)
    results: list[PartitionError]
    denied = {p.topic for p in partitions if not allowed(ctx, Operation.READ, TOPIC, p.topic)}
    if not allowed(ctx, Operation.WRITE, TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not allowed(ctx, Operation.READ, GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    elif txn is None or groups is None:
        error = ErrorCode.coordinator_not_available
    elif not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        offsets_partition = (OFFSETS_TOPIC, groups.partition_for(request.group_id))
        error = ErrorCode.none
        if ctx.api_version >= IMPLICIT_ADD_SINCE:
            error = await txn.add_partitions(
                request.transactional_id,
                int(request.producer_id),
                int(request.producer_epoch),
                [offsets_partition],
                client_txn_version=2,
            )
            if error is ErrorCode.producer_fenced:
                # As Kafka's AddPartitionsToTxnManager, for the group coordinator as for a
                # partition leader: a fenced epoch is answered INVALID_PRODUCER_EPOCH.
                error = ErrorCode.invalid_producer_epoch
        if error is ErrorCode.none:
            error = txn.check_txn_offset_commit(
                request.transactional_id,
                int(request.producer_id),
                int(request.producer_epoch),
                offsets_partition,
            )
    if error is not ErrorCode.none:
        results = [PartitionError(p.topic, p.partition, error) for p in partitions]
    else:
        # Kafka: the topics the principal may not READ fail; the others are still committed.
        results = [
            PartitionError(p.topic, p.partition, ErrorCode.topic_authorization_failed)
            for p in partitions
            if p.topic in denied
        ]
        partitions = [p for p in partitions if p.topic not in denied]
        topics = ctx.broker.topics

        def exists(topic: str, partition: int) -> bool:
            info = topics.get(topic)
            return info is not None and 0 <= partition < info.partitions

        if partitions and groups is not None:
            results += await groups.commit_transactional_offsets(
                group_id=request.group_id,
                producer_id=int(request.producer_id),
                producer_epoch=int(request.producer_epoch),
                generation_id=int(getattr(request, "generation_id", -1)),
                member_id=str(getattr(request, "member_id", "")),
                group_instance_id=getattr(request, "group_instance_id", None),
                partitions=partitions,
                partition_exists=exists,
            )
    by_topic: dict[str, list[Any]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            types.TxnOffsetCommitResponsePartition(
                partition_index=r.partition, error_code=for_version(ctx, r.error)
            )
        )
    return build(
        types.TxnOffsetCommitResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            types.TxnOffsetCommitResponseTopic(name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )


#: The first version that adds the group's offsets partition to the transaction itself.
IMPLICIT_ADD_SINCE = 5

SPEC = HandlerSpec(API_KEY, "TxnOffsetCommit", 0, 5, handle)
