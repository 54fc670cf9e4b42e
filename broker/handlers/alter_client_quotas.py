"""AlterClientQuotas (key 49) v0-1: set or remove client quota values per entity
(``broker/client_quotas.py`` validates as Kafka's controller). Each entity gets its own error;
``validate_only`` checks without changing anything. Changes take effect at once (the quota
managers) and are written durably (``tidelog-dynamic-configs.json``, in a worker thread) before
the answer. Needs ALTER_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every
entity).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, cast

from tidelog.broker.client_quotas import Entity, entity_of
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.security.access import CLUSTER, Operation, allowed
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.alter_client_quotas.v0.request import AlterClientQuotasRequest as _RequestV0
    from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest as _RequestV1

    Request = _RequestV0 | _RequestV1
    from kio.schema.alter_client_quotas.v0.response import AlterClientQuotasResponse as _ResponseV0
    from kio.schema.alter_client_quotas.v1.response import AlterClientQuotasResponse as _ResponseV1

    #: The response versions it answers (kio's classes).
    Response = _ResponseV0 | _ResponseV1

API_KEY = 49


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    entries = [
        (
            [(e.entity_type, e.entity_name) for e in entry.entity],
            [(op.key, float(op.value), bool(op.remove)) for op in entry.ops],
        )
        for entry in request.entries
    ]
    results: dict[Entity, tuple[ErrorCode, str | None]]
    if not allowed(ctx, Operation.ALTER_CONFIGS, CLUSTER):
        results = {
            entity_of(pairs): (ErrorCode.cluster_authorization_failed, None) for pairs, _ in entries
        }
    else:
        quotas = ctx.broker.client_quotas
        results, records = quotas.configs.alter(entries)
        if records and not request.validate_only:
            snapshot = quotas.apply(records)
            await ctx.broker.run_blocking(quotas.write, snapshot)
    return cast(
        "Response",
        build(
            types.AlterClientQuotasResponse,
            throttle_time=timedelta(0),
            entries=tuple(
                build(
                    types.EntryData,
                    error_code=code,
                    error_message=message,
                    entity=tuple(
                        build(types.EntityData, entity_type=t, entity_name=n) for t, n in entity
                    ),
                )
                for entity, (code, message) in results.items()
            ),
        ),
    )


SPEC = HandlerSpec(API_KEY, "AlterClientQuotas", 0, 1, handle)
