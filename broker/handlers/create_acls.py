"""CreateAcls (key 30) v1-3: add ACL bindings (needs ALTER on the cluster).

Without an authorizer every creation gets SECURITY_DISABLED. A binding Kafka would refuse
(unknown type, ``*`` as a prefix, a cluster not named ``kafka-cluster``, a principal without
``Type:``) gets INVALID_REQUEST with the reason; the others are added and written durably
before the answer.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from tidelog.broker.handlers._acls import acl_authorizer, binding_of
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import Operation
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.create_acls.v1.request import CreateAclsRequest as _CreateAclsRequestV1
    from kio.schema.create_acls.v2.request import CreateAclsRequest as _CreateAclsRequestV2
    from kio.schema.create_acls.v3.request import CreateAclsRequest as _CreateAclsRequestV3

    #: The request versions this handler serves (kio's classes).
    Request = _CreateAclsRequestV1 | _CreateAclsRequestV2 | _CreateAclsRequestV3
    from kio.schema.create_acls.v1.response import CreateAclsResponse as _CreateAclsResponseV1
    from kio.schema.create_acls.v2.response import CreateAclsResponse as _CreateAclsResponseV2
    from kio.schema.create_acls.v3.response import CreateAclsResponse as _CreateAclsResponseV3

    #: The response versions it answers (kio's classes).
    Response = _CreateAclsResponseV1 | _CreateAclsResponseV2 | _CreateAclsResponseV3


API_KEY = 30


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    no_authorizer = "No authorizer is configured (authorizer.class.name)."
    authorizer = acl_authorizer(ctx, Operation.ALTER, no_authorizer)
    results: list[tuple[ErrorCode, str | None]]
    if isinstance(authorizer, tuple):
        results = [authorizer] * len(request.creations)
    else:
        reasons = authorizer.create(binding_of(c) for c in request.creations)
        results = [
            (ErrorCode.none, None) if r is None else (ErrorCode.invalid_request, r) for r in reasons
        ]
        if any(r is None for r in reasons):
            await ctx.broker.run_blocking(authorizer.save, *authorizer.snapshot())
    return cast(
        "Response",
        build(
            types.CreateAclsResponse,
            throttle_time=timedelta(0),
            results=tuple(
                build(types.AclCreationResult, error_code=e, error_message=m) for e, m in results
            ),
        ),
    )


SPEC = HandlerSpec(API_KEY, "CreateAcls", 1, 3, handle)
