"""ListTransactions (API 66) v0-1: transactional ids known to the coordinator.

Filters as Kafka: ``state_filters`` by Kafka's state names (names Kafka does not know come back
in ``unknown_state_filters`` and match nothing), ``producer_id_filters``, and (v1)
``duration_filter``: only transactions running for longer than that many milliseconds.
Dead ids are never listed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers._txn_common import transactions
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import TRANSACTIONAL_ID, Operation, allowed
from tidelog.broker.txn.metadata import TxnState
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.list_transactions.v0.request import (
        ListTransactionsRequest as _ListTransactionsRequestV0,
    )
    from kio.schema.list_transactions.v1.request import (
        ListTransactionsRequest as _ListTransactionsRequestV1,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _ListTransactionsRequestV0 | _ListTransactionsRequestV1
    from kio.schema.list_transactions.v0.response import (
        ListTransactionsResponse as _ListTransactionsResponseV0,
    )
    from kio.schema.list_transactions.v1.response import (
        ListTransactionsResponse as _ListTransactionsResponseV1,
    )

    #: The response versions it answers (kio's classes).
    Response = _ListTransactionsResponseV0 | _ListTransactionsResponseV1


API_KEY = 66
_NAMES = {s.kafka_name for s in TxnState}


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    txn = transactions(ctx)
    wanted_states = set(request.state_filters)
    unknown = tuple(s for s in request.state_filters if s not in _NAMES)
    producers = {int(p) for p in request.producer_id_filters}
    duration = int(getattr(request, "duration_filter", -1))
    error = ErrorCode.coordinator_not_available if txn is None else txn.inactive_error()
    listed = []
    if txn is not None and error is None:
        now = ctx.broker.clock()
        for md in sorted(txn.transactions.values(), key=lambda m: m.transactional_id):
            if md.state is TxnState.DEAD:
                continue
            if wanted_states and md.state.kafka_name not in wanted_states:
                continue
            if producers and md.producer_id not in producers:
                continue
            if not allowed(
                ctx, Operation.DESCRIBE, TRANSACTIONAL_ID, md.transactional_id, log_denial=False
            ):
                continue  # Kafka lists only the ids the principal may DESCRIBE
            if duration >= 0 and (md.txn_start_ms < 0 or now - md.txn_start_ms <= duration):
                continue
            listed.append(
                types.TransactionState(
                    transactional_id=md.transactional_id,
                    producer_id=md.producer_id,
                    transaction_state=md.state.kafka_name,
                )
            )
    return cast(
        "Response",
        build(
            types.ListTransactionsResponse,
            throttle_time=NO_THROTTLE,
            error_code=error or ErrorCode.none,
            unknown_state_filters=unknown,
            transaction_states=tuple(listed),
        ),
    )


SPEC = HandlerSpec(API_KEY, "ListTransactions", 0, 1, handle)
