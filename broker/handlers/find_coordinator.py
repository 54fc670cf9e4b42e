"""FindCoordinator (API 10) v0-4: this node coordinates every group (and transaction).

v0 asks for one group; v1-3 add ``key_type`` (0 = group, 1 = transaction); v4 batches keys
(KIP-699) and answers one entry per key. A single node leads every partition of
``__consumer_offsets``, so the answer is always this broker's advertised endpoint, also while
the coordinator is still loading (the group APIs then answer COORDINATOR_LOAD_IN_PROGRESS, as
Kafka does). Other key types are INVALID_REQUEST; without a coordinator wired in the answer is
COORDINATOR_NOT_AVAILABLE. As Kafka does, the first authorized lookup of a type creates its
internal topic (``__consumer_offsets`` for groups, ``__transaction_state`` for transactions).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast

from tidelog.broker.group.wire import NO_THROTTLE, coordinator
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import GROUP as GROUP_RESOURCE
from tidelog.broker.security.access import TRANSACTIONAL_ID, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.find_coordinator.v0.request import (
        FindCoordinatorRequest as _FindCoordinatorRequestV0,
    )
    from kio.schema.find_coordinator.v1.request import (
        FindCoordinatorRequest as _FindCoordinatorRequestV1,
    )
    from kio.schema.find_coordinator.v2.request import (
        FindCoordinatorRequest as _FindCoordinatorRequestV2,
    )
    from kio.schema.find_coordinator.v3.request import (
        FindCoordinatorRequest as _FindCoordinatorRequestV3,
    )
    from kio.schema.find_coordinator.v4.request import (
        FindCoordinatorRequest as _FindCoordinatorRequestV4,
    )

    #: The request versions this handler serves (kio's classes).
    Request = (
        _FindCoordinatorRequestV0
        | _FindCoordinatorRequestV1
        | _FindCoordinatorRequestV2
        | _FindCoordinatorRequestV3
        | _FindCoordinatorRequestV4
    )
    from kio.schema.find_coordinator.v0.response import (
        FindCoordinatorResponse as _FindCoordinatorResponseV0,
    )
    from kio.schema.find_coordinator.v1.response import (
        FindCoordinatorResponse as _FindCoordinatorResponseV1,
    )
    from kio.schema.find_coordinator.v2.response import (
        FindCoordinatorResponse as _FindCoordinatorResponseV2,
    )
    from kio.schema.find_coordinator.v3.response import (
        FindCoordinatorResponse as _FindCoordinatorResponseV3,
    )
    from kio.schema.find_coordinator.v4.response import (
        FindCoordinatorResponse as _FindCoordinatorResponseV4,
    )

    #: The response versions it answers (kio's classes).
    Response = (
        _FindCoordinatorResponseV0
        | _FindCoordinatorResponseV1
        | _FindCoordinatorResponseV2
        | _FindCoordinatorResponseV3
        | _FindCoordinatorResponseV4
    )


API_KEY = 10
log = logging.getLogger("tidelog.find_coordinator")
GROUP, TRANSACTION = 0, 1


def _authorized(ctx: RequestContext, key_type: int, key: str) -> ErrorCode:
    """Kafka: DESCRIBE on the group (or the transactional id) the key names."""
    if key_type == GROUP:
        if not allowed(ctx, Operation.DESCRIBE, GROUP_RESOURCE, key):
            return ErrorCode.group_authorization_failed
    elif not allowed(ctx, Operation.DESCRIBE, TRANSACTIONAL_ID, key):
        return ErrorCode.transactional_id_authorization_failed
    return ErrorCode.none


async def _answer(ctx: RequestContext, key_type: int) -> tuple[ErrorCode, int, str, int]:
    if key_type not in (GROUP, TRANSACTION):
        return ErrorCode.invalid_request, -1, "", -1
    broker = ctx.broker
    prepare = broker.coordinator_topics.get(key_type)
    if prepare is None or (key_type == GROUP and coordinator(ctx) is None):
        return ErrorCode.coordinator_not_available, -1, "", -1
    try:
        await prepare()  # as Kafka: the first lookup of its type creates the internal topic
    except Exception as exc:  # TopicError (storage), or the broker stopping
        log.warning("cannot create the internal topic for key type %d: %s", key_type, exc)
        return ErrorCode.coordinator_not_available, -1, "", -1
    endpoint = broker.endpoint_for(ctx.listener_name)
    port = broker.advertised_port(endpoint)
    return ErrorCode.none, broker.node_id, endpoint.advertised_host, port


_NOT_ASKED = (ErrorCode.none, -1, "", -1)


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    key_type = int(getattr(request, "key_type", GROUP))
    # v4+ asks for several keys at once
    keys = request.coordinator_keys if hasattr(request, "coordinator_keys") else (request.key,)
    # Kafka authorizes each key before it looks the coordinator up (and so before the
    # internal topic is made): a lookup nobody may make creates nothing.
    denied = {key: _authorized(ctx, key_type, key) for key in keys}
    asked = any(code is ErrorCode.none for code in denied.values())
    error, node_id, host, port = await _answer(ctx, key_type) if asked else _NOT_ASKED
    if ctx.api_version >= 4:
        coordinators = []
        for key in keys:
            code = error if error is not ErrorCode.none else denied[key]
            if key_type not in (GROUP, TRANSACTION):
                code = ErrorCode.invalid_request
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
        return cast(
            "Response",
            types.FindCoordinatorResponse(
                throttle_time=NO_THROTTLE, coordinators=tuple(coordinators)
            ),
        )
    if key_type not in (GROUP, TRANSACTION):
        error = ErrorCode.invalid_request
    elif error is ErrorCode.none:
        error = denied[keys[0]]
    if error is not ErrorCode.none:
        node_id, host, port = -1, "", -1
    message = None if error is ErrorCode.none else error.name.upper()
    return cast(
        "Response",
        build(
            types.FindCoordinatorResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message,
            node_id=node_id,
            host=host,
            port=port,
        ),
    )


SPEC = HandlerSpec(API_KEY, "FindCoordinator", 0, 4, handle)
