"""InitProducerId (API 22) v0-5: a producer id and epoch for idempotent and transactional producers.

Kafka behaviour kept (TransactionCoordinator.handleInitProducerId): with ``transactional_id``
null the request is accepted "blindly": a new producer id, epoch 0, whatever ``producer_id`` /
``producer_epoch`` the request carries (KIP-360's epoch bump of an existing id applies to
transactional ids only; idempotent clients bump the epoch themselves or take the new id, and
each partition then sees a producer it does not know, which may start at any sequence). The
ids come from ``broker.producer_ids`` (``broker/producer_ids.py``): never reused, even after a
crash. An empty ``transactional_id`` is INVALID_REQUEST, as in Kafka.

With a ``transactional_id`` the transaction coordinator answers
(``broker/txn/coordinator.py``, Kafka's handleInitProducerId): a new producer id, or the id's
epoch bumped (fencing every older epoch); an open transaction of an older instance is aborted
first and the caller told CONCURRENT_TRANSACTIONS (it retries); KIP-360 (v3+): a client that
sends its current producer id and epoch gets the next epoch, or the same one again when its
bump's answer was lost; a mismatch is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4). A
``transaction_timeout`` above ``transaction.max.timeout.ms`` (or <= 0) is
INVALID_TRANSACTION_TIMEOUT.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tidelog.broker.handlers._txn_common import for_version, transactions
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import (
    CLUSTER,
    TOPIC,
    TRANSACTIONAL_ID,
    Operation,
    allowed,
    allowed_any,
)
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.init_producer_id.v0.request import (
        InitProducerIdRequest as _InitProducerIdRequestV0,
    )
    from kio.schema.init_producer_id.v1.request import (
        InitProducerIdRequest as _InitProducerIdRequestV1,
    )
    from kio.schema.init_producer_id.v2.request import (
        InitProducerIdRequest as _InitProducerIdRequestV2,
    )
    from kio.schema.init_producer_id.v3.request import (
        InitProducerIdRequest as _InitProducerIdRequestV3,
    )
    from kio.schema.init_producer_id.v4.request import (
        InitProducerIdRequest as _InitProducerIdRequestV4,
    )
    from kio.schema.init_producer_id.v5.request import (
        InitProducerIdRequest as _InitProducerIdRequestV5,
    )

    #: The request versions this handler serves (kio's classes).
    Request = (
        _InitProducerIdRequestV0
        | _InitProducerIdRequestV1
        | _InitProducerIdRequestV2
        | _InitProducerIdRequestV3
        | _InitProducerIdRequestV4
        | _InitProducerIdRequestV5
    )


API_KEY = 22
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def _answer(ctx: RequestContext, error: ErrorCode, producer_id: int, epoch: int) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    return build(
        types.InitProducerIdResponse,
        throttle_time=timedelta(0),
        error_code=error,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


async def handle(ctx: RequestContext, request: Request) -> Any:
    transactional_id = request.transactional_id
    if transactional_id == "":
        return _answer(ctx, ErrorCode.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    if transactional_id is not None:
        if not allowed(ctx, Operation.WRITE, TRANSACTIONAL_ID, transactional_id):
            return _answer(
                ctx,
                ErrorCode.transactional_id_authorization_failed,
                NO_PRODUCER_ID,
                NO_PRODUCER_EPOCH,
            )
        coordinator = transactions(ctx)
        if coordinator is None:
            return _answer(
                ctx, ErrorCode.coordinator_not_available, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            )
        timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
        error, producer_id, epoch = await coordinator.init_producer_id(
            transactional_id,
            timeout_ms,
            int(getattr(request, "producer_id", NO_PRODUCER_ID)),
            int(getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)),
        )
        return _answer(ctx, for_version(ctx, error), producer_id, epoch)
    if not (
        allowed(ctx, Operation.IDEMPOTENT_WRITE, CLUSTER, log_denial=False)
        or allowed_any(ctx, Operation.WRITE, TOPIC)
    ):
        # Kafka: an idempotent producer needs WRITE on some topic (or IDEMPOTENT_WRITE).
        return _answer(
            ctx, ErrorCode.cluster_authorization_failed, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        )
    producer_id = await ctx.broker.producer_ids.generate_producer_id()
    return _answer(ctx, ErrorCode.none, producer_id, 0)


SPEC = HandlerSpec(API_KEY, "InitProducerId", 0, 5, handle)
