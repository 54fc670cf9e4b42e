"""Topic configuration: per-topic overrides resolved against the broker's settings.

A topic keeps only the settings set on it (``overrides``: Kafka topic names to strings, as
CreateTopics and AlterConfigs carry them). Its effective value of every other setting comes from
the first of its broker synonyms that has a value, exactly as Kafka's DescribeConfigs reports it
(source DYNAMIC_TOPIC_CONFIG for overrides, STATIC_BROKER_CONFIG or DEFAULT_CONFIG otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tidelog.config.broker import (
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_TOPIC,
    SOURCE_STATIC_BROKER,
    BrokerConfig,
)
from tidelog.config.definitions import BROKER_CONFIGS, TOPIC_CONFIGS, UNIT_MS, ConfigDef
from tidelog.config.values import ConfigError, format_value, parse_value, unknown_name_error

#: DescribeConfigs' config_type numbers (Kafka's ConfigType, v3+).
CONFIG_TYPE_IDS = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "password": 9,
}


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One line of a DescribeConfigs answer."""

    name: str
    value: str | None
    is_default: bool
    source: int
    read_only: bool
    sensitive: bool
    config_type: int
    documentation: str
    synonyms: tuple[ConfigSynonym, ...]


def validate_topic_configs(overrides: Mapping[str, str | None]) -> dict[str, object]:
    """Parse topic settings; raise ``ConfigError`` naming the first unknown or bad one."""
    out: dict[str, object] = {}
    for name, raw in overrides.items():
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise unknown_name_error(name, TOPIC_CONFIGS, what="topic config")
        if raw is None:
            raise ConfigError(name, f"Topic config '{name}' needs a value.")
        out[name] = parse_value(d, raw)
    _check_cross(out)
    return out


def _check_cross(values: Mapping[str, object]) -> None:
    lo = values.get("min.compaction.lag.ms")
    hi = values.get("max.compaction.lag.ms")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        raise ConfigError(
            "min.compaction.lag.ms",
            "min.compaction.lag.ms must not be greater than max.compaction.lag.ms.",
        )


def _broker_value(cfg: BrokerConfig, d: ConfigDef) -> tuple[object, str | None]:
    """The topic default from the broker: (value, the broker property it came from)."""
    for syn in d.synonyms:
        value = cfg.get(syn)
        if value is not None:
            if isinstance(value, int) and not isinstance(value, bool) and syn in UNIT_MS:
                value = value * UNIT_MS[syn] if value >= 0 else -1
            return value, syn
    if d.synonyms:
        return BROKER_CONFIGS[d.synonyms[0]].default, None
    return d.default, None


def effective_topic_config(
    cfg: BrokerConfig, overrides: Mapping[str, str | None]
) -> dict[str, object]:
    """Every topic setting's effective value for a topic with these overrides."""
    parsed = validate_topic_configs(overrides)
    out: dict[str, object] = {}
    for name, d in TOPIC_CONFIGS.items():
        out[name] = parsed[name] if name in parsed else _broker_value(cfg, d)[0]
    return out


def describe_topic_configs(
    cfg: BrokerConfig, overrides: Mapping[str, str | None]
) -> list[ConfigEntry]:
    parsed = validate_topic_configs(overrides)
    entries = []
    for name, d in TOPIC_CONFIGS.items():
        synonyms: list[ConfigSynonym] = []
        if name in parsed:
            synonyms.append(ConfigSynonym(name, format_value(parsed[name]), SOURCE_DYNAMIC_TOPIC))
        for syn in d.synonyms:
            v = cfg.get(syn)
            if v is not None:
                synonyms.append(ConfigSynonym(syn, format_value(v), cfg.source(syn)))
        if name in parsed:
            value, source, is_default = parsed[name], SOURCE_DYNAMIC_TOPIC, False
        else:
            value, came_from = _broker_value(cfg, d)
            source = SOURCE_DEFAULT
            if came_from is not None and not cfg.is_default(came_from):
                source = SOURCE_STATIC_BROKER
            is_default = source == SOURCE_DEFAULT
        entries.append(
            ConfigEntry(
                name=name,
                value=format_value(value),
                is_default=is_default,
                source=source,
                read_only=False,
                sensitive=d.type == "password",
                config_type=CONFIG_TYPE_IDS.get(d.type, 0),
                documentation=d.doc,
                synonyms=tuple(synonyms),
            )
        )
    return entries


def describe_broker_configs(cfg: BrokerConfig) -> list[ConfigEntry]:
    entries = []
    for name, d in BROKER_CONFIGS.items():
        value = cfg.get(name)
        source = cfg.source(name)
        entries.append(
            ConfigEntry(
                name=name,
                value=None if d.type == "password" else format_value(value),
                is_default=source == SOURCE_DEFAULT,
                source=source,
                read_only=d.read_only,
                sensitive=d.type == "password",
                config_type=CONFIG_TYPE_IDS.get(d.type, 0),
                documentation=d.doc,
                synonyms=(ConfigSynonym(name, format_value(value), source),),
            )
        )
    return entries
