"""DescribeConfigs (API 32) v1-4: every topic or broker setting with its value and source.

Kafka behaviour kept (ConfigHelper.describeConfigs):

- every setting is listed, set or not, with its source (DYNAMIC_TOPIC_CONFIG for a topic
  override, STATIC_BROKER_CONFIG when it comes from the broker's file/env/--override, else
  DEFAULT_CONFIG); ``configuration_keys`` null or empty means all, else only those named (unknown
  names are left out, not errors);
- synonyms only when ``include_synonyms``; documentation only when ``include_documentation``
  (v3+), else null; sensitive values are null;
- TOPIC: an illegal name is INVALID_TOPIC_EXCEPTION, a missing topic UNKNOWN_TOPIC_OR_PARTITION,
  each with no configs;
- BROKER: the resource name is this broker's id (all its settings, then the Kafka-only
  settings stored by AlterConfigs, source DYNAMIC_BROKER_CONFIG) or empty (the stored
  cluster-wide ones, DYNAMIC_DEFAULT_BROKER_CONFIG); another id or a non-number is
  INVALID_REQUEST;
- GROUP (Kafka 4): every group config with its value - the group's override (GROUP_CONFIG) or
  the broker's ``group.consumer.*`` default (DEFAULT_CONFIG); an empty name is INVALID_REQUEST;
- BROKER_LOGGER: this broker's id; the process's loggers and their levels;
- any other resource type is INVALID_REQUEST for that resource.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from tidelog.broker.dynamic_configs import (
    GROUP_CONFIGS,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_GROUP,
    is_sensitive,
)
from tidelog.broker.handlers import _configs as common
from tidelog.broker.handlers._configs import ApiError
from tidelog.broker.handlers.base import HandlerSpec, RequestContext
from tidelog.config import ConfigError
from tidelog.config.topic import (
    ConfigEntry,
    ConfigSynonym,
    describe_broker_configs,
    describe_topic_configs,
)
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import build, response_types

if TYPE_CHECKING:
    from kio.schema.describe_configs.v1.request import (
        DescribeConfigsRequest as _DescribeConfigsRequestV1,
    )
    from kio.schema.describe_configs.v2.request import (
        DescribeConfigsRequest as _DescribeConfigsRequestV2,
    )
    from kio.schema.describe_configs.v3.request import (
        DescribeConfigsRequest as _DescribeConfigsRequestV3,
    )
    from kio.schema.describe_configs.v4.request import (
        DescribeConfigsRequest as _DescribeConfigsRequestV4,
    )

    #: The request versions this handler serves (kio's classes).
    Request = (
        _DescribeConfigsRequestV1
        | _DescribeConfigsRequestV2
        | _DescribeConfigsRequestV3
        | _DescribeConfigsRequestV4
    )
    from kio.schema.describe_configs.v1.response import (
        DescribeConfigsResponse as _DescribeConfigsResponseV1,
    )
    from kio.schema.describe_configs.v2.response import (
        DescribeConfigsResponse as _DescribeConfigsResponseV2,
    )
    from kio.schema.describe_configs.v3.response import (
        DescribeConfigsResponse as _DescribeConfigsResponseV3,
    )
    from kio.schema.describe_configs.v4.response import (
        DescribeConfigsResponse as _DescribeConfigsResponseV4,
    )

    #: The response versions it answers (kio's classes).
    Response = (
        _DescribeConfigsResponseV1
        | _DescribeConfigsResponseV2
        | _DescribeConfigsResponseV3
        | _DescribeConfigsResponseV4
    )


API_KEY = 32
#: Kafka's DescribeConfigs config_type ids (ConfigDef.Type): STRING 2, INT 3.
CONFIG_TYPE_BOOLEAN = 1
CONFIG_TYPE_STRING = 2
CONFIG_TYPE_INT = 3


async def handle(ctx: RequestContext, request: Request) -> Response:
    types = response_types(API_KEY, ctx.api_version)
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_docs = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        keys = resource.configuration_keys
        wanted = frozenset(keys) if keys else None
        error, entries = _describe(ctx, resource.resource_type, resource.resource_name)
        configs = tuple(
            _entry(types, e, include_synonyms, include_docs)
            for e in entries
            if wanted is None or e.name in wanted
        )
        results.append(
            types.DescribeConfigsResult(
                error_code=error.code,
                error_message=error.message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs if not error.is_failure else (),
            )
        )
    return cast(
        "Response",
        types.DescribeConfigsResponse(throttle_time=timedelta(0), results=tuple(results)),
    )


def _describe(
    ctx: RequestContext, resource_type: int, name: str
) -> tuple[ApiError, Sequence[ConfigEntry]]:
    broker = ctx.broker
    denied = common.check_access(ctx, resource_type, name, alter=False)
    if denied is not None:
        return denied, ()
    if resource_type == common.TYPE_TOPIC:
        bad = common.check_topic_name(name)
        if bad is not None:
            return bad, ()
        info = broker.topics.get(name)
        if info is None:
            return ApiError(ErrorCode.unknown_topic_or_partition), ()
        try:
            return common.NONE, describe_topic_configs(broker.config, info.configs)
        except ConfigError as exc:
            return ApiError(ErrorCode.invalid_config, str(exc)), ()
    if resource_type == common.TYPE_BROKER:
        bad = common.check_node_id(name, broker.node_id, allow_empty=True, describe=True)
        if bad is not None:
            return bad, ()
        stored = _stored_broker_entries(ctx, name)
        if not name:
            return common.NONE, stored  # cluster-wide dynamic defaults: only stored ones
        return common.NONE, [*describe_broker_configs(broker.config), *stored]
    if resource_type == common.TYPE_GROUP:
        if not name:
            return common.invalid_request("Group name must not be empty"), ()
        return common.NONE, _group_entries(ctx, name)
    if resource_type == common.TYPE_BROKER_LOGGER:
        bad = common.check_node_id(name, broker.node_id, allow_empty=False, describe=True)
        if bad is not None:
            return bad, ()
        return common.NONE, [_logger_entry(n, v) for n, v in common.logger_levels().items()]
    return common.invalid_request(f"Unsupported resource type: {resource_type}"), ()


def _stored_broker_entries(ctx: RequestContext, name: str) -> list[ConfigEntry]:
    source = SOURCE_DYNAMIC_BROKER if name else SOURCE_DYNAMIC_DEFAULT_BROKER
    return [
        ConfigEntry(
            name=key,
            value=None if is_sensitive(key) else value,
            is_default=False,
            source=source,
            read_only=False,
            sensitive=is_sensitive(key),
            config_type=0,
            documentation="Stored for Kafka tools; it has no effect in tidelog.",
            synonyms=(ConfigSynonym(key, None if is_sensitive(key) else value, source),),
        )
        for key, value in sorted(ctx.broker.dynamic_configs.broker_overrides(name).items())
    ]


def _group_entries(ctx: RequestContext, group_id: str) -> list[ConfigEntry]:
    store = ctx.broker.dynamic_configs
    overrides = store.group_overrides(group_id)
    out = []
    for key, value in store.group_config(group_id).items():
        source = SOURCE_GROUP if key in overrides else SOURCE_DEFAULT
        d = GROUP_CONFIGS[key]
        config_type = CONFIG_TYPE_STRING if d.choices else CONFIG_TYPE_INT
        if d.choices == ("true", "false"):
            config_type = CONFIG_TYPE_BOOLEAN
        out.append(
            ConfigEntry(
                name=key,
                value=str(value),
                is_default=source == SOURCE_DEFAULT,
                source=source,
                read_only=False,
                sensitive=False,
                config_type=config_type,
                documentation=d.doc,
                synonyms=(ConfigSynonym(key, str(value), source),),
            )
        )
    return out


def _logger_entry(name: str, level: str) -> ConfigEntry:
    return ConfigEntry(
        name=name,
        value=level,
        is_default=False,
        source=common.SOURCE_DYNAMIC_BROKER_LOGGER,
        read_only=False,
        sensitive=False,
        config_type=0,
        documentation="",
        synonyms=(),
    )


def _entry(types: Any, e: ConfigEntry, include_synonyms: bool, include_docs: bool) -> Any:
    synonyms = (
        tuple(
            types.DescribeConfigsSynonym(
                name=s.name, value=None if e.sensitive else s.value, source=s.source
            )
            for s in e.synonyms
        )
        if include_synonyms
        else ()
    )
    return build(
        types.DescribeConfigsResourceResult,
        name=e.name,
        value=None if e.sensitive else e.value,
        read_only=e.read_only,
        is_default=e.is_default,
        config_source=e.source,
        is_sensitive=e.sensitive,
        synonyms=synonyms,
        config_type=e.config_type,
        documentation=(e.documentation or None) if include_docs else None,
    )


SPEC = HandlerSpec(API_KEY, "DescribeConfigs", 1, 4, handle)
