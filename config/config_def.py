"""One setting's definition (Kafka's ``ConfigDef``): name, type, default, allowed values, doc.

``broker_def`` builds a broker setting (read-only unless said otherwise: Kafka's dynamic broker
configs are not served), ``topic_def`` a topic setting with its broker synonyms. The settings
themselves are listed by area: ``config/definitions.py`` (the broker's core, the log, producers,
transactions), ``config/security_configs.py``, ``config/group_configs.py`` and
``config/topic_configs.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

__all__ = (
    "DAY_MS",
    "INT_MAX",
    "LONG_MAX",
    "WEEK_MS",
    "ConfigDef",
    "ConfigType",
    "Importance",
    "CLEANUP_POLICIES",
    "COMPRESSION_TYPES",
    "TIMESTAMP_TYPES",
    "broker_def",
    "topic_def",
)

ConfigType = Literal["int", "long", "short", "double", "boolean", "string", "list", "password"]
Importance = Literal["high", "medium", "low"]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
DAY_MS = 24 * 3600 * 1000
WEEK_MS = 7 * DAY_MS

#: ``cleanup.policy`` values, ``message.timestamp.type`` values, ``compression.type`` values.
CLEANUP_POLICIES = ("delete", "compact")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One property: its Kafka name, type, default, what values are allowed, and what it does."""

    name: str
    type: ConfigType
    default: object
    doc: str
    min_value: float | None = None
    max_value: float | None = None
    choices: tuple[str, ...] | None = None
    importance: Importance = "medium"
    read_only: bool = False
    #: For topic configs: broker properties consulted, in order, when the topic sets nothing.
    synonyms: tuple[str, ...] = field(default=())


def broker_def(
    name: str,
    type_: ConfigType,
    default: object,
    doc: str,
    *,
    min_value: float | None = None,
    max_value: float | None = None,
    choices: Sequence[str] | None = None,
    importance: Importance = "medium",
    read_only: bool = True,
) -> ConfigDef:
    """A broker setting (read-only unless ``read_only=False``: Kafka's dynamic broker configs
    are not served)."""
    return ConfigDef(
        name=name,
        type=type_,
        default=default,
        doc=doc,
        min_value=min_value,
        max_value=max_value,
        choices=tuple(choices) if choices is not None else None,
        importance=importance,
        read_only=read_only,
    )


def topic_def(
    name: str,
    type_: ConfigType,
    synonyms: Sequence[str],
    doc: str,
    *,
    default: object = None,
    min_value: float | None = None,
    max_value: float | None = None,
    choices: Sequence[str] | None = None,
) -> ConfigDef:
    """A topic setting: writable (AlterConfigs), with the broker settings it falls back to."""
    setting = broker_def(
        name,
        type_,
        default,
        doc,
        min_value=min_value,
        max_value=max_value,
        choices=choices,
        read_only=False,
    )
    return replace(setting, synonyms=tuple(synonyms))
