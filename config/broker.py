"""Broker configuration: defaults < config file < ``TIDELOG_*`` environment < ``--override``.

The config file is a flat mapping of Kafka property names to values, in YAML::

    node.id: 1
    listeners: PLAINTEXT://127.0.0.1:9092
    log.dirs: ./data

or a Java properties file, as Kafka's ``server.properties`` (``node.id=1``; chosen by the
``.properties`` suffix, or when the file is not a YAML mapping).

An environment variable ``TIDELOG_<NAME>`` sets ``<name>`` with dots written as underscores, in
upper case (``TIDELOG_ADVERTISED_LISTENERS`` sets ``advertised.listeners``). A bad value, or an
unknown name in the file or an override, raises ``ConfigError`` naming the property and what is
allowed. A ``TIDELOG_*`` variable that names no setting is skipped with a warning naming it (and
the setting it may be a typo of), as Kafka logs a property it does not know and carries on: users
set such variables for their own scripts (``TIDELOG_PROJECT``), and the variables Kubernetes
injects for a Service named ``tidelog`` (``TIDELOG_PORT``, ``TIDELOG_SERVICE_HOST``,
``TIDELOG_PORT_9092_TCP_ADDR`` ...) get their own warning.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tidelog.config.definitions import (
    BROKER_ALIASES,
    BROKER_CONFIGS,
    LISTENER_PREFIX,
    LONG_MAX,
    NOT_IMPLEMENTED,
    UNIT_MS,
    ConfigDef,
    listener_setting_base,
)
from tidelog.config.values import ConfigError, parse_value, unknown_name_error

ENV_PREFIX = "TIDELOG_"
#: Kubernetes' service-link variables for a Service named tidelog (docker links' names too).
SERVICE_LINK_ENV = re.compile(
    r"TIDELOG_(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?"
    r"|PORT(?:_[0-9]+_(?:TCP|UDP|SCTP)(?:_(?:PROTO|PORT|ADDR))?)?)"
)
log = logging.getLogger("tidelog.config")

#: Sources, with DescribeConfigs' numbers (Kafka's ConfigSource).
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


def env_name(name: str) -> str:
    """The environment variable that sets broker property ``name``."""
    return ENV_PREFIX + name.upper().replace(".", "_").replace("-", "_")


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Typed broker settings. ``values`` holds every known property; ``explicit`` those set."""

    values: Mapping[str, object]
    explicit: frozenset[str] = field(default=frozenset())

    def get(self, name: str) -> object:
        name = BROKER_ALIASES.get(name, name)
        if name not in self.values:
            raise unknown_name_error(name, self.values)
        return self.values[name]

    def get_int(self, name: str) -> int:
        value = self.get(name)
        if not isinstance(value, int):
            raise ConfigError(name, f"'{name}' has no integer value")
        return value

    def is_default(self, name: str) -> bool:
        return BROKER_ALIASES.get(name, name) not in self.explicit

    def source(self, name: str) -> int:
        return SOURCE_DEFAULT if self.is_default(name) else SOURCE_STATIC_BROKER

    def with_overrides(self, overrides: Mapping[str, object]) -> BrokerConfig:
        """A copy with more values set (each parsed and checked as at start-up)."""
        values = dict(self.values)
        explicit = set(self.explicit)
        for raw_name, raw in overrides.items():
            name = _canonical(raw_name)
            values[name] = parse_value(definition_of(name), raw)
            explicit.add(name)
        _check_cross(values)
        return BrokerConfig(values=values, explicit=frozenset(explicit))

    def listener_get(self, listener: str, name: str, mechanism: str | None = None) -> object:
        """``name`` as listener ``listener`` sees it: ``listener.name.<listener>.[<mechanism>.]
        <name>`` when set (listener and mechanism in lower case, as Kafka writes them), else
        the broker-wide value."""
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        if mechanism is not None:
            value = self.values.get(f"{prefix}{mechanism.lower()}.{name}")
            if value is not None:
                return value
        value = self.values.get(prefix + name)
        if value is not None:
            return value
        return self.get(name)

    # The settings the broker reads most, typed.
    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def listeners(self) -> list[str]:
        return _as_list(self.get("listeners"))

    @property
    def listener_protocols(self) -> dict[str, str]:
        return parse_protocol_map(self.get("listener.security.protocol.map"))

    @property
    def advertised_listeners(self) -> list[str]:
        adv = self.get("advertised.listeners")
        return _as_list(adv) if adv else self.listeners

    @property
    def log_dirs(self) -> list[str]:
        dirs = self.get("log.dirs")
        if dirs:
            return _as_list(dirs)
        return [str(self.get("log.dir"))]

    @property
    def num_partitions(self) -> int:
        return self.get_int("num.partitions")

    @property
    def auto_create_topics_enable(self) -> bool:
        return bool(self.get("auto.create.topics.enable"))

    @property
    def message_max_bytes(self) -> int:
        return self.get_int("message.max.bytes")

    @property
    def socket_request_max_bytes(self) -> int:
        return self.get_int("socket.request.max.bytes")

    @property
    def retention_ms(self) -> int:
        """log.retention.ms, else minutes, else hours, in ms (-1: forever)."""
        return ms_from_synonyms(
            self, ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
        )

    @property
    def flush_interval_messages(self) -> int | None:
        """None when fsync is never forced by count (Kafka's default, Long.MAX_VALUE)."""
        n = self.get_int("log.flush.interval.messages")
        return None if n >= LONG_MAX else n

    @property
    def flush_interval_ms(self) -> int | None:
        ms = self.get("log.flush.interval.ms")
        return ms if isinstance(ms, int) and ms < LONG_MAX else None


def ms_from_synonyms(cfg: BrokerConfig, names: Sequence[str]) -> int:
    """The first of ``names`` that has a value, converted to ms (hours and minutes scaled)."""
    for name in names:
        value = cfg.get(name)
        if value is not None:
            assert isinstance(value, int)
            if value < 0:
                return -1
            return value * UNIT_MS.get(name, 1)
    raise ConfigError(names[0], f"none of {', '.join(names)} has a value")


def _as_list(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(x) for x in value]
    return [str(value)]


def _canonical(name: str) -> str:
    name = name.strip()
    name = BROKER_ALIASES.get(name, name)
    if name.startswith(LISTENER_PREFIX):
        listener, _, rest = name[len(LISTENER_PREFIX) :].partition(".")
        name = f"{LISTENER_PREFIX}{listener.lower()}.{rest}"
        if listener_setting_base(name) is None:
            raise ConfigError(
                name,
                f"Unknown setting '{name}': a listener prefix takes an ssl.* or sasl.* setting "
                "(listener.name.<listener>.ssl.keystore.location, "
                "listener.name.<listener>.<mechanism>.sasl.jaas.config).",
            )
        return name
    if name not in BROKER_CONFIGS:
        raise unknown_name_error(name, list(BROKER_CONFIGS) + list(BROKER_ALIASES))
    return name


def definition_of(name: str) -> ConfigDef:
    """The definition of a (canonical) broker setting, listener-prefixed ones included."""
    base = listener_setting_base(name)
    if base is None:
        return BROKER_CONFIGS[name]
    return dataclasses.replace(BROKER_CONFIGS[base], name=name)


def _check_cross(values: Mapping[str, object]) -> None:
    for name, reason in NOT_IMPLEMENTED.items():
        if name in values and values[name] != BROKER_CONFIGS[name].default:
            raise ConfigError(
                name,
                f"{name} is not implemented ({reason}): remove it from the configuration "
                f"(or set it to its default, {BROKER_CONFIGS[name].default}).",
            )
    protocol_map = parse_protocol_map(values.get("listener.security.protocol.map"))
    names: dict[str, list[str]] = {}
    for name in ("listeners", "advertised.listeners"):
        seen = names.setdefault(name, [])
        for listener in _as_list(values.get(name) or []):
            parse_listener(listener, name, protocol_map)
            listener_name = listener.partition("://")[0].upper()
            if listener_name in seen:
                raise ConfigError(
                    name,
                    f"Listener name {listener_name} appears twice in '{name}': each listener "
                    "needs its own name (map extra names in listener.security.protocol.map).",
                )
            seen.append(listener_name)
    unknown = [n for n in names.get("advertised.listeners", []) if n not in names["listeners"]]
    if unknown and values.get("advertised.listeners"):
        raise ConfigError(
            "advertised.listeners",
            f"advertised.listeners names {', '.join(unknown)}, which is not in listeners "
            f"({', '.join(names['listeners'])}).",
        )


def parse_protocol_map(raw: object) -> dict[str, str]:
    """``listener.security.protocol.map`` as {listener name: security protocol}."""
    out: dict[str, str] = {}
    for item in _as_list(raw or []):
        listener_name, sep, protocol = item.partition(":")
        if not sep or not listener_name.strip() or not protocol.strip():
            raise ConfigError(
                "listener.security.protocol.map",
                f"Invalid entry {item!r} in 'listener.security.protocol.map': write NAME:PROTOCOL.",
            )
        out[listener_name.strip().upper()] = protocol.strip().upper()
    return out


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_DEFAULT_PROTOCOLS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
_DEFAULT_PROTOCOLS.update(SASL_PLAINTEXT="SASL_PLAINTEXT", SASL_SSL="SASL_SSL")


def parse_listener(
    listener: str, name: str = "listeners", protocol_map: Mapping[str, str] | None = None
) -> tuple[str, int]:
    """``NAME://host:port`` -> (host, port); an empty host means every interface.

    ``NAME`` is a listener name whose security protocol (``listener.security.protocol.map``)
    is one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.
    """
    protocols = _DEFAULT_PROTOCOLS if protocol_map is None else protocol_map
    scheme, sep, rest = listener.partition("://")
    if not sep:
        raise ConfigError(
            name, f"Invalid listener {listener!r} in '{name}': write it as PLAINTEXT://host:port."
        )
    protocol = protocols.get(scheme.upper())
    if protocol is None:
        raise ConfigError(
            name,
            f"Listener name {scheme!r} in '{name}' has no security protocol: add "
            f"{scheme.upper()}:PLAINTEXT to listener.security.protocol.map.",
        )
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(
            name,
            f"Unsupported listener security protocol {protocol!r} for {scheme!r} in '{name}': "
            f"use one of {', '.join(SECURITY_PROTOCOLS)}.",
        )
    host, colon, port_s = rest.rpartition(":")
    if not colon or not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
        raise ConfigError(
            name, f"Invalid listener {listener!r} in '{name}': the port must be 0-65535."
        )
    return host.strip("[]"), int(port_s)


def defaults() -> BrokerConfig:
    return BrokerConfig(values={name: d.default for name, d in BROKER_CONFIGS.items()})


def load_broker_config(
    path: Path | str | None = None,
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Read the YAML file (if any), the ``TIDELOG_*`` variables and ``KEY=VALUE`` overrides."""
    settings: dict[str, object] = {}
    if path is not None:
        settings.update(read_config_file(Path(path)))
    env = os.environ if environ is None else environ
    by_env = {env_name(n): n for n in list(BROKER_CONFIGS) + list(BROKER_ALIASES)}
    skipped = []
    unknown = []
    for key, raw in env.items():
        if not key.startswith(ENV_PREFIX):
            continue
        if key not in by_env and SERVICE_LINK_ENV.fullmatch(key):
            skipped.append(key)
            continue
        if key not in by_env:
            unknown.append(key)
            continue
        settings[_canonical(by_env[key])] = raw
    # Kafka divergence: an unknown name in the file or an override stops start-up (Kafka warns
    # and goes on); only TIDELOG_* variables, shared with the user's other programs, are warned.
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(item, f"Override {item!r} must be written KEY=VALUE.")
        settings[_canonical(key)] = raw
    if skipped:
        log.warning(
            "ignoring %s: Kubernetes service-link variables of a Service named tidelog, not "
            "settings (set enableServiceLinks: false in the pod spec to drop them)",
            ", ".join(sorted(skipped)),
        )
    for key in sorted(unknown):
        log.warning(
            "%s It names no setting, so the broker ignores it and carries on.",
            unknown_name_error(key, by_env, what="environment variable"),
        )
    return defaults().with_overrides(settings)


def read_config_file(path: Path) -> dict[str, object]:
    """Settings of a YAML file or a Java properties file (``server.properties``)."""
    if path.suffix.lower() == ".properties":
        return _read_properties(path)
    if path.suffix.lower() not in (".yaml", ".yml", ".json") and _looks_like_properties(path):
        return _read_properties(path)
    return _read_yaml(path)


def _looks_like_properties(path: Path) -> bool:
    """Whether the first setting line is ``name=value`` (properties) rather than YAML."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False  # _read_yaml reports it
    for line in lines:
        text = line.strip()
        if not text or text.startswith(("#", "!")):
            continue
        eq, colon = text.find("="), text.find(":")
        return eq > 0 and (colon < 0 or eq < colon)
    return False


def _read_properties(path: Path) -> dict[str, object]:
    import javaproperties

    try:
        with path.open(encoding="utf-8") as fh:
            data = javaproperties.load(fh)
    except OSError as e:
        raise ConfigError(str(path), f"Cannot read config file {path}: {e.strerror}.") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(
            str(path), f"Config file {path} is not a Java properties file: {e}"
        ) from None
    return {_canonical(str(key)): str(value).strip() for key, value in data.items()}


def _read_yaml(path: Path) -> dict[str, object]:
    import yaml  # only with --config: the import costs ~20 ms of start-up

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(str(path), f"Cannot read config file {path}: {e.strerror}.") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(str(path), f"Config file {path} is not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            str(path), f"Config file {path} must be a mapping of property names to values."
        )
    out: dict[str, object] = {}
    for key, value in data.items():
        name = _canonical(str(key))
        out[name] = value
    return out
