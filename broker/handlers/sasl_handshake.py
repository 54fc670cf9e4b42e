"""SaslHandshake (key 17) v0-1: pick the SASL mechanism of a connection.

v1 is followed by SaslAuthenticate requests (KIP-152); v0 by raw size-prefixed tokens (Kafka's
legacy framing, read by the connection: ``broker/security/sasl.py``). Mechanisms not enabled on
the listener get UNSUPPORTED_SASL_MECHANISM with the list of enabled ones after
``connection.failed.authentication.delay.ms``, then the connection closes; a handshake on a
non-SASL listener or a second one gets ILLEGAL_SASL_STATE, unless it begins a re-authentication
(KIP-368, ``broker/security/sasl.py``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as _SaslHandshakeRequestV0
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as _SaslHandshakeRequestV1

    #: The request versions this handler serves (kio's classes).
    Request = _SaslHandshakeRequestV0 | _SaslHandshakeRequestV1
    from kio.schema.sasl_handshake.v0.response import (
        SaslHandshakeResponse as _SaslHandshakeResponseV0,
    )
    from kio.schema.sasl_handshake.v1.response import (
        SaslHandshakeResponse as _SaslHandshakeResponseV1,
    )

    #: The response versions it answers (kio's classes).
    Response = _SaslHandshakeResponseV0 | _SaslHandshakeResponseV1


API_KEY = 17


async def handle(ctx: RequestContext, request: Request) -> Response:
    session = ctx.session
    types = response_types(API_KEY, ctx.api_version)
    if session is None:
        return cast(
            "Response",
            build(
                types.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=()
            ),
        )
    error = session.handshake(str(request.mechanism), ctx.api_version)
    if error == ErrorCode.unsupported_sasl_mechanism:
        # A failed authentication: answered after connection.failed.authentication.delay.ms,
        # then the connection closes.
        await asyncio.sleep(session.listener.failed_auth_delay_ms / 1000)
    return cast(
        "Response",
        build(
            types.SaslHandshakeResponse,
            error_code=error,
            mechanisms=tuple(session.listener.mechanisms),
        ),
    )


SPEC = HandlerSpec(API_KEY, "SaslHandshake", 0, 1, handle)
