"""Typed configuration under Kafka's property names: broker settings and topic settings.

``load_broker_config`` reads YAML, ``TIDELOG_*`` variables and ``--override KEY=VALUE``;
``config.topic`` resolves per-topic overrides against the broker's settings. This package is a
leaf: it imports nothing else of tidelog.
"""

from tidelog.config.broker import BrokerConfig, env_name, load_broker_config, parse_listener
from tidelog.config.definitions import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigDef
from tidelog.config.reference import render_reference_markdown
from tidelog.config.values import ConfigError

__all__ = [
    "BROKER_CONFIGS",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "env_name",
    "load_broker_config",
    "parse_listener",
    "render_reference_markdown",
]
