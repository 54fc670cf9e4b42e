"""DescribeClientQuotas (key 48) v0-1: the client quota entities matching a filter and their
values (``broker/client_quotas.py`` holds them and applies Kafka's filter rules). Needs
DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED, no entries); a filter Kafka
refuses answers its error and message with null entries.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.client_quotas import ComponentFilter, QuotaFilterError
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import CLUSTER, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.describe_client_quotas.v0.request import (
        DescribeClientQuotasRequest as _RequestV0,
    )
    from kio.schema.describe_client_quotas.v1.request import (
        DescribeClientQuotasRequest as _RequestV1,
    )

    Request = _RequestV0 | _RequestV1
    from kio.schema.describe_client_quotas.v0.response import (
        DescribeClientQuotasResponse as _ResponseV0,
    )
    from kio.schema.describe_client_quotas.v1.response import (
        DescribeClientQuotasResponse as _ResponseV1,
    )

    #: The response versions it answers (kio's classes).
    Response = _ResponseV0 | _ResponseV1

API_KEY = 48


def _failed(types: Any, code: ErrorCode, message: str | None) -> Response:
    return cast(
        "Response",
        build(
            types.DescribeClientQuotasResponse,
            throttle_time=timedelta(0),
            error_code=code,
            error_message=message,
            entries=None,
        ),
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    if not allowed(ctx, Operation.DESCRIBE_CONFIGS, CLUSTER):
        return _failed(types, ErrorCode.cluster_authorization_failed, None)
    components = [
        ComponentFilter(c.entity_type, int(c.match_type), c.match) for c in request.components
    ]
    try:
        found = ctx.broker.client_quotas.configs.describe(components, bool(request.strict))
    except QuotaFilterError as exc:
        return _failed(types, exc.code, str(exc))
    return cast(
        "Response",
        build(
            types.DescribeClientQuotasResponse,
            throttle_time=timedelta(0),
            error_code=ErrorCode.none,
            error_message="",  # as Kafka answers (not null)
            entries=tuple(
                build(
                    types.EntryData,
                    entity=tuple(
                        build(types.EntityData, entity_type=t, entity_name=n) for t, n in entity
                    ),
                    values=tuple(
                        build(types.ValueData, key=k, value=v) for k, v in sorted(values.items())
                    ),
                )
                for entity, values in found
            ),
        ),
    )


SPEC = HandlerSpec(API_KEY, "DescribeClientQuotas", 0, 1, handle)
