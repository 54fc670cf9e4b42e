"""EndTxn (API 26) v0-4: commit or abort the producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort and answers once it is durable (as Kafka);
the markers to every partition of the transaction are appended before the answer and made
durable afterwards, then CompleteCommit/CompleteAbort (``broker/txn/coordinator.py``). Errors as
Kafka: INVALID_PRODUCER_ID_MAPPING for an unknown id or producer id, PRODUCER_FENCED
(INVALID_PRODUCER_EPOCH before v2) for a stale epoch, INVALID_TXN_STATE for an EndTxn that
does not match the state (commit after abort, nothing open), CONCURRENT_TRANSACTIONS while a
transition is being written. v5 (transaction version 2) is not served.
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers._txn_common import for_version, transactions
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import TRANSACTIONAL_ID, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

API_KEY = 26


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    txn = transactions(ctx)
    if not allowed(ctx, Operation.WRITE, TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif txn is None:
        error = ErrorCode.coordinator_not_available
    else:
        error = await txn.end_txn(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            bool(request.committed),
        )
    return types.EndTxnResponse(throttle_time=NO_THROTTLE, error_code=for_version(ctx, error))


SPEC = HandlerSpec(API_KEY, "EndTxn", 0, 4, handle)
