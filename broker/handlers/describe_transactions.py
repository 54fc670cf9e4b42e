"""DescribeTransactions (API 65) v0: the coordinator's view of transactional ids.

For each id: its state by Kafka's name (``Ongoing``, ``CompleteCommit``...), timeout, start
time (-1 when no transaction ran), producer id and epoch, and the partitions of the current
transaction. An unknown id answers TRANSACTIONAL_ID_NOT_FOUND; while the coordinator loads,
COORDINATOR_LOAD_IN_PROGRESS (as Kafka, the other fields of an error at 0).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i64

from tidelog.broker.group.wire import NO_THROTTLE
from tidelog.broker.handlers._txn_common import transactions
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import TRANSACTIONAL_ID, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

if TYPE_CHECKING:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest as Request
    from kio.schema.describe_transactions.v0.response import (
        DescribeTransactionsResponse as Response,
    )
API_KEY = 65


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    txn = transactions(ctx)
    states = []
    for transactional_id in request.transactional_ids:
        error = ErrorCode.coordinator_not_available if txn is None else txn.inactive_error()
        md = None if txn is None or error is not None else txn.transactions.get(transactional_id)
        if not allowed(ctx, Operation.DESCRIBE, TRANSACTIONAL_ID, transactional_id):
            error, md = ErrorCode.transactional_id_authorization_failed, None
        elif error is None and md is None:
            error = ErrorCode.transactional_id_not_found
        if md is None:
            # Kafka leaves the other fields at the message's defaults (0), not -1.
            states.append(
                types.TransactionState(
                    error_code=error,
                    transactional_id=transactional_id,
                    transaction_state="",
                    transaction_timeout=timedelta(0),
                    transaction_start_time=tz_aware_from_i64(i64(0)),
                    producer_id=0,
                    producer_epoch=0,
                    topics=(),
                )
            )
            continue
        states.append(
            types.TransactionState(
                error_code=ErrorCode.none,
                transactional_id=transactional_id,
                transaction_state=md.state.kafka_name,
                transaction_timeout=timedelta(milliseconds=md.txn_timeout_ms),
                transaction_start_time=tz_aware_from_i64(i64(md.txn_start_ms)),
                producer_id=md.producer_id,
                producer_epoch=md.producer_epoch,
                topics=tuple(
                    types.TopicData(topic=topic, partitions=tuple(parts))
                    for topic, parts in md.by_topic().items()
                ),
            )
        )
    return cast(
        "Response",
        types.DescribeTransactionsResponse(
            throttle_time=NO_THROTTLE, transaction_states=tuple(states)
        ),
    )


SPEC = HandlerSpec(API_KEY, "DescribeTransactions", 0, 0, handle)
