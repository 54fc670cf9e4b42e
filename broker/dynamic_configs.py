"""Dynamic configs tidelog stores for admin tools: group configs and Kafka-only broker settings.

File ``tidelog-dynamic-configs.json`` in the first log dir (written to ``.tmp``, fsynced,
renamed, dir fsynced, like the topic registry)::

    {"version": 1,
     "broker": {"<node id>": {"name": "value"}, "": {"name": "value"}},
     "group": {"<group id>": {"name": "value"}},
     "client_quotas": [{"entity": {"user": "alice", "client-id": null},
                        "key": "producer_byte_rate", "value": 1048576.0}]}

CLIENT QUOTAS (``client_quotas``): the records of ``broker/client_quotas.py`` (AlterClientQuotas),
replayed in order at load; written in a worker thread (``snapshot`` on the loop, ``write`` in
the worker, a newer snapshot never overwritten by an older one).

GROUP resources (Kafka 4's group configs, GroupConfig): ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` (used by KIP-848 consumer groups), and the share-group ones
Kafka 4.2 defines (used by the share coordinator, ``broker/share/``). Unset names take the
broker's ``group.consumer.*`` / ``group.share.*`` values. Validation follows GroupConfig: an
unknown name is INVALID_CONFIG "Unknown group config name: X"; an integer out of its broker
bounds (``group.consumer.min/max.session.timeout.ms`` ...) or a session timeout not above the
heartbeat interval is INVALID_CONFIG with Kafka's message.

BROKER resources: the settings Kafka can change at run time (DynamicBrokerConfig) that tidelog
does not use (``KAFKA_ONLY_BROKER_CONFIGS`` minus tidelog's own names) are stored and described
(source DYNAMIC_BROKER_CONFIG, or DYNAMIC_DEFAULT_BROKER_CONFIG for the cluster-wide entry named
"") with a warning in the log that they have no effect, so tools and tests that tune them keep
working. tidelog's own settings stay static (refused as Kafka refuses a read-only one).

Threading: event loop only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidelog.config import BROKER_CONFIGS
from tidelog.storage.metadata import atomic_write

log = logging.getLogger("tidelog.admin")

DYNAMIC_CONFIGS_FILE = "tidelog-dynamic-configs.json"

#: Kafka's ConfigSource ids (DescribeConfigs).
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_DEFAULT = 5
SOURCE_GROUP = 8


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One group config: its broker default, and the broker settings bounding it."""

    name: str
    default_from: str
    fallback: int | str
    min_from: str | None = None
    max_from: str | None = None
    floor: int = 1
    choices: tuple[str, ...] = ()
    doc: str = ""


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(
            "consumer.session.timeout.ms",
            "group.consumer.session.timeout.ms",
            45000,
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
            doc="The timeout to detect client failures when using the consumer group protocol.",
        ),
        GroupConfigDef(
            "consumer.heartbeat.interval.ms",
            "group.consumer.heartbeat.interval.ms",
            5000,
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
            doc="The heartbeat interval given to the members of a consumer group.",
        ),
        GroupConfigDef(
            "share.session.timeout.ms",
            "group.share.session.timeout.ms",
            45000,
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
            doc="The timeout to detect client failures when using the share group protocol.",
        ),
        GroupConfigDef(
            "share.heartbeat.interval.ms",
            "group.share.heartbeat.interval.ms",
            5000,
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
            doc="The heartbeat interval given to the members of a share group.",
        ),
        GroupConfigDef(
            "share.record.lock.duration.ms",
            "group.share.record.lock.duration.ms",
            30000,
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
            floor=1000,
            doc="The record acquisition lock duration in milliseconds for share groups.",
        ),
        GroupConfigDef(
            "share.auto.offset.reset",
            "",
            "latest",
            choices=("latest", "earliest", "by_duration:<PnDTnHnMn.nS>"),
            doc="The strategy to initialize the share-partition start offset.",
        ),
        GroupConfigDef(
            "share.isolation.level",
            "",
            "read_uncommitted",
            choices=("read_committed", "read_uncommitted"),
            doc="Which records share-group members read: committed ones only, or all.",
        ),
        GroupConfigDef(
            "share.renew.acknowledge.enable",
            "",
            "true",
            choices=("true", "false"),
            doc="Whether the renew acknowledge type is enabled for the share group.",
        ),
        GroupConfigDef(
            "share.delivery.count.limit",
            "group.share.delivery.count.limit",
            5,
            floor=2,
            doc="Deliveries of a record before it is archived.",
        ),
    )
}

#: Kafka 4's broker-bound defaults of the group settings tidelog does not define itself.
_KAFKA_GROUP_DEFAULTS = {
    "group.share.session.timeout.ms": 45000,
    "group.share.min.session.timeout.ms": 45000,
    "group.share.max.session.timeout.ms": 60000,
    "group.share.heartbeat.interval.ms": 5000,
    "group.share.min.heartbeat.interval.ms": 5000,
    "group.share.max.heartbeat.interval.ms": 15000,
    "group.share.record.lock.duration.ms": 30000,
    "group.share.min.record.lock.duration.ms": 15000,
    "group.share.max.record.lock.duration.ms": 60000,
}

#: Broker settings Kafka 4 can change at run time (DynamicBrokerConfig.AllDynamicConfigs:
#: log, cleaner, thread pools, connection quotas, listeners, SSL/SASL, metrics reporters,
#: replication throttles, producer state, remote log). Those tidelog does not define are
#: stored and described with no effect.
KAFKA_ONLY_BROKER_CONFIGS = frozenset(
    {
        "background.threads",
        "num.io.threads",
        "num.network.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
        "metric.reporters",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "unclean.leader.election.enable",
        "min.insync.replicas",
        "log.message.timestamp.type",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "log.preallocate",
        "log.local.retention.ms",
        "log.local.retention.bytes",
        "log.cleaner.io.buffer.load.factor",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "transaction.partition.verification.enable",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.jaas.config",
        "sasl.enabled.mechanisms",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.client.auth",
        "ssl.engine.factory.class",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
        "remote.log.reader.threads",
        "remote.fetch.max.wait.ms",
        "remote.list.offsets.request.timeout.ms",
        "remote.log.manager.copier.thread.pool.size",
        "remote.log.manager.expiration.thread.pool.size",
        "remote.log.manager.follower.thread.pool.size",
    }
)

#: Names whose values are never shown (DescribeConfigs answers null for them).
_SENSITIVE = frozenset(
    {
        "sasl.jaas.config",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.truststore.password",
    }
)


def is_kafka_only_broker_config(name: str) -> bool:
    return name in KAFKA_ONLY_BROKER_CONFIGS and name not in BROKER_CONFIGS


def is_sensitive(name: str) -> bool:
    return name in _SENSITIVE


class GroupConfigError(ValueError):
    """A group config Kafka's GroupConfig.validate refuses (INVALID_CONFIG)."""


class DynamicConfigs:
    """Stored group configs and Kafka-only broker settings (see the module docstring)."""

    def __init__(self, path: Path, broker_setting: Any) -> None:
        self.path = path
        self._setting = broker_setting  # name -> value of the broker's static settings
        self._broker: dict[str, dict[str, str]] = {}
        self._group: dict[str, dict[str, str]] = {}
        #: Client quota records (plain: {"entity": {type: name}, "key": k, "value": v}).
        self._client_quotas: list[dict[str, Any]] = []
        self._write_lock = threading.Lock()
        self._snapshots = 0  # snapshots taken
        self._written = 0  # the newest snapshot written

    # -- persistence ---------------------------------------------------------------------------
    def load(self) -> None:
        """Read the stored file; the broker calls it once storage has locked and checked the log
        dir (read before, a log dir that is a file warned about this file before the start-up
        error that names the real cause)."""
        try:
            text = self.path.read_text()
            import json  # at first use: a new log dir has no file

            raw = json.loads(text)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            return
        if not isinstance(raw, dict):
            return
        for key, target in (("broker", self._broker), ("group", self._group)):
            section = raw.get(key)
            if isinstance(section, dict):
                for name, values in section.items():
                    if isinstance(values, dict):
                        target[str(name)] = {str(k): str(v) for k, v in values.items()}
        quotas = raw.get("client_quotas")
        if isinstance(quotas, list):
            self._client_quotas = [q for q in quotas if isinstance(q, dict)]

    def snapshot(self) -> tuple[int, dict[str, Any]]:
        """What ``write`` stores (taken on the loop): a sequence number and a copy."""
        self._snapshots += 1
        data = {
            "version": 1,
            "broker": {k: dict(v) for k, v in self._broker.items()},
            "group": {k: dict(v) for k, v in self._group.items()},
            "client_quotas": [dict(q) for q in self._client_quotas],
        }
        return self._snapshots, data

    def write(self, snapshot: tuple[int, dict[str, Any]]) -> None:
        """Store a snapshot (``.tmp``, fsync, rename, dir fsync); any thread. A snapshot older
        than one already written is skipped."""
        sequence, data = snapshot
        with self._write_lock:
            if sequence <= self._written:
                return
            import json

            atomic_write(self.path, json.dumps(data, sort_keys=True).encode())
            self._written = sequence

    def _save(self) -> None:
        self.write(self.snapshot())

    # -- client quotas -------------------------------------------------------------------------
    def client_quota_records(self) -> list[dict[str, Any]]:
        """The stored client quota records, in order."""
        return [dict(q) for q in self._client_quotas]

    def set_client_quota_records(self, records: list[dict[str, Any]]) -> None:
        """Replace the stored records (the caller writes them: ``write(snapshot())``)."""
        self._client_quotas = [dict(q) for q in records]

    # -- broker --------------------------------------------------------------------------------
    def broker_overrides(self, resource_name: str) -> dict[str, str]:
        return dict(self._broker.get(resource_name, {}))

    def set_broker_overrides(self, resource_name: str, overrides: Mapping[str, str]) -> None:
        old = self._broker.get(resource_name, {})
        if dict(overrides) == old:
            return
        for name, value in overrides.items():
            if old.get(name) != value:
                shown = "[hidden]" if is_sensitive(name) else value
                log.warning(
                    "broker config %s=%s stored for %s; it has no effect in tidelog",
                    name,
                    shown,
                    f"broker {resource_name}" if resource_name else "the cluster default",
                )
        if overrides:
            self._broker[resource_name] = dict(overrides)
        else:
            self._broker.pop(resource_name, None)
        self._save()

    # -- groups --------------------------------------------------------------------------------
    def _broker_value(self, name: str, fallback: int | str) -> int | str:
        if not name:
            return fallback
        try:
            value = self._setting(name)
        except (KeyError, ValueError):
            value = None
        if value is None:
            return _KAFKA_GROUP_DEFAULTS.get(name, fallback)
        return value if isinstance(value, int | str) else fallback

    def group_overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._group.get(group_id, {}))

    def group_config(self, group_id: str) -> dict[str, int | str]:
        """Every group config's effective value for ``group_id``."""
        overrides = self._group.get(group_id, {})
        out: dict[str, int | str] = {}
        for name, d in GROUP_CONFIGS.items():
            if name in overrides:
                raw = overrides[name]
                out[name] = raw if d.choices else int(raw)
            else:
                out[name] = self._broker_value(d.default_from, d.fallback)
        return out

    def validate_group(self, overrides: Mapping[str, str]) -> None:
        """Raise ``GroupConfigError`` as Kafka's GroupConfig.validate does."""
        values: dict[str, int | str] = {}
        for name, raw in overrides.items():
            d = GROUP_CONFIGS.get(name)
            if d is None:
                raise GroupConfigError(f"Unknown group config name: {name}")
            if name == "share.auto.offset.reset":
                # imported here: the share package loads after the first ApiVersions answer
                from tidelog.broker.share.offset_reset import parse_auto_offset_reset

                if parse_auto_offset_reset(raw) is None:
                    raise GroupConfigError(
                        f"Invalid value `{raw}` for configuration {name}. The value must be "
                        "either 'earliest', 'latest' or of the format "
                        "'by_duration:<PnDTnHnMn.nS>'."
                    )
                values[name] = raw.strip()
                continue
            if d.choices:
                if raw.lower() not in d.choices:
                    raise GroupConfigError(
                        f"Invalid value {raw} for configuration {name}: String must be one of: "
                        + ", ".join(d.choices)
                    )
                values[name] = raw.lower()
                continue
            try:
                number = int(raw.strip())
            except ValueError:
                raise GroupConfigError(
                    f"Invalid value {raw} for configuration {name}: Not a number of type INT"
                ) from None
            if number < d.floor:
                raise GroupConfigError(
                    f"Invalid value {number} for configuration {name}: Value must be at least "
                    f"{d.floor}"
                )
            values[name] = number
        full = {n: self._broker_value(d.default_from, d.fallback) for n, d in GROUP_CONFIGS.items()}
        full.update(values)
        for name, d in GROUP_CONFIGS.items():
            value = full[name]
            if not isinstance(value, int):
                continue
            if d.min_from and value < int(self._broker_value(d.min_from, 0)):
                raise GroupConfigError(f"{name} must be greater than or equal to {d.min_from}")
            if d.max_from and value > int(self._broker_value(d.max_from, 2**31 - 1)):
                raise GroupConfigError(f"{name} must be less than or equal to {d.max_from}")
        for kind in ("consumer", "share"):
            session = full[f"{kind}.session.timeout.ms"]
            heartbeat = full[f"{kind}.heartbeat.interval.ms"]
            if isinstance(session, int) and isinstance(heartbeat, int) and session <= heartbeat:
                raise GroupConfigError(
                    f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms"
                )

    def set_group_overrides(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """Store ``overrides`` (already validated) as the group's whole set."""
        if overrides:
            self._group[group_id] = dict(overrides)
        else:
            self._group.pop(group_id, None)
        self._save()
        log.info("group %s configs set to %s", group_id, dict(overrides))
