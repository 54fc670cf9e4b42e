"""DeleteAcls (key 31) v1-3: remove the bindings each filter matches (needs ALTER on the
cluster); the answer lists what each filter removed."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers._acls import acl_authorizer, filter_of
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import Operation
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.delete_acls.v1.request import DeleteAclsRequest as _DeleteAclsRequestV1
    from kio.schema.delete_acls.v2.request import DeleteAclsRequest as _DeleteAclsRequestV2
    from kio.schema.delete_acls.v3.request import DeleteAclsRequest as _DeleteAclsRequestV3

    #: The request versions this handler serves (kio's classes).
    Request = _DeleteAclsRequestV1 | _DeleteAclsRequestV2 | _DeleteAclsRequestV3
    from kio.schema.delete_acls.v1.response import DeleteAclsResponse as _DeleteAclsResponseV1
    from kio.schema.delete_acls.v2.response import DeleteAclsResponse as _DeleteAclsResponseV2
    from kio.schema.delete_acls.v3.response import DeleteAclsResponse as _DeleteAclsResponseV3

    #: The response versions it answers (kio's classes).
    Response = _DeleteAclsResponseV1 | _DeleteAclsResponseV2 | _DeleteAclsResponseV3


API_KEY = 31


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)

    def result(error: ErrorCode, message: str | None, matching: Any = ()) -> Any:
        return build(
            types.DeleteAclsFilterResult,
            error_code=error,
            error_message=message,
            matching_acls=tuple(matching),
        )

    authorizer = acl_authorizer(ctx, Operation.ALTER)
    results: list[Any] = []
    if isinstance(authorizer, tuple):
        results = [result(*authorizer) for _ in request.filters]
    else:
        parsed = [filter_of(f) for f in request.filters]
        valid = [f for f, invalid in parsed if invalid is None]
        removed = iter(authorizer.delete(valid))
        for _, invalid in parsed:
            if invalid is not None:
                results.append(result(ErrorCode.invalid_request, invalid))
                continue
            results.append(
                result(
                    ErrorCode.none,
                    None,
                    (
                        build(
                            types.DeleteAclsMatchingAcl,
                            error_code=ErrorCode.none,
                            error_message=None,
                            resource_type=int(b.resource_type),
                            resource_name=b.resource_name,
                            pattern_type=int(b.pattern_type),
                            principal=b.principal,
                            host=b.host,
                            operation=int(b.operation),
                            permission_type=int(b.permission),
                        )
                        for b in next(removed)
                    ),
                )
            )
        await ctx.broker.run_blocking(authorizer.save, *authorizer.snapshot())
    return cast(
        "Response",
        build(types.DeleteAclsResponse, throttle_time=timedelta(0), filter_results=tuple(results)),
    )


SPEC = HandlerSpec(API_KEY, "DeleteAcls", 1, 3, handle)
