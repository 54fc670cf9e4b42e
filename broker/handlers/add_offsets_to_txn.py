"""AddOffsetsToTxn (API 25) v0-4: add a group's ``__consumer_offsets`` partition to a transaction.

As Kafka: the partition is ``abs(groupId.hashCode()) % offsets.topic.num.partitions``; the
answer is the coordinator's for AddPartitionsToTxn of that partition (PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidelog.broker.group.config import OFFSETS_TOPIC
from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers._txn_common import for_version, transactions
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP, TRANSACTIONAL_ID, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

if TYPE_CHECKING:
    from kio.schema.add_offsets_to_txn.v0.request import (
        AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV0,
    )
    from kio.schema.add_offsets_to_txn.v1.request import (
        AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV1,
    )
    from kio.schema.add_offsets_to_txn.v2.request import (
        AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV2,
    )
    from kio.schema.add_offsets_to_txn.v3.request import (
        AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV3,
    )
    from kio.schema.add_offsets_to_txn.v4.request import (
        AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV4,
    )

    #: The request versions this handler serves (kio's classes).
    Request = (
        _AddOffsetsToTxnRequestV0
        | _AddOffsetsToTxnRequestV1
        | _AddOffsetsToTxnRequestV2
        | _AddOffsetsToTxnRequestV3
        | _AddOffsetsToTxnRequestV4
    )


API_KEY = 25


async def handle(ctx: RequestContext, request: Request) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    txn = transactions(ctx)
    groups = coordinator(ctx)
    if not allowed(ctx, Operation.WRITE, TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not allowed(ctx, Operation.READ, GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    elif txn is None or groups is None:
        error = ErrorCode.coordinator_not_available
    elif not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        error = await txn.add_partitions(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            [(OFFSETS_TOPIC, groups.partition_for(request.group_id))],
        )
    return types.AddOffsetsToTxnResponse(
        throttle_time=NO_THROTTLE, error_code=for_version(ctx, error)
    )


SPEC = HandlerSpec(API_KEY, "AddOffsetsToTxn", 0, 4, handle)
