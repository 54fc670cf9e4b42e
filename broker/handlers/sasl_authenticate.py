"""SaslAuthenticate (key 36) v0-2: one SASL token each way (KIP-152).

The token goes to the connection's mechanism (``broker/security/sasl.py``). A failure answers
SASL_AUTHENTICATION_FAILED with Kafka's message after ``connection.failed.authentication.delay.ms``;
the connection then closes. v1+ answers the session lifetime once the exchange completes
(KIP-368: ``connections.max.reauth.ms`` or the OAUTHBEARER token's expiry, whichever is first;
0: no limit); the client re-authenticates on the same connection before it ends.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.sasl_authenticate.v0.request import (
        SaslAuthenticateRequest as _SaslAuthenticateRequestV0,
    )
    from kio.schema.sasl_authenticate.v1.request import (
        SaslAuthenticateRequest as _SaslAuthenticateRequestV1,
    )
    from kio.schema.sasl_authenticate.v2.request import (
        SaslAuthenticateRequest as _SaslAuthenticateRequestV2,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _SaslAuthenticateRequestV0 | _SaslAuthenticateRequestV1 | _SaslAuthenticateRequestV2
    from kio.schema.sasl_authenticate.v0.response import (
        SaslAuthenticateResponse as _SaslAuthenticateResponseV0,
    )
    from kio.schema.sasl_authenticate.v1.response import (
        SaslAuthenticateResponse as _SaslAuthenticateResponseV1,
    )
    from kio.schema.sasl_authenticate.v2.response import (
        SaslAuthenticateResponse as _SaslAuthenticateResponseV2,
    )

    #: The response versions it answers (kio's classes).
    Response = (
        _SaslAuthenticateResponseV0 | _SaslAuthenticateResponseV1 | _SaslAuthenticateResponseV2
    )


API_KEY = 36


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    session = ctx.session
    if session is None or session.authenticated:
        return cast(
            "Response",
            build(
                types.SaslAuthenticateResponse,
                error_code=ErrorCode.illegal_sasl_state,
                error_message="SaslAuthenticate is not expected on this connection",
                auth_bytes=b"",
                session_lifetime=timedelta(0),
            ),
        )
    error, message, token = session.authenticate(bytes(request.auth_bytes))
    if error != ErrorCode.none:
        delay_ms = session.listener.failed_auth_delay_ms
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)
    lifetime_ms = session.session_lifetime_ms if session.authenticated else 0
    return cast(
        "Response",
        build(
            types.SaslAuthenticateResponse,
            error_code=error,
            # Kafka's answers carry "" (its default), not null, when there is no error.
            error_message="" if message is None else message,
            auth_bytes=token,
            session_lifetime=timedelta(milliseconds=lifetime_ms),
        ),
    )


SPEC = HandlerSpec(API_KEY, "SaslAuthenticate", 0, 2, handle)
