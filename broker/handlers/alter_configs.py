"""AlterConfigs (API 33) v0-2: replace a topic's whole set of overrides.

Kafka behaviour kept (ConfigAdminManager.preprocess and ConfigurationControlManager
.legacyAlterConfigs):

- the configs given become the topic's overrides; every override not given is removed;
- a resource named twice is INVALID_REQUEST ("Each resource must appear at most once.") for each;
  a key named twice in one resource, or a null value, is INVALID_REQUEST;
- an unknown topic config or a bad value is INVALID_CONFIG with a message naming the key; a
  missing topic is UNKNOWN_TOPIC_OR_PARTITION; ``validate_only`` checks without changing anything;
- BROKER: the name must be this broker's id or empty; tidelog's broker settings are all static,
  so any setting named is refused as Kafka refuses a read-only one (INVALID_REQUEST "Cannot
  update these configs dynamically: ..."); settings Kafka changes at run time that tidelog does
  not use replace the stored set (``broker/dynamic_configs.py``: described, no effect);
- any other resource type (BROKER_LOGGER included, as in Kafka) is INVALID_REQUEST.

Accepted changes are persisted by the topic registry and applied to the live partition logs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers import _configs as common
from tidelog.broker.handlers._configs import ApiError
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.protocol.schema import response_types

if TYPE_CHECKING:
    from kio.schema.alter_configs.v0.request import AlterConfigsRequest as _AlterConfigsRequestV0
    from kio.schema.alter_configs.v1.request import AlterConfigsRequest as _AlterConfigsRequestV1
    from kio.schema.alter_configs.v2.request import AlterConfigsRequest as _AlterConfigsRequestV2

    #: The request versions this handler serves (kio's classes).
    Request = _AlterConfigsRequestV0 | _AlterConfigsRequestV1 | _AlterConfigsRequestV2
    from kio.schema.alter_configs.v0.response import AlterConfigsResponse as _AlterConfigsResponseV0
    from kio.schema.alter_configs.v1.response import AlterConfigsResponse as _AlterConfigsResponseV1
    from kio.schema.alter_configs.v2.response import AlterConfigsResponse as _AlterConfigsResponseV2

    #: The response versions it answers (kio's classes).
    Response = _AlterConfigsResponseV0 | _AlterConfigsResponseV1 | _AlterConfigsResponseV2


API_KEY = 33


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    validate_only = bool(request.validate_only)
    responses = common.resource_responses(
        types, request.resources, lambda resource: _alter(ctx, resource, validate_only)
    )
    return cast(
        "Response", types.AlterConfigsResponse(throttle_time=timedelta(0), responses=responses)
    )


def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> ApiError:
    refused = common.check_alteration(
        ctx, resource, [c.name for c in resource.configs if c.value is None]
    )
    if refused is not None:
        return refused
    broker = ctx.broker
    name = resource.resource_name
    if resource.resource_type == common.TYPE_TOPIC:
        bad = common.check_topic_name(name)
        if bad is not None:
            return bad
        overrides = {c.name: c.value for c in resource.configs}
        return common.alter_topic(broker, name, overrides, validate_only=validate_only)
    if resource.resource_type == common.TYPE_BROKER:
        bad = common.check_node_id(name, broker.node_id, allow_empty=True, describe=False)
        if bad is not None:
            return bad
        ops = [(c.name, common.OP_SET, c.value) for c in resource.configs]
        return common.alter_broker(broker, name, ops, replace=True, validate_only=validate_only)
    return common.invalid_request(f"Unknown resource type {resource.resource_type}")


SPEC = HandlerSpec(API_KEY, "AlterConfigs", 0, 2, handle)
