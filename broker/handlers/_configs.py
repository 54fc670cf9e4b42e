"""What the config admin handlers share: resource types, resource checks, topic overrides, loggers.

Used by ``describe_configs``, ``alter_configs`` and ``incremental_alter_configs`` (the leading
underscore keeps the router from taking this module for a handler).

Kafka behaviour kept here (ConfigHelper, ConfigAdminManager, ConfigurationControlManager and
RuntimeLoggerManager in Kafka 3.9):

- a BROKER resource is named by this broker's id, or is empty for the cluster-wide dynamic
  defaults; anything else is INVALID_REQUEST;
- tidelog has no dynamic broker configs: every broker setting is static (read-only), so a change
  to one is INVALID_REQUEST "Cannot update these configs dynamically: Set(...)", exactly Kafka's
  answer for a read-only setting; an unknown name is INVALID_CONFIG naming it;
- BROKER_LOGGER resources describe and set the levels of this process's Python loggers, with
  log4j's level names (``root`` is the root logger).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from tidelog.broker.dynamic_configs import GroupConfigError, is_kafka_only_broker_config
from tidelog.broker.security.access import CLUSTER, TOPIC, Operation, allowed
from tidelog.broker.topics import TopicError, topic_name_error
from tidelog.config import BROKER_CONFIGS
from tidelog.protocol.errors import ErrorCode, error_code_for

if TYPE_CHECKING:
    from tidelog.broker.handlers.base import BrokerView, RequestContext

log = logging.getLogger("tidelog.admin")
T = TypeVar("T")

TYPE_TOPIC = 2
TYPE_BROKER = 4
TYPE_BROKER_LOGGER = 8
TYPE_GROUP = 32

OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3
OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

#: DescribeConfigs' source of a BROKER_LOGGER entry (Kafka's DYNAMIC_BROKER_LOGGER_CONFIG).
SOURCE_DYNAMIC_BROKER_LOGGER = 6
ROOT_LOGGER = "root"


@dataclass(frozen=True, slots=True)
class ApiError:
    """An error code with its message, as one resource's answer carries it."""

    code: ErrorCode
    message: str | None = None

    @property
    def is_failure(self) -> bool:
        return self.code != ErrorCode.none


NONE = ApiError(ErrorCode.none)


def check_access(
    ctx: RequestContext, resource_type: int, name: str, alter: bool
) -> ApiError | None:
    """Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for a broker."""
    operation = Operation.ALTER_CONFIGS if alter else Operation.DESCRIBE_CONFIGS
    if resource_type == TYPE_TOPIC and not allowed(ctx, operation, TOPIC, name):
        return ApiError(ErrorCode.topic_authorization_failed, None)
    if resource_type in (TYPE_BROKER, TYPE_BROKER_LOGGER) and not allowed(ctx, operation, CLUSTER):
        return ApiError(ErrorCode.cluster_authorization_failed, None)
    return None


def invalid_request(message: str) -> ApiError:
    return ApiError(ErrorCode.invalid_request, message)


def from_topic_error(exc: TopicError) -> ApiError:
    return ApiError(error_code_for(exc.error_name), exc.message)


def check_topic_name(name: str) -> ApiError | None:
    """INVALID_TOPIC_EXCEPTION for a name Kafka's Topic.validate refuses, else None."""
    reason = topic_name_error(name)
    return None if reason is None else ApiError(ErrorCode.invalid_topic_exception, reason)


def check_node_id(name: str, node_id: int, *, allow_empty: bool, describe: bool) -> ApiError | None:
    """A BROKER / BROKER_LOGGER resource name must be our node id (or empty when allowed)."""
    if not name:
        return None if allow_empty else invalid_request("Broker id must not be empty")
    try:
        requested = int(name)
    except ValueError:
        what = "Broker" if describe else "Node"
        return invalid_request(f"{what} id must be an integer, but it is: {name}")
    if requested != node_id:
        expected = f"{node_id} or empty string" if allow_empty and describe else str(node_id)
        return invalid_request(f"Unexpected broker id, expected {expected}, but received {name}")
    return None


def duplicates(items: Iterable[T]) -> set[T]:
    """The items that occur more than once (config keys, or (type, name) resources)."""
    seen: set[T] = set()
    dup: set[T] = set()
    for item in items:
        (dup if item in seen else seen).add(item)
    return dup


DUPLICATE_RESOURCE = invalid_request("Each resource must appear at most once.")


def resource_responses(
    types: Any, resources: Sequence[Any], alter: Callable[[Any], ApiError]
) -> tuple[Any, ...]:
    """AlterConfigs' and IncrementalAlterConfigs' entry for each resource, in request order: a
    resource named twice is DUPLICATE_RESOURCE (each time), any other gets ``alter(resource)``."""
    named_twice = duplicates((r.resource_type, r.resource_name) for r in resources)
    responses = []
    for resource in resources:
        if (resource.resource_type, resource.resource_name) in named_twice:
            error = DUPLICATE_RESOURCE
        else:
            error = alter(resource)
        responses.append(
            types.AlterConfigsResourceResponse(
                error_code=error.code,
                error_message=error.message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return tuple(responses)


def check_alteration(ctx: RequestContext, resource: Any, nulls: Sequence[str]) -> ApiError | None:
    """The checks of an alteration before its resource type matters, in Kafka's order: a key
    named twice, null values (``nulls``: the keys whose null value is refused), then
    ALTER_CONFIGS on the resource."""
    if duplicates(c.name for c in resource.configs):
        return invalid_request("Error due to duplicate config keys")
    if nulls:
        return invalid_request(f"Null value not supported for : {', '.join(nulls)}")
    return check_access(ctx, resource.resource_type, resource.resource_name, alter=True)


def refuse_broker_changes(names: Iterable[str]) -> ApiError:
    """tidelog's broker settings are all static: a change to any of them is refused."""
    names = list(names)
    for name in names:
        if name not in BROKER_CONFIGS:
            return ApiError(ErrorCode.invalid_config, f"Unknown broker config name: {name}")
    if not names:
        return NONE
    return invalid_request(f"Cannot update these configs dynamically: Set({', '.join(names)})")


def alter_broker(
    broker: BrokerView,
    resource_name: str,
    ops: list[tuple[str, int, str | None]],
    *,
    replace: bool,
    validate_only: bool,
) -> ApiError:
    """Change a BROKER resource: tidelog's own settings are static (refused); settings Kafka
    changes at run time that tidelog does not use are stored (``broker.dynamic_configs``).

    ``replace`` (legacy AlterConfigs): the given settings become the resource's whole set.
    """
    for name, op, _ in ops:
        if op not in OP_NAMES:
            return invalid_request(f"Unknown operations type {op}")
        if name not in BROKER_CONFIGS and not is_kafka_only_broker_config(name):
            return ApiError(ErrorCode.invalid_config, f"Unknown broker config name: {name}")
    refused = refuse_broker_changes(
        name for name, op, _ in ops if op != OP_DELETE and name in BROKER_CONFIGS
    )
    if refused.is_failure:
        return refused
    store = broker.dynamic_configs
    overrides = {} if replace else store.broker_overrides(resource_name)
    for name, op, value in ops:
        if name in BROKER_CONFIGS:
            continue
        if op == OP_SET and value is not None:
            overrides[name] = value
        elif op == OP_DELETE:
            overrides.pop(name, None)
        else:
            return ApiError(
                ErrorCode.invalid_config,
                f"Can't {OP_NAMES[op]} to key {name} because its type is not LIST.",
            )
    if not validate_only:
        store.set_broker_overrides(resource_name, overrides)
    return NONE


def alter_group(
    broker: BrokerView,
    group_id: str,
    ops: list[tuple[str, int, str | None]],
    *,
    validate_only: bool,
) -> ApiError:
    """IncrementalAlterConfigs of a GROUP resource (Kafka 4's group configs), SET / DELETE."""
    if not group_id:
        return invalid_request("Group name must not be empty")
    store = broker.dynamic_configs
    overrides = store.group_overrides(group_id)
    for name, op, value in ops:
        if op == OP_SET and value is not None:
            overrides[name] = value
        elif op == OP_DELETE:
            overrides.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            return ApiError(
                ErrorCode.invalid_config,
                f"Can't {OP_NAMES[op]} to key {name} because its type is not LIST.",
            )
        else:
            return invalid_request(f"Unknown operations type {op}")
    try:
        store.validate_group(overrides)
    except GroupConfigError as exc:
        return ApiError(ErrorCode.invalid_config, str(exc))
    if not validate_only:
        store.set_group_overrides(group_id, overrides)
    return NONE


def alter_topic(
    broker: BrokerView, name: str, overrides: Mapping[str, str], *, validate_only: bool
) -> ApiError:
    """Replace ``name``'s overrides through the topic registry (persisted, applied to logs).

    HW waiters and held produce answers of the topic's partitions are woken: a new flush
    policy can move the HW.
    """
    try:
        info = broker.topics.set_config_overrides(name, overrides, validate_only=validate_only)
    except TopicError as exc:
        return from_topic_error(exc)
    if not validate_only:
        for partition in range(info.partitions):
            partition_log = broker.topics.get_log(name, partition)
            if partition_log is not None:  # held produce answers the new HW now covers
                broker.log_flusher.policy_changed(partition_log)
            else:
                broker.partitions.notify(name, partition)
        log.info("topic %s configs set to %s", name, dict(overrides))
    return NONE


# ---------------------------------------------------------------------------- BROKER_LOGGER

#: log4j level names -> Python levels (log4j's TRACE and ALL are below DEBUG; OFF above all).
_TO_PY = {
    "ALL": 1,
    "TRACE": 5,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}
VALID_LOG_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")


def _level_name(level: int) -> str:
    """The log4j name of a Python level (the highest log4j level not above it)."""
    best = "ALL"
    for name, value in sorted(_TO_PY.items(), key=lambda kv: kv[1]):
        if value <= level:
            best = name
    return best


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    existing = logging.Logger.manager.loggerDict.get(name)
    return existing if isinstance(existing, logging.Logger) else None


def logger_levels() -> dict[str, str]:
    """Every logger of this process with its effective level, root first (Log4jController)."""
    out = {ROOT_LOGGER: _level_name(logging.getLogger().getEffectiveLevel())}
    for name in sorted(logging.Logger.manager.loggerDict):
        found = _logger(name)
        if found is not None:
            out[name] = _level_name(found.getEffectiveLevel())
    return out


def alter_loggers(ops: Iterable[tuple[str, int, str | None]], *, validate_only: bool) -> ApiError:
    """Validate every (logger, op, level), then apply them all (RuntimeLoggerManager)."""
    ops = list(ops)
    for name, op, value in ops:
        if op in (OP_SET, OP_DELETE) and _logger(name) is None:
            return ApiError(ErrorCode.invalid_config, f"Logger {name} does not exist!")
        if op == OP_SET:
            if value not in _TO_PY:
                return ApiError(
                    ErrorCode.invalid_config,
                    f"Cannot set the log level of {name} to {value} as it is not a supported log "
                    f"level. Valid log levels are {', '.join(VALID_LOG_LEVELS)}",
                )
        elif op == OP_DELETE:
            if name == ROOT_LOGGER:
                return invalid_request(
                    f"Removing the log level of the {ROOT_LOGGER} logger is not allowed"
                )
        elif op in (OP_APPEND, OP_SUBTRACT):
            return invalid_request(
                f"{OP_NAMES[op]} operation is not allowed for the BROKER_LOGGER resource"
            )
        else:
            return invalid_request(
                f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource"
            )
    if not validate_only:
        for name, op, value in ops:
            target = _logger(name)
            assert target is not None
            target.setLevel(_TO_PY[value] if op == OP_SET and value else logging.NOTSET)
    return NONE
