"""DescribeAcls (key 29) v1-3: the ACL bindings matching a filter (needs DESCRIBE on the
cluster), grouped by resource pattern in the authorizer's sorted order."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers._acls import acl_authorizer, filter_of
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import Operation
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.describe_acls.v1.request import DescribeAclsRequest as _DescribeAclsRequestV1
    from kio.schema.describe_acls.v2.request import DescribeAclsRequest as _DescribeAclsRequestV2
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest as _DescribeAclsRequestV3

    #: The request versions this handler serves (kio's classes).
    Request = _DescribeAclsRequestV1 | _DescribeAclsRequestV2 | _DescribeAclsRequestV3
    from kio.schema.describe_acls.v1.response import DescribeAclsResponse as _DescribeAclsResponseV1
    from kio.schema.describe_acls.v2.response import DescribeAclsResponse as _DescribeAclsResponseV2
    from kio.schema.describe_acls.v3.response import DescribeAclsResponse as _DescribeAclsResponseV3

    #: The response versions it answers (kio's classes).
    Response = _DescribeAclsResponseV1 | _DescribeAclsResponseV2 | _DescribeAclsResponseV3


API_KEY = 29


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)

    def answer(error: ErrorCode, message: str | None, resources: Any = ()) -> Response:
        return cast(
            "Response",
            build(
                types.DescribeAclsResponse,
                throttle_time=timedelta(0),
                error_code=error,
                error_message=message,
                resources=tuple(resources),
            ),
        )

    authorizer = acl_authorizer(ctx, Operation.DESCRIBE)
    if isinstance(authorizer, tuple):
        return answer(*authorizer)
    acl_filter, invalid = filter_of(request)
    if invalid is not None:
        return answer(ErrorCode.invalid_request, invalid)
    grouped: dict[tuple[int, str, int], list[Any]] = {}
    for b in authorizer.describe(acl_filter):
        grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            build(
                types.AclDescription,
                principal=b.principal,
                host=b.host,
                operation=int(b.operation),
                permission_type=int(b.permission),
            )
        )
    return answer(
        ErrorCode.none,
        None,
        (
            build(
                types.DescribeAclsResource,
                resource_type=rtype,
                resource_name=name,
                pattern_type=ptype,
                acls=tuple(acls),
            )
            for (rtype, name, ptype), acls in grouped.items()
        ),
    )


SPEC = HandlerSpec(API_KEY, "DescribeAcls", 1, 3, handle)
