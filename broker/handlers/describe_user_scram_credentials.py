"""DescribeUserScramCredentials (key 50) v0: which SCRAM mechanisms (and iteration counts) each
user has; never the credential itself. Needs DESCRIBE on the cluster. ``users`` null lists every
user; a named user without credentials gets RESOURCE_NOT_FOUND, a name given twice
DUPLICATE_RESOURCE.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import CLUSTER, Operation, allowed
from tidelog.broker.security.scram import MECHANISMS
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.describe_user_scram_credentials.v0.request import (
        DescribeUserScramCredentialsRequest as Request,
    )
    from kio.schema.describe_user_scram_credentials.v0.response import (
        DescribeUserScramCredentialsResponse as Response,
    )


API_KEY = 50


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    if not allowed(ctx, Operation.DESCRIBE, CLUSTER):
        return cast(
            "Response",
            build(
                types.DescribeUserScramCredentialsResponse,
                throttle_time=timedelta(0),
                error_code=ErrorCode.cluster_authorization_failed,
                error_message=None,
                results=(),
            ),
        )
    store = ctx.broker.security.scram
    names = store.users() if request.users is None else [u.name for u in request.users]
    results = []
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    for name in dict.fromkeys(names):
        infos = tuple(
            build(
                types.CredentialInfo,
                mechanism=MECHANISMS[mechanism][1],
                iterations=credential.iterations,
            )
            for mechanism, credential in store.of_user(name)
        )
        if counts[name] > 1:
            error, message = ErrorCode.duplicate_resource, f"Cannot describe user {name} twice"
            infos = ()
        elif not infos:
            error, message = (
                ErrorCode.resource_not_found,
                f"Attempt to describe a user credential that does not exist: {name}",
            )
        else:
            error, message = ErrorCode.none, None
        results.append(
            build(
                types.DescribeUserScramCredentialsResult,
                user=name,
                error_code=error,
                error_message=message,
                credential_infos=infos,
            )
        )
    return cast(
        "Response",
        build(
            types.DescribeUserScramCredentialsResponse,
            throttle_time=timedelta(0),
            error_code=ErrorCode.none,
            error_message=None,
            results=tuple(results),
        ),
    )


SPEC = HandlerSpec(API_KEY, "DescribeUserScramCredentials", 0, 0, handle)
