"""ApiVersions (key 18) v0-4: the APIs and version ranges this broker serves.

The list comes from the handler registry (every ``broker/handlers`` module's SPEC), so a version
is advertised exactly when a handler claims it. Versions we cannot serve are answered by the
router (KIP-511 fallback), never here.

Features: v4 answers carry the feature ``transaction.version`` as Kafka 4 does (supported 0-2,
finalized at level 2, finalized features epoch ``FINALIZED_FEATURES_EPOCH``): the Java client
4.x then speaks transaction version 2 (KIP-890 part 2: no AddPartitionsToTxn / AddOffsetsToTxn,
Produce v12, TxnOffsetCommit v5, EndTxn v5 with an epoch bump per transaction). Answers below
v4 carry no tagged fields at all: librdkafka 2.0.2 (kcat) fails to read an ApiVersions v3
answer with extra tagged fields ("Read underflow").

Kafka divergence: Kafka also sends finalized features (and the supported features whose minimum
is not 0) in v3 answers, and lists metadata.version, kraft.version, group.version and
eligible.leader.replicas.version; tidelog lists only the feature clients act on.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.txn.metadata import TRANSACTION_VERSION, TRANSACTION_VERSION_FEATURE
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.api_versions.v0.request import ApiVersionsRequest as _ApiVersionsRequestV0
    from kio.schema.api_versions.v1.request import ApiVersionsRequest as _ApiVersionsRequestV1
    from kio.schema.api_versions.v2.request import ApiVersionsRequest as _ApiVersionsRequestV2
    from kio.schema.api_versions.v3.request import ApiVersionsRequest as _ApiVersionsRequestV3
    from kio.schema.api_versions.v4.request import ApiVersionsRequest as _ApiVersionsRequestV4

    #: The request versions this handler serves (kio's classes).
    Request = (
        _ApiVersionsRequestV0
        | _ApiVersionsRequestV1
        | _ApiVersionsRequestV2
        | _ApiVersionsRequestV3
        | _ApiVersionsRequestV4
    )


API_KEY = 18


@functools.cache
def _api_keys(version: int, ranges: tuple[tuple[int, int, int], ...]) -> tuple[Any, ...]:
    types = response_types(API_KEY, version)
    return tuple(
        types.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in ranges
    )


#: (name, lowest supported level, highest supported level = finalized level)
FEATURES = ((TRANSACTION_VERSION_FEATURE, 0, TRANSACTION_VERSION),)
#: Kafka's epoch of the finalized features (the metadata offset there); any value >= 0 says
#: "valid", and the level never changes while a tidelog runs.
FINALIZED_FEATURES_EPOCH = 1
#: The first ApiVersions version whose answer carries the features (see the module docstring).
FEATURES_SINCE = 4


@functools.cache
def _features(version: int) -> dict[str, Any]:
    if version < FEATURES_SINCE:
        return {}
    types = response_types(API_KEY, version)
    return {
        "supported_features": tuple(
            types.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
            for n, lo, hi in FEATURES
        ),
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": tuple(
            types.FinalizedFeatureKey(name=n, max_version_level=hi, min_version_level=hi)
            for n, _, hi in FEATURES
        ),
    }


async def handle(ctx: RequestContext, request: Request) -> Any:
    types = response_types(API_KEY, ctx.api_version)
    ranges = tuple(ctx.broker.router.api_ranges())
    return build(
        types.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=_api_keys(ctx.api_version, ranges),
        throttle_time=timedelta(0),
        **_features(ctx.api_version),
    )


SPEC = HandlerSpec(api_key=API_KEY, name="ApiVersions", min_version=0, max_version=4, handle=handle)
