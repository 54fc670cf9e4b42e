"""FindCoordinator (API 10) v0-4: this node coordinates every group (and transaction).

v0 asks for one group; v1-3 add ``key_type`` (0 = group, 1 = transaction); v4 batches keys
(KIP-699) and answers one entry per key. A single node leads every partition of
``__consumer_offsets``, so the answer is always this broker's advertised endpoint, also while
the coordinator is still loading (the group APIs then answer COORDINATOR_LOAD_IN_PROGRESS, as
Kafka does). Other key types are INVALID_REQUEST; without a coordinator wired in the answer is
COORDINATOR_NOT_AVAILABLE. A lookup for a group creates ``__consumer_offsets`` when it does not
exist yet, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP as GROUP_RESOURCE
from tidelog.broker.security.access import TRANSACTIONAL_ID, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

API_KEY = 10
GROUP, TRANSACTION = 0, 1


def _authorized(ctx: RequestContext, key_type: int, key: str) -> ErrorCode:
    """Kafka: DESCRIBE on the group (or the transactional id) the key names."""
    if key_type == GROUP:
        if not allowed(ctx, Operation.DESCRIBE, GROUP_RESOURCE, key):
            return ErrorCode.group_authorization_failed
    elif not allowed(ctx, Operation.DESCRIBE, TRANSACTIONAL_ID, key):
        return ErrorCode.transactional_id_authorization_failed
    return ErrorCode.none


def _answer(ctx: RequestContext, key_type: int) -> tuple[ErrorCode, int, str, int]:
    if key_type not in (GROUP, TRANSACTION):
        return ErrorCode.invalid_request, -1, "", -1
    if key_type == GROUP:
        if coordinator(ctx) is None:
            return ErrorCode.coordinator_not_available, -1, "", -1
        ctx.broker.ensure_offsets_topic()  # as Kafka: the first group lookup creates it
    broker = ctx.broker
    endpoint = broker.endpoint_for(ctx.listener_name)
    port = broker.advertised_port(endpoint)
    return ErrorCode.none, broker.node_id, endpoint.advertised_host, port


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    key_type = int(getattr(request, "key_type", GROUP))
    error, node_id, host, port = _answer(ctx, key_type)
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            code = _authorized(ctx, key_type, key) if error is ErrorCode.none else error
            ok = code is ErrorCode.none
            coordinators.append(
                types.Coordinator(
                    key=key,
                    node_id=node_id if ok else -1,
                    host=host if ok else "",
                    port=port if ok else -1,
                    error_code=code,
                    error_message=None if ok else code.name.upper(),
                )
            )
        return types.FindCoordinatorResponse(
            throttle_time=NO_THROTTLE, coordinators=tuple(coordinators)
        )
    if error is ErrorCode.none:
        error = _authorized(ctx, key_type, request.key)
        if error is not ErrorCode.none:
            node_id, host, port = -1, "", -1
    message = None if error is ErrorCode.none else error.name.upper()
    return build(
        types.FindCoordinatorResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )


SPEC = HandlerSpec(API_KEY, "FindCoordinator", 0, 4, handle)
