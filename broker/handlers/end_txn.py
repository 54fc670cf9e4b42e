"""EndTxn (API 26) v0-5: commit or abort the producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort and answers once it is durable (as Kafka);
the markers to every partition of the transaction are appended before the answer and made
durable afterwards, then CompleteCommit/CompleteAbort (``broker/txn/coordinator.py``,
``broker/txn/marker_channel.py``). Errors as
Kafka: INVALID_PRODUCER_ID_MAPPING for an unknown id or producer id, PRODUCER_FENCED
(INVALID_PRODUCER_EPOCH before v2) for a stale epoch, INVALID_TXN_STATE for an EndTxn that
does not match the state (commit after abort, commit with nothing open), CONCURRENT_TRANSACTIONS
while a transition is being written: the table of ``broker/txn/metadata.py`` (``END_TXN``),
shown in docs/transactions.md.

v5 is transaction version 2 (KIP-890 part 2): the commit/abort bumps the producer epoch (the
markers carry the bumped epoch, fencing every batch of the old one) and the answer carries the
producer id and epoch the producer continues with; a retry with the epoch before the bump gets
the same answer. Clients use v5 only when ApiVersions finalizes ``transaction.version`` 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers._txn_common import for_version, transactions
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import TRANSACTIONAL_ID, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.end_txn.v0.request import EndTxnRequest as _EndTxnRequestV0
    from kio.schema.end_txn.v1.request import EndTxnRequest as _EndTxnRequestV1
    from kio.schema.end_txn.v2.request import EndTxnRequest as _EndTxnRequestV2
    from kio.schema.end_txn.v3.request import EndTxnRequest as _EndTxnRequestV3
    from kio.schema.end_txn.v4.request import EndTxnRequest as _EndTxnRequestV4
    from kio.schema.end_txn.v5.request import EndTxnRequest as _EndTxnRequestV5

    #: The request versions this handler serves (kio's classes).
    Request = (
        _EndTxnRequestV0
        | _EndTxnRequestV1
        | _EndTxnRequestV2
        | _EndTxnRequestV3
        | _EndTxnRequestV4
        | _EndTxnRequestV5
    )


API_KEY = 26


async def handle(ctx: RequestContext, request: Request) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    txn = transactions(ctx)
    producer_id, producer_epoch = -1, -1
    if not allowed(ctx, Operation.WRITE, TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif txn is None:
        error = ErrorCode.coordinator_not_available
    else:
        error, producer_id, producer_epoch = await txn.end_txn(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            bool(request.committed),
            TV2_END_TXN_CLIENT_VERSION if ctx.api_version >= 5 else 0,
        )
    return build(
        types.EndTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=for_version(ctx, error),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


#: EndTxn v5+ is sent only by clients of transaction version 2.
TV2_END_TXN_CLIENT_VERSION = 2

SPEC = HandlerSpec(API_KEY, "EndTxn", 0, 5, handle)
