"""Kafka client properties as kafka-python keyword arguments: the one place that translates them.

Kafka's tools take client settings as Java properties (``--command-config FILE``,
``--consumer.config FILE``, ``--producer-property KEY=VALUE`` ...), written with Kafka's names::

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-256
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="alice" password="alice-secret";
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/kafka/ca.pem
    ssl.endpoint.identification.algorithm=
    request.timeout.ms=20000

``client_settings(props, role)`` turns such a mapping into the keyword arguments of
kafka-python's ``KafkaAdminClient`` / ``KafkaProducer`` / ``KafkaConsumer`` (``role`` is
``admin``, ``producer`` or ``consumer``):

* a plain name maps to the same name with dots as underscores (``linger.ms`` -> ``linger_ms``),
  when that client has such a setting; its value is typed from the client's default (int, bool,
  float, comma-separated list, dotted version);
* ``sasl.jaas.config`` with PlainLoginModule or ScramLoginModule gives ``sasl_plain_username`` /
  ``sasl_plain_password`` (kafka-python's names for both mechanisms);
* ``ssl.truststore.location`` (PEM) gives ``ssl_cafile``; ``ssl.keystore.location`` (PEM: the
  certificate chain and the private key in one file) gives ``ssl_certfile`` and ``ssl_keyfile``;
  ``ssl.key.password`` gives ``ssl_password``; ``ssl.endpoint.identification.algorithm`` empty
  turns host name checks off (``ssl_check_hostname``), ``https`` keeps them;
* Java-only settings (serializer and interceptor class names, the JKS passwords of PEM stores,
  ``ssl.protocol`` ...) are accepted and reported in ``ignored``, as they have no kafka-python
  meaning;
* anything else is a ``ClientConfigError`` naming the property.

Secrets (passwords, the JAAS line) are never put into error messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ClientConfigError",
    "ClientSettings",
    "client_settings",
    "read_properties",
]

ROLES = ("admin", "producer", "consumer")

#: Java-only client settings: no kafka-python meaning; accepted and reported as ignored.
JAVA_ONLY = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "interceptor.classes", "metric.reporters", "partitioner.class",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.keystore.password", "ssl.truststore.password",
    "ssl.keystore.type", "ssl.truststore.type", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.secure.random.implementation", "ssl.provider",
    "ssl.engine.factory.class", "sasl.login.class", "sasl.client.callback.handler.class",
    "sasl.login.callback.handler.class", "auto.include.jmx.reporter", "metrics.recording.level",
    "enable.metrics.push",
    "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "allow.auto.create.topics.default",
})  # fmt: skip

#: Kafka names whose kafka-python spelling is not the dotted name with underscores.
RENAMED = {
    "ssl.cipher.suites": "ssl_ciphers",
    "max.in.flight.requests.per.connection": "max_in_flight_requests_per_connection",
}

_SECRET_WORDS = ("password", "jaas", "secret", "token")
_JAAS = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r'\s*([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))')
_LOGIN_MODULES = {
    "PlainLoginModule": ("PLAIN",),
    "ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
}


class ClientConfigError(ValueError):
    """A client property that cannot be used, with what to write instead."""


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """kafka-python keyword arguments and the Java-only names that were skipped."""

    kwargs: dict[str, Any]
    ignored: tuple[str, ...] = field(default=())


def is_secret(name: str) -> bool:
    return any(word in name.lower() for word in _SECRET_WORDS)


def read_properties(path: str | Path) -> dict[str, str]:
    """A Java properties file (``key=value``, ``key: value``, ``\\`` continuations, ``#`` and
    ``!`` comments, Unicode escapes) as a dict; ClientConfigError when it cannot be read."""
    import javaproperties

    try:
        with open(path, encoding="utf-8") as fh:
            loaded = javaproperties.load(fh)
    except OSError as exc:
        raise ClientConfigError(f"cannot read {path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ClientConfigError(f"{path} is not a Java properties file: {exc}") from None
    return {str(k).strip(): str(v).strip() for k, v in dict(loaded).items()}


def _defaults(role: str) -> dict[str, Any]:
    if role == "admin":
        from kafka import KafkaAdminClient

        return dict(KafkaAdminClient.DEFAULT_CONFIG)
    if role == "producer":
        from kafka import KafkaProducer

        return dict(KafkaProducer.DEFAULT_CONFIG)
    if role == "consumer":
        from kafka import KafkaConsumer

        return dict(KafkaConsumer.DEFAULT_CONFIG)
    raise ValueError(f"role must be one of {ROLES}, not {role!r}")


def client_settings(props: Mapping[str, str], role: str) -> ClientSettings:
    """Kafka client ``props`` as kafka-python keyword arguments for ``role``."""
    defaults = _defaults(role)
    out: dict[str, Any] = {}
    ignored: list[str] = []
    for name, raw in props.items():
        value = raw.strip()
        if name == "sasl.jaas.config":
            out.update(_jaas(value, props.get("sasl.mechanism", "")))
        elif name == "ssl.truststore.location":
            out["ssl_cafile"] = _pem_file(name, value, props.get("ssl.truststore.type"))
        elif name == "ssl.keystore.location":
            path = _pem_file(name, value, props.get("ssl.keystore.type"))
            out["ssl_certfile"] = path
            out["ssl_keyfile"] = path
        elif name == "ssl.key.password":
            out["ssl_password"] = value
        elif name == "ssl.endpoint.identification.algorithm":
            if value.lower() not in ("", "https"):
                raise ClientConfigError(
                    f"ssl.endpoint.identification.algorithm={value!r}: use https (check the "
                    "broker's host name) or leave it empty (do not check)"
                )
            out["ssl_check_hostname"] = value.lower() == "https"
        elif name in ("ssl.truststore.certificates", "ssl.keystore.certificate.chain",
                      "ssl.keystore.key"):  # fmt: skip
            raise ClientConfigError(
                f"{name} (PEM text in the properties) is not supported: put the PEM in a file "
                f"and name it with ssl.{'truststore' if 'trust' in name else 'keystore'}.location"
            )
        elif name == "partition.assignment.strategy" and role == "consumer":
            out["partition_assignment_strategy"] = _assignors(value)
        elif name in ("security.protocol", "sasl.mechanism"):
            out[name.replace(".", "_")] = value.upper()
        elif name in JAVA_ONLY or name.startswith(("key.deserializer.", "value.deserializer.")):
            ignored.append(name)
        else:
            key = RENAMED.get(name, name.replace(".", "_").replace("-", "_"))
            if key not in defaults:
                raise ClientConfigError(
                    f"unknown {role} property {name!r}: kafka-python's {role} client has no "
                    f"such setting (a Kafka name like request.timeout.ms or linger.ms is expected)"
                )
            out[key] = _typed(name, value, defaults[key])
    if "sasl_plain_username" in out and "sasl_mechanism" not in out:
        out["sasl_mechanism"] = "PLAIN"
    return ClientSettings(out, tuple(sorted(ignored)))


def _shown(name: str, value: str) -> str:
    return "(hidden)" if is_secret(name) else repr(value)


def _typed(name: str, value: str, default: Any) -> Any:
    """``value`` typed like kafka-python's default for the setting."""
    if name == "acks":
        if value.lower() in ("all", "-1"):
            return "all"
        if value in ("0", "1"):
            return int(value)
        raise ClientConfigError(f"acks={value!r}: use all, -1, 1 or 0")
    try:
        if isinstance(default, bool):
            low = value.lower()
            if low not in ("true", "false"):
                raise ValueError("true or false")
            return low == "true"
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
        if isinstance(default, list):
            return [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(default, tuple):
            return tuple(int(p) for p in value.split("."))
    except ValueError:
        kind = "true or false" if isinstance(default, bool) else type(default).__name__
        raise ClientConfigError(
            f"property {name}={_shown(name, value)} must be {kind}"
            + (" (e.g. 2.8.0)" if isinstance(default, tuple) else "")
        ) from None
    if default is None and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


def _assignors(value: str) -> tuple[Any, ...]:
    """Java assignor class names (RangeAssignor, RoundRobinAssignor, StickyAssignor) as
    kafka-python's assignor classes."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    known = {
        "RangeAssignor": RangePartitionAssignor,
        "RoundRobinAssignor": RoundRobinPartitionAssignor,
        "StickyAssignor": StickyPartitionAssignor,
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }
    out = []
    for item in (v.strip() for v in value.split(",") if v.strip()):
        short = item.rsplit(".", 1)[-1]
        if short not in known:
            raise ClientConfigError(
                f"partition.assignment.strategy {item}: kafka-python offers RangeAssignor, "
                "RoundRobinAssignor and StickyAssignor"
            )
        out.append(known[short])
    return tuple(out)


def _jaas(line: str, mechanism: str) -> dict[str, Any]:
    """``<module> required username="u" password="p";`` -> kafka-python's SASL settings."""
    m = _JAAS.fullmatch(line)
    if m is None:
        raise ClientConfigError(
            'sasl.jaas.config must read \'<LoginModule> required username="..." '
            'password="...";\' (the value is hidden here)'
        )
    module = m.group(1).rsplit(".", 1)[-1]
    if module not in _LOGIN_MODULES:
        raise ClientConfigError(
            f"sasl.jaas.config: login module {module} is not supported by the tools "
            "(use PlainLoginModule or ScramLoginModule)"
        )
    options: dict[str, str] = {}
    for opt in _JAAS_OPTION.finditer(m.group(3)):
        quoted = opt.group(2)
        options[opt.group(1)] = (
            re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else opt.group(3)
        )
    if "username" not in options or "password" not in options:
        raise ClientConfigError(f"sasl.jaas.config: {module} needs username=... and password=...")
    if mechanism and mechanism.upper() not in _LOGIN_MODULES[module]:
        raise ClientConfigError(
            f"sasl.mechanism={mechanism} does not go with {module} "
            f"(it serves {', '.join(_LOGIN_MODULES[module])})"
        )
    return {"sasl_plain_username": options["username"], "sasl_plain_password": options["password"]}


def _pem_file(name: str, path: str, store_type: str | None) -> str:
    if store_type is not None and store_type.strip().upper() != "PEM":
        raise ClientConfigError(
            f"{name}: store type {store_type} cannot be read here; convert it to PEM "
            "(keytool -exportcert -rfc / openssl pkcs12 -nodes) and set the type to PEM"
        )
    p = Path(path).expanduser()
    try:
        head = p.read_bytes()[:4096]
    except OSError as exc:
        raise ClientConfigError(f"{name}={path}: {exc.strerror}") from None
    if b"-----BEGIN" not in head:
        raise ClientConfigError(
            f"{name}={path} is not a PEM file (JKS and PKCS12 stores must be converted to PEM)"
        )
    return str(p)
