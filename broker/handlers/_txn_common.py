"""What the transaction handlers share: the coordinator look-up and per-version error codes.

KIP-588: clients older than InitProducerId v4, AddPartitionsToTxn v2, AddOffsetsToTxn v2,
EndTxn v2 and TxnOffsetCommit v3 do not know PRODUCER_FENCED; Kafka answers them
INVALID_PRODUCER_EPOCH instead (KafkaApis does the same mapping per API).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from tidelog.broker.handlers.base import RequestContext
    from tidelog.broker.txn.coordinator import TransactionCoordinator

#: The first version of each API that may carry PRODUCER_FENCED.
FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2, 28: 3}


def transactions(ctx: RequestContext) -> TransactionCoordinator | None:
    return ctx.broker.transactions


def for_version(ctx: RequestContext, error: ErrorCode) -> ErrorCode:
    if error is ErrorCode.producer_fenced and ctx.api_version < FENCED_SINCE.get(ctx.api_key, 0):
        return ErrorCode.invalid_producer_epoch
    return error
