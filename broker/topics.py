"""The topic registry: name -> topic id, partition count, config overrides.

# Kafka divergence: Kafka keeps topics in the KRaft metadata log (``__cluster_metadata``); tidelog
# keeps them in ``tidelog-topics.json`` in the first log dir, written atomically (tmp + fsync +
# rename + fsync of the directory), then again as ``tidelog-topics.json.backup``; an empty or torn
# registry (a file system that lost a write in a crash) is read from the backup, and when both are
# unreadable the start-up stops with one error naming the files and the fix. At start-up the
# registry is reconciled with the partition directories LogManager found: a topic present only on
# disk is adopted (its id from ``partition.metadata``), a registered partition without a directory
# gets an empty log.

Everything here runs on the event loop thread; the operations are rare and small (a few fsyncs
of the registry), so they run inline, except the partition logs of CreateTopics, made in a worker
thread (``create_topic_async``: about 0.3 ms a partition) while the name stays reserved. Admin
handlers call these methods and map ``TopicError`` to the wire error by its ``error_name``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from tidelog.config import BrokerConfig, ConfigError
from tidelog.config.topic import effective_topic_config, validate_topic_configs
from tidelog.storage import LogConfig, StorageError
from tidelog.storage.metadata import atomic_write

if TYPE_CHECKING:
    from tidelog.storage import LogManager, PartitionLog

log = logging.getLogger("tidelog.topics")

__all__ = (
    "INTERNAL_TOPICS",
    "LEADER_EPOCH",
    "REGISTRY_FILE",
    "TopicError",
    "TopicInfo",
    "TopicRegistryError",
    "Topics",
    "log_config_from",
    "nonzero_topic_id",
    "topic_name_error",
)

REGISTRY_FILE = "tidelog-topics.json"
#: The registry's second copy, written right after it (read when the first is empty or torn).
BACKUP_SUFFIX = ".backup"
#: Most partitions one request may create (Kafka's controller limit, KAFKA-17870): a larger
#: CreateTopics / CreatePartitions is refused with POLICY_VIOLATION before anything is made.
MAX_PARTITIONS_PER_REQUEST = 10_000
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
MAX_TOPIC_NAME_LENGTH = 249
#: Kafka's Long.MAX_VALUE: a flush setting at or above it means "never forced".
_LONG_MAX = 2**63 - 1
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


#: The leader epoch of every partition: one node leads every partition from its creation on and
#: no election ever happens (Metadata, ListOffsets and OffsetForLeaderEpoch report it; appended
#: batches carry it in their partitionLeaderEpoch field, as Kafka's appendAsLeader stamps them).
LEADER_EPOCH = 0


def nonzero_topic_id(value: object) -> uuid.UUID | None:
    """A topic id from the wire, or None when it is absent or all zeros (Kafka's ZERO_UUID).

    Kafka tells a request by id from one by name by whether the id is non-zero, never by the
    name (the Java Admin sends an empty string as the name of a topic it asks for by id).
    """
    if isinstance(value, uuid.UUID) and value.int != 0:
        return value
    return None


class TopicRegistryError(Exception):
    """``tidelog-topics.json`` and its backup cannot be read (start-up stops with this)."""


class TopicError(Exception):
    """A topic operation refused; ``error_name`` is the Kafka error it answers with."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name
        self.message = message


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's Topic.validate), or None if it is."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None


def _optional(value: object) -> int | None:
    if value is None:
        return None
    assert isinstance(value, int)
    return None if value >= _LONG_MAX else value


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def log_config_from(effective: Mapping[str, object]) -> LogConfig:
    """Map an effective topic config (Kafka topic names -> typed values) to a LogConfig."""
    d = LogConfig()
    policy = effective.get("cleanup.policy", d.cleanup_policy)
    if isinstance(policy, list | tuple):
        policy = ",".join(str(p) for p in policy)
    return LogConfig(
        segment_bytes=_int(effective.get("segment.bytes"), d.segment_bytes),
        segment_ms=_int(effective.get("segment.ms"), d.segment_ms),
        segment_index_bytes=_int(effective.get("segment.index.bytes"), d.segment_index_bytes),
        index_interval_bytes=_int(effective.get("index.interval.bytes"), d.index_interval_bytes),
        retention_ms=_int(effective.get("retention.ms"), d.retention_ms),
        retention_bytes=_int(effective.get("retention.bytes"), d.retention_bytes),
        max_message_bytes=_int(effective.get("max.message.bytes"), d.max_message_bytes),
        message_timestamp_type=str(
            effective.get("message.timestamp.type") or d.message_timestamp_type
        ),
        flush_messages=_optional(effective.get("flush.messages")),
        flush_ms=_optional(effective.get("flush.ms")),
        file_delete_delay_ms=_int(effective.get("file.delete.delay.ms"), d.file_delete_delay_ms),
        cleanup_policy=str(policy) if policy else d.cleanup_policy,
        segment_jitter_ms=_int(effective.get("segment.jitter.ms"), d.segment_jitter_ms),
    )


class Topics:
    """The registry, bound to the broker's config and LogManager."""

    def __init__(self, config: BrokerConfig, log_manager: LogManager, path: Path) -> None:
        self._config = config
        self._logs = log_manager
        self.path = path
        self._repair = False  # the registry was read from its backup: write it again
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        #: Names whose logs are being made in a worker thread (create_topic_async).
        self._creating: set[str] = set()
        #: Internal topics being created on first use (ensure_internal_topic), by name.
        self._internal_creations: dict[str, asyncio.Future[TopicInfo]] = {}

    # ------------------------------------------------------------------ reading

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID | None) -> TopicInfo | None:
        """The topic with this id; None (kio's reading of the all-zero id) is no topic's."""
        return None if topic_id is None else self._by_id.get(topic_id)

    def names(self) -> list[str]:
        return sorted(self._topics)

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter([self._topics[n] for n in sorted(self._topics)])

    def __len__(self) -> int:
        return len(self._topics)

    def user_topic_ids(self) -> dict[str, tuple[uuid.UUID, int]]:
        """Name -> (topic id, partition count) of every non-internal topic: what the group
        assignors (consumer and share groups) subscribe members to."""
        return {
            info.name: (info.topic_id, info.partitions) for info in self if not info.is_internal
        }

    def get_log(self, name: str, partition: int) -> PartitionLog | None:
        """The partition's log, or None when the topic or partition does not exist."""
        info = self._topics.get(name)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return self._logs.get_log(name, partition)

    def effective_config(
        self, name: str, overrides: Mapping[str, str] | None = None
    ) -> dict[str, object]:
        """Every topic config's effective value for ``name`` (or for ``overrides`` if given)."""
        if overrides is None:
            info = self._topics.get(name)
            overrides = info.configs if info is not None else {}
        return effective_topic_config(self._config, overrides)

    def log_config(self, name: str) -> LogConfig:
        return log_config_from(self.effective_config(name))

    # ------------------------------------------------------------------ changing

    def check_new_topic(
        self, name: str, num_partitions: int, configs: Mapping[str, str | None]
    ) -> LogConfig:
        """Validate a CreateTopics entry without creating it; returns its LogConfig."""
        reason = topic_name_error(name)
        if reason is not None:
            raise TopicError("INVALID_TOPIC_EXCEPTION", reason)
        if name in self._topics or name in self._creating:
            raise TopicError("TOPIC_ALREADY_EXISTS", f"Topic '{name}' already exists.")
        collision = _collision_key(name)
        for other in (*self._topics, *self._creating):
            if _collision_key(other) == collision:
                raise TopicError(
                    "INVALID_TOPIC_EXCEPTION",
                    f"Topic '{name}' collides with existing topic: {other}",
                )
        if num_partitions < 1:
            raise TopicError(
                "INVALID_PARTITIONS",
                "Number of partitions was set to an invalid non-positive value.",
            )
        if num_partitions > MAX_PARTITIONS_PER_REQUEST:
            raise TopicError("POLICY_VIOLATION", EXCESSIVE_PARTITIONS)
        try:
            validate_topic_configs(configs)
            effective = effective_topic_config(self._config, configs)
            return log_config_from(effective)
        except ConfigError as exc:
            raise TopicError("INVALID_CONFIG", str(exc)) from None
        except ValueError as exc:
            raise TopicError("INVALID_CONFIG", str(exc)) from None

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str | None] | None = None,
        *,
        topic_id: uuid.UUID | None = None,
    ) -> TopicInfo:
        """Create the topic and its partition logs, then persist the registry (on the loop:
        for the internal topics and auto-creation; CreateTopics uses ``create_topic_async``)."""
        info, log_config = self._reserve(name, num_partitions, configs, topic_id)
        try:
            self._create_logs(info, log_config)
        finally:
            self._creating.discard(name)
        return self._register(info)

    async def create_topic_async(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str | None] | None,
        run_blocking: Callable[..., Awaitable[Any]],
    ) -> TopicInfo:
        """``create_topic`` with the partition logs made by ``run_blocking`` (a worker thread):
        a thousand partitions take a few hundred milliseconds of file system work, during
        which the loop serves everyone else. The name is reserved meanwhile (a second
        creation of it answers TOPIC_ALREADY_EXISTS)."""
        info, log_config = self._reserve(name, num_partitions, configs, None)
        try:
            await run_blocking(self._create_logs, info, log_config)
        finally:
            self._creating.discard(name)
        return self._register(info)

    async def ensure_internal_topic(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str],
        run_blocking: Callable[..., Awaitable[Any]],
    ) -> TopicInfo:
        """An internal topic (``__consumer_offsets``, ``__transaction_state``), created on
        first use as Kafka does (on the first FindCoordinator of its type), not at start-up.
        Its logs are made in a worker (``run_blocking``: fifty partitions take a few hundred
        milliseconds of file system work); callers meanwhile wait for the same creation.
        An existing topic is returned as it is (its partition count is fixed once made)."""
        info = self._topics.get(name)
        if info is not None:
            return info
        creating = self._internal_creations.get(name)
        if creating is None:
            creating = asyncio.ensure_future(
                self.create_topic_async(name, num_partitions, configs, run_blocking)
            )
            self._internal_creations[name] = creating
            creating.add_done_callback(lambda _: self._internal_creations.pop(name, None))
        return await asyncio.shield(creating)

    def _reserve(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str | None] | None,
        topic_id: uuid.UUID | None,
    ) -> tuple[TopicInfo, LogConfig]:
        configs = dict(configs or {})
        log_config = self.check_new_topic(name, num_partitions, configs)
        info = TopicInfo(
            name=name,
            topic_id=topic_id or uuid.uuid4(),
            partitions=num_partitions,
            configs=MappingProxyType({k: str(v) for k, v in configs.items() if v is not None}),
        )
        self._creating.add(name)
        return info, log_config

    def _create_logs(self, info: TopicInfo, log_config: LogConfig) -> None:
        """Every partition log of a new topic, or none (storage removes what it made when one
        fails: EMFILE, ENOSPC ...); the failure is this topic's KAFKA_STORAGE_ERROR."""
        try:
            self._logs.create_logs(info.name, range(info.partitions), log_config, info.topic_id)
        except StorageError as exc:
            log.error("cannot create topic %s: %s", info.name, exc)
            raise TopicError("KAFKA_STORAGE_ERROR", str(exc)) from exc

    def _register(self, info: TopicInfo) -> TopicInfo:
        self._put(info)
        try:
            self.save()
        except OSError as exc:
            # No half-created topic: the registry could not record it, so it goes again.
            self._forget(info)
            for partition in range(info.partitions):
                try:
                    self._logs.delete_log(info.name, partition)
                except Exception:
                    log.exception("could not remove partition %d of %s", partition, info.name)
            raise TopicError(
                "KAFKA_STORAGE_ERROR",
                f"cannot record topic {info.name} in {self.path}: {exc.strerror or exc}",
            ) from exc
        log.info(
            "created topic %s (%d partitions, id %s, configs %s)",
            info.name,
            info.partitions,
            info.topic_id,
            dict(info.configs),
        )
        return info

    def _forget(self, info: TopicInfo) -> None:
        if self._topics.get(info.name) is info:
            del self._topics[info.name]
            self._by_id.pop(info.topic_id, None)

    def delete_topic(self, name: str) -> TopicInfo:
        """Forget the topic and delete its logs (storage renames them for later deletion)."""
        info = self._topics.get(name)
        if info is None:
            raise TopicError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic '{name}' does not exist.")
        for partition in range(info.partitions):
            if self._logs.get_log(name, partition) is not None:
                self._logs.delete_log(name, partition)
        del self._topics[name]
        self._by_id.pop(info.topic_id, None)
        self.save()
        log.info("deleted topic %s", name)
        return info

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> TopicInfo:
        """Grow the topic to ``total`` partitions (CreatePartitions)."""
        info = self._topics.get(name)
        if info is None:
            raise TopicError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic '{name}' does not exist.")
        if total <= info.partitions:
            raise TopicError(
                "INVALID_PARTITIONS",
                f"Topic currently has {info.partitions} partitions, which is higher than or equal "
                f"to the requested {total}.",
            )
        if total - info.partitions > MAX_PARTITIONS_PER_REQUEST:
            raise TopicError("POLICY_VIOLATION", EXCESSIVE_PARTITIONS)
        if validate_only:
            return info
        log_config = self.log_config(name)
        try:
            self._logs.create_logs(name, range(info.partitions, total), log_config, info.topic_id)
        except StorageError as exc:
            raise TopicError("KAFKA_STORAGE_ERROR", str(exc)) from exc
        new = TopicInfo(name, info.topic_id, total, info.configs)
        self._put(new)
        self.save()
        return new

    def set_config_overrides(
        self, name: str, overrides: Mapping[str, str], *, validate_only: bool = False
    ) -> TopicInfo:
        """Replace the topic's overrides (validated) and apply them to its logs."""
        info = self._topics.get(name)
        if info is None:
            raise TopicError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic '{name}' does not exist.")
        try:
            log_config = log_config_from(effective_topic_config(self._config, overrides))
        except (ConfigError, ValueError) as exc:
            raise TopicError("INVALID_CONFIG", str(exc)) from None
        if validate_only:
            return info
        new = TopicInfo(name, info.topic_id, info.partitions, MappingProxyType(dict(overrides)))
        for partition in range(info.partitions):
            partition_log = self._logs.get_log(name, partition)
            if partition_log is not None:
                partition_log.update_config(log_config)
        self._put(new)
        self.save()
        return new

    def _put(self, info: TopicInfo) -> None:
        old = self._topics.get(info.name)
        if old is not None:
            self._by_id.pop(old.topic_id, None)
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info

    # ------------------------------------------------------------------ persistence

    def save(self) -> None:
        """Write the registry and then its backup copy, each crash-safely (tmp + fsync +
        rename + fsync of the directory): a crash leaves at least one complete copy."""
        data = {
            "version": 1,
            "topics": {
                info.name: {
                    "topic_id": str(info.topic_id),
                    "partitions": info.partitions,
                    "configs": dict(info.configs),
                }
                for info in self
            },
        }
        import json  # at first use: a new log dir has no registry to read

        text = json.dumps(data, indent=1, sort_keys=True).encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for target in (self.path, self.backup_path):
            atomic_write(target, text)

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + BACKUP_SUFFIX)

    def _read_registered(self) -> dict[str, TopicInfo]:
        """The registry file, or its backup when the file is empty or torn (a crash on a
        file system that lost the write). Neither readable: ``TopicRegistryError``."""
        if not self.path.exists() and not self.backup_path.exists():
            return {}
        try:
            return _read_registry(self.path)
        except TopicRegistryError as exc:
            problem = str(exc)
        try:
            registered = _read_registry(self.backup_path)
        except TopicRegistryError as exc:
            raise TopicRegistryError(
                f"{problem}, and so is its backup ({exc}). Topics, ids and partition counts "
                f"can be rebuilt from the partition dirs: move {self.path} and "
                f"{self.backup_path} away and start again (topic config overrides, such as "
                "retention.ms, must then be set again)"
            ) from None
        log.warning("%s; using its backup %s", problem, self.backup_path.name)
        self._repair = True
        return registered

    def load_and_reconcile(self) -> None:
        """Read the registry file, then make it agree with the logs LogManager found."""
        self._repair = False
        registered = self._read_registered()
        on_disk: dict[str, dict[int, PartitionLog]] = {}
        for partition_log in self._logs.logs():
            on_disk.setdefault(partition_log.topic, {})[partition_log.partition] = partition_log
        changed = self._repair
        for name, parts in on_disk.items():
            info = registered.get(name)
            disk_ids = {p.topic_id for p in parts.values() if p.topic_id is not None}
            disk_id = next(iter(disk_ids)) if len(disk_ids) == 1 else None
            if info is None:
                info = TopicInfo(name, disk_id or uuid.uuid4(), max(parts) + 1)
                log.warning(
                    "topic %s found on disk but not in %s: adopted with %d partitions",
                    name,
                    self.path.name,
                    info.partitions,
                )
                changed = True
            else:
                if disk_id is not None and disk_id != info.topic_id:
                    log.warning(
                        "topic %s: id %s in %s differs from %s in partition.metadata; "
                        "using the partition's",
                        name,
                        info.topic_id,
                        self.path.name,
                        disk_id,
                    )
                    info = TopicInfo(name, disk_id, info.partitions, info.configs)
                    changed = True
                if max(parts) + 1 > info.partitions:
                    info = TopicInfo(name, info.topic_id, max(parts) + 1, info.configs)
                    changed = True
            registered[name] = info
        for info in registered.values():
            self._put(info)
            log_config = self.log_config(info.name)
            for partition in range(info.partitions):
                existing = on_disk.get(info.name, {}).get(partition)
                if existing is None:
                    log.warning(
                        "topic %s partition %d had no log: created empty", info.name, partition
                    )
                    self._logs.create_log(info.name, partition, log_config, info.topic_id)
                elif existing.config != log_config:
                    existing.update_config(log_config)
        # A fresh log dir has nothing to record yet (the first topic writes the registry): no
        # two fsyncs on the loop before the first answer.
        if changed or (registered and not (self.path.exists() and self.backup_path.exists())):
            self.save()


def _read_registry(path: Path) -> dict[str, TopicInfo]:
    """Parse one copy of the registry; ``TopicRegistryError`` names what is wrong with it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TopicRegistryError(f"{path} is missing") from None
    except OSError as exc:
        raise TopicRegistryError(f"cannot read {path}: {exc.strerror}") from None
    if not raw.strip():
        raise TopicRegistryError(f"{path} is empty")
    import json

    try:
        data = json.loads(raw.decode("utf-8"))
        topics = data["topics"]
        registered: dict[str, TopicInfo] = {}
        for name, entry in topics.items():
            registered[name] = TopicInfo(
                name=name,
                topic_id=uuid.UUID(entry["topic_id"]),
                partitions=int(entry["partitions"]),
                configs=MappingProxyType({str(k): str(v) for k, v in entry["configs"].items()}),
            )
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # JSONDecodeError and UnicodeDecodeError are ValueErrors.
        raise TopicRegistryError(f"{path} is not a readable topic registry ({exc})") from None
    return registered


def _collision_key(name: str) -> str:
    return name.replace(".", "_")
