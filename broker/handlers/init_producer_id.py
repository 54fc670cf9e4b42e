"""InitProducerId (API 22) v0-5: a producer id for an idempotent (non-transactional) producer.

Kafka behaviour kept (TransactionCoordinator.handleInitProducerId): with ``transactional_id``
null the request is accepted "blindly": a new producer id, epoch 0, whatever ``producer_id`` /
``producer_epoch`` the request carries (KIP-360's epoch bump of an existing id applies to
transactional ids only; idempotent clients bump the epoch themselves or take the new id, and
each partition then sees a producer it does not know, which may start at any sequence). The
ids come from ``broker.producer_ids`` (``broker/producer_ids.py``): never reused, even after a
crash. An empty ``transactional_id`` is INVALID_REQUEST, as in Kafka.

Kafka divergence: tidelog has no transaction coordinator. A non-empty ``transactional_id`` is
answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED (what Kafka answers when an ACL forbids that
transactional id), and the broker logs why, once per client. Every client treats it as fatal at
once: kafka-python raises TransactionalIdAuthorizationFailedError from ``init_transactions``,
librdkafka a FATAL error, the Java client TransactionalIdAuthorizationException. Retriable
answers (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) would make them retry until their timeout,
and librdkafka retries INVALID_REQUEST the same way (measured with confluent-kafka 2.16.1 and
kafka-python 3.0.12: ``init_transactions(20)`` failed after 20 s, against 0.1 s now).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import CLUSTER, TOPIC, Operation, allowed, allowed_any
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

API_KEY = 22
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

log = logging.getLogger("tidelog.init_producer_id")
_warned: set[str | None] = set()


def _answer(ctx: RequestContext, error: ErrorCode, producer_id: int, epoch: int) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    return build(
        types.InitProducerIdResponse,
        throttle_time=timedelta(0),
        error_code=error,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    transactional_id = request.transactional_id
    if transactional_id == "":
        return _answer(ctx, ErrorCode.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    if transactional_id is not None:
        if ctx.client_id not in _warned and len(_warned) < 1000:
            _warned.add(ctx.client_id)
            log.warning(
                "client %r (%s) asked for transactional id %r: tidelog does not support "
                "transactions (answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED); use an "
                "idempotent producer (enable.idempotence=true, no transactional.id) instead",
                ctx.client_id,
                ctx.client_host,
                transactional_id,
            )
        return _answer(
            ctx, ErrorCode.transactional_id_authorization_failed, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        )
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
