"""ApiVersions (key 18) v0-4: the APIs and version ranges this broker serves.

The list comes from the handler registry (every ``broker/handlers`` module's SPEC), so a version
is advertised exactly when a handler claims it. No tagged fields are sent (supported/finalized
features stay at their defaults, which kio omits): librdkafka 2.0.2 (kcat) fails to read an
ApiVersions v3 answer with extra tagged fields. Versions we cannot serve are answered by the
router (KIP-511 fallback), never here.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

API_KEY = 18


@functools.cache
def _api_keys(version: int, ranges: tuple[tuple[int, int, int], ...]) -> tuple[Any, ...]:
    types = response_types(API_KEY, version)
    return tuple(
        types.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in ranges
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    ranges = tuple(ctx.broker.router.api_ranges())
    return build(
        types.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=_api_keys(ctx.api_version, ranges),
        throttle_time=timedelta(0),
    )


SPEC = HandlerSpec(api_key=API_KEY, name="ApiVersions", min_version=0, max_version=4, handle=handle)
