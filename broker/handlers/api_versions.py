"""ApiVersions (key 18) v0-4: the APIs and version ranges this broker serves.

The list comes from the router's ``API_TABLE`` rows (``broker/api_table.py``: each repeats a
``broker/handlers`` module's SPEC, checked by a test), so a version is advertised exactly when a
handler claims it. Versions we cannot serve are answered by the
router (KIP-511 fallback), never here.

Features (KIP-584; what Java's ``Admin.describeFeatures`` and ``kafka-features.sh describe``
show): v4 answers carry, as Kafka 4.4 does, every feature tidelog implements with its supported
range and its finalized level (the highest it supports), and the finalized features epoch
``FINALIZED_FEATURES_EPOCH``. Like the API list, a feature that needs an API is finalized only
while a handler serves that API (``FEATURES``):

- ``transaction.version`` 0-2, finalized at 2: the Java client 4.x then speaks transaction
  version 2 (KIP-890 part 2: no AddPartitionsToTxn / AddOffsetsToTxn, Produce v12,
  TxnOffsetCommit v5, EndTxn v5 with an epoch bump per transaction);
- ``group.version`` 0-1, finalized at 1: the consumer rebalance protocol (KIP-848,
  ConsumerGroupHeartbeat);
- ``share.version`` 0-1, finalized at 1: share groups (KIP-932, ShareGroupHeartbeat).

Answers below v4 carry no tagged fields at all: librdkafka 2.0.2 (kcat) fails to read an
ApiVersions v3 answer with extra tagged fields ("Read underflow").

Kafka divergence (docs/kafka-differences.md): a fresh Kafka 4.4 node also finalizes
``share.version`` 2 (share-group dead-letter queues, KIP-1191; not served here),
``eligible.leader.replicas``
``.version`` 1 (replication; one node has no replicas), ``metadata.version`` and
``kraft.version`` (its KRaft metadata log and quorum; tidelog has neither); it sends the
finalized features (and the supported ones whose minimum is not 0) in v3 answers too, and its
epoch is the offset of its metadata log.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.api_table import API_TABLE
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.broker.txn import TRANSACTION_VERSION, TRANSACTION_VERSION_FEATURE
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
    from kio.schema.api_versions.v0.response import ApiVersionsResponse as _ApiVersionsResponseV0
    from kio.schema.api_versions.v1.response import ApiVersionsResponse as _ApiVersionsResponseV1
    from kio.schema.api_versions.v2.response import ApiVersionsResponse as _ApiVersionsResponseV2
    from kio.schema.api_versions.v3.response import ApiVersionsResponse as _ApiVersionsResponseV3
    from kio.schema.api_versions.v4.response import ApiVersionsResponse as _ApiVersionsResponseV4

    #: The response versions it answers (kio's classes).
    Response = (
        _ApiVersionsResponseV0
        | _ApiVersionsResponseV1
        | _ApiVersionsResponseV2
        | _ApiVersionsResponseV3
        | _ApiVersionsResponseV4
    )


API_KEY = 18


@functools.cache
def _api_keys(version: int, ranges: tuple[tuple[int, int, int], ...]) -> tuple[Any, ...]:
    types = response_types(API_KEY, version)
    return tuple(
        types.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in ranges
    )


@dataclass(frozen=True, slots=True)
class Feature:
    """A feature tidelog implements up to ``max_level`` (supported 0-max, finalized at max),
    when the API named ``needs_api`` is served (None: always)."""

    name: str
    max_level: int
    needs_api: str | None = None


FEATURES = (
    Feature("group.version", 1, "ConsumerGroupHeartbeat"),
    Feature("share.version", 1, "ShareGroupHeartbeat"),
    Feature("streams.version", 1, "StreamsGroupHeartbeat"),
    Feature(TRANSACTION_VERSION_FEATURE, TRANSACTION_VERSION),
)
#: API name -> key, from the table (importing the handler modules would slow the first answer).
_API_KEYS = {entry.name: entry.api_key for entry in API_TABLE}
#: Kafka's epoch of the finalized features (the metadata offset there); any value >= 0 says
#: "valid", and the levels never change while a tidelog runs.
FINALIZED_FEATURES_EPOCH = 1
#: The first ApiVersions version whose answer carries the features (see the module docstring).
FEATURES_SINCE = 4


def features(api_keys: frozenset[int]) -> tuple[Feature, ...]:
    """The features a broker serving ``api_keys`` implements."""
    return tuple(
        f for f in FEATURES if f.needs_api is None or _API_KEYS.get(f.needs_api, -1) in api_keys
    )


@functools.cache
def _features(version: int, api_keys: frozenset[int]) -> dict[str, Any]:
    if version < FEATURES_SINCE:
        return {}
    types = response_types(API_KEY, version)
    served = features(api_keys)
    return {
        "supported_features": tuple(
            types.SupportedFeatureKey(name=f.name, min_version=0, max_version=f.max_level)
            for f in served
        ),
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": tuple(
            types.FinalizedFeatureKey(
                name=f.name, max_version_level=f.max_level, min_version_level=f.max_level
            )
            for f in served
        ),
    }


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    ranges = tuple(ctx.broker.router.api_ranges())
    return cast(
        "Response",
        build(
            types.ApiVersionsResponse,
            error_code=ErrorCode.none,
            api_keys=_api_keys(ctx.api_version, ranges),
            throttle_time=timedelta(0),
            **_features(ctx.api_version, frozenset(k for k, _, _ in ranges)),
        ),
    )


SPEC = HandlerSpec(api_key=API_KEY, name="ApiVersions", min_version=0, max_version=4, handle=handle)
