"""IncrementalAlterConfigs (API 44) v0-1: SET, DELETE, APPEND or SUBTRACT single settings.

Kafka behaviour kept (ConfigAdminManager.preprocess, ConfigurationControlManager
.incrementalAlterConfigResource, RuntimeLoggerManager):

- TOPIC: SET replaces one override, DELETE removes it (back to the broker's value; deleting a
  setting that is not set is fine), APPEND / SUBTRACT add or remove items of a LIST setting
  (``cleanup.policy``), starting from its current value; on any other setting they are
  INVALID_CONFIG "Can't APPEND to key X because its type is not LIST.";
- the resulting overrides are validated as a whole: an unknown name or bad value is INVALID_CONFIG
  naming the key; a missing topic UNKNOWN_TOPIC_OR_PARTITION; ``validate_only`` changes nothing;
- a key named twice, a null value for anything but DELETE, or a resource named twice is
  INVALID_REQUEST;
- BROKER: this broker's id or empty; tidelog's broker settings are static, so SET / APPEND /
  SUBTRACT of one is INVALID_REQUEST "Cannot update these configs dynamically: ..." (DELETE of a
  dynamic value that does not exist is accepted, as in Kafka); a setting Kafka changes at run
  time that tidelog does not use is stored (SET / DELETE) with a log line that it has no effect
  (``broker/dynamic_configs.py``);
- GROUP (Kafka 4's group configs): SET / DELETE ``consumer.session.timeout.ms`` and the other
  GroupConfig names, validated as Kafka's GroupConfig.validate; stored durably;
- BROKER_LOGGER: SET or DELETE the level of one of this process's loggers (log4j level names).

Kafka divergence: APPEND / SUBTRACT on a topic setting that is not set start from its effective
value (which follows the broker's synonym, e.g. ``log.cleanup.policy``), where Kafka starts from
the topic config's static default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.handlers import _configs as common
from tidelog.broker.handlers._configs import ApiError
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.config import TOPIC_CONFIGS
from tidelog.config.values import format_value
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import response_types

if TYPE_CHECKING:
    from kio.schema.incremental_alter_configs.v0.request import (
        IncrementalAlterConfigsRequest as _IncrementalAlterConfigsRequestV0,
    )
    from kio.schema.incremental_alter_configs.v1.request import (
        IncrementalAlterConfigsRequest as _IncrementalAlterConfigsRequestV1,
    )

    #: The request versions this handler serves (kio's classes).
    Request = _IncrementalAlterConfigsRequestV0 | _IncrementalAlterConfigsRequestV1
    from kio.schema.incremental_alter_configs.v0.response import (
        IncrementalAlterConfigsResponse as _IncrementalAlterConfigsResponseV0,
    )
    from kio.schema.incremental_alter_configs.v1.response import (
        IncrementalAlterConfigsResponse as _IncrementalAlterConfigsResponseV1,
    )

    #: The response versions it answers (kio's classes).
    Response = _IncrementalAlterConfigsResponseV0 | _IncrementalAlterConfigsResponseV1


API_KEY = 44


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    validate_only = bool(request.validate_only)
    responses = common.resource_responses(
        types, request.resources, lambda resource: _alter(ctx, resource, validate_only)
    )
    return cast(
        "Response",
        types.IncrementalAlterConfigsResponse(throttle_time=timedelta(0), responses=responses),
    )


def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> ApiError:
    nulls = [
        c.name
        for c in resource.configs
        if c.config_operation != common.OP_DELETE and c.value is None
    ]
    refused = common.check_alteration(ctx, resource, nulls)
    if refused is not None:
        return refused
    broker = ctx.broker
    name = resource.resource_name
    ops = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
    if resource.resource_type == common.TYPE_TOPIC:
        bad = common.check_topic_name(name)
        if bad is not None:
            return bad
        info = broker.topics.get(name)
        if info is None:
            return ApiError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
        result = _apply(ops, info.configs, lambda: broker.topics.effective_config(name))
        if isinstance(result, ApiError):
            return result
        return common.alter_topic(broker, name, result, validate_only=validate_only)
    if resource.resource_type == common.TYPE_BROKER:
        bad = common.check_node_id(name, broker.node_id, allow_empty=True, describe=False)
        if bad is not None:
            return bad
        return common.alter_broker(broker, name, ops, replace=False, validate_only=validate_only)
    if resource.resource_type == common.TYPE_GROUP:
        return common.alter_group(broker, name, ops, validate_only=validate_only)
    if resource.resource_type == common.TYPE_BROKER_LOGGER:
        bad = common.check_node_id(name, broker.node_id, allow_empty=False, describe=False)
        if bad is not None:
            return bad
        return common.alter_loggers(ops, validate_only=validate_only)
    return common.invalid_request(f"Unknown resource type {resource.resource_type}")


def _apply(
    ops: list[tuple[str, int, str | None]],
    current: Mapping[str, str],
    effective: Callable[[], Mapping[str, object]],
) -> dict[str, str] | ApiError:
    """The topic's overrides after ``ops`` (``effective()`` gives every setting's value)."""
    out = dict(current)
    for key, op, value in ops:
        if op == common.OP_SET:
            assert value is not None
            out[key] = value
        elif op == common.OP_DELETE:
            out.pop(key, None)
        elif op in (common.OP_APPEND, common.OP_SUBTRACT):
            d = TOPIC_CONFIGS.get(key)
            if d is None or d.type != "list":
                verb = common.OP_NAMES[op]
                return ApiError(
                    ErrorCode.invalid_config,
                    f"Can't {verb} to key {key} because its type is not LIST.",
                )
            base = out.get(key)
            if base is None:
                base = format_value(effective().get(key)) or ""
            items = [x.strip() for x in base.split(",") if x.strip()]
            given = [x.strip() for x in (value or "").split(",") if x.strip()]
            if op == common.OP_APPEND:
                items += [x for x in given if x not in items]
            else:
                items = [x for x in items if x not in given]
            out[key] = ",".join(items)
        else:
            return common.invalid_request(f"Unknown operations type {op}")
    return out


SPEC = HandlerSpec(API_KEY, "IncrementalAlterConfigs", 0, 1, handle)
