"""Every setting tidelog understands, under Kafka's property names, types and defaults.

Broker settings (``BROKER_CONFIGS``) come from the YAML file, ``TIDELOG_*`` environment variables
and ``--override``. Topic settings (``TOPIC_CONFIGS``) are set per topic at creation or by
AlterConfigs; a topic setting that is not set falls back to its broker synonym (``synonyms``,
first one set wins, then the first synonym's default), exactly as Kafka resolves them.

The broker's settings are listed here by area (identity and network, topics, the log, the
cleaner, producers, transactions) and, for the larger areas, in ``config/security_configs.py`` and
``config/group_configs.py``; the topic settings in ``config/topic_configs.py``; what a definition
holds in ``config/config_def.py``.

Values are typed: ``int`` and ``long`` are Python ints (range-checked to 32/64 bits), ``boolean``
is bool, ``list`` is ``list[str]``, ``double`` is float, ``string`` is str. ``None`` means null.
"""

from __future__ import annotations

from tidelog.config.config_def import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    DAY_MS,
    INT_MAX,
    LONG_MAX,
    TIMESTAMP_TYPES,
    WEEK_MS,
    ConfigDef,
    ConfigType,
    Importance,
    broker_def,
)
from tidelog.config.group_configs import GROUP_CONFIGS
from tidelog.config.security_configs import SECURITY_CONFIGS
from tidelog.config.topic_configs import TOPIC_CONFIG_LIST

# Re-exported: callers import the definitions from here (one entry point for every setting).
__all__ = (
    "BROKER_ALIASES",
    "BROKER_CONFIGS",
    "BROKER_CONFIG_LIST",
    "COMPATIBILITY_ONLY",
    "DAY_MS",
    "INT_MAX",
    "LISTENER_PREFIX",
    "LISTENER_SETTINGS",
    "LONG_MAX",
    "MECHANISM_SETTINGS",
    "NOT_IMPLEMENTED",
    "TOPIC_CONFIGS",
    "TOPIC_CONFIG_LIST",
    "UNIT_MS",
    "WEEK_MS",
    "ConfigDef",
    "ConfigType",
    "Importance",
    "int_default",
    "listener_setting_base",
)

BROKER_CONFIG_LIST: tuple[ConfigDef, ...] = (
    # Identity and network.
    broker_def(
        "node.id", "int", 1, "The id of this broker in the cluster.", min_value=0, importance="high"
    ),
    broker_def(
        "listeners",
        "list",
        ["PLAINTEXT://127.0.0.1:9092"],
        "Addresses the broker listens on, as NAME://host:port (NAME mapped to a security "
        "protocol by listener.security.protocol.map). An empty host (PLAINTEXT://:9092) binds "
        "127.0.0.1 only, unlike Kafka, where it binds every interface: write 0.0.0.0 (or ::) "
        "to listen on every interface.",
        importance="high",
    ),
    broker_def(
        "advertised.listeners",
        "list",
        None,
        "Addresses given to clients in Metadata answers. Defaults to listeners. Set it when "
        "clients reach the broker by another name (docker, NAT).",
        importance="high",
    ),
    broker_def(
        "listener.security.protocol.map",
        "list",
        ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
        "Listener name to security protocol, NAME:PROTOCOL pairs. Names other than PLAINTEXT "
        "(INTERNAL, EXTERNAL, ...) let one broker listen twice and tell each client the "
        "address of the listener it came in on. Protocols: PLAINTEXT, SSL, SASL_PLAINTEXT, "
        "SASL_SSL.",
    ),
    broker_def(
        "broker.rack", "string", None, "Rack of this broker, shown in Metadata.", importance="low"
    ),
    broker_def(
        "socket.request.max.bytes",
        "int",
        104857600,
        "Largest request accepted; a larger size prefix closes the connection before buffering.",
        min_value=1,
    ),
    broker_def(
        "max.connections",
        "int",
        INT_MAX,
        "Most client connections held at once; more are closed on accept.",
        min_value=0,
    ),
    broker_def(
        "max.connections.per.ip",
        "int",
        INT_MAX,
        "Most connections from one IP address.",
        min_value=0,
    ),
    broker_def(
        "connections.max.idle.ms",
        "long",
        600000,
        "Close connections idle for longer than this.",
        min_value=-1,
    ),
    broker_def(
        "quota.window.num",
        "int",
        11,
        "The number of samples to retain in memory for client quotas.",
        min_value=1,
        importance="low",
    ),
    broker_def(
        "quota.window.size.seconds",
        "int",
        1,
        "The time span of each sample for client quotas.",
        min_value=1,
        importance="low",
    ),
    broker_def(
        "num.io.threads",
        "int",
        8,
        "Worker threads for blocking work (fsync, large reads, recovery); values above 8 "
        "are capped at 8 (the event loop is one thread, so more workers only contend).",
        min_value=1,
    ),
    broker_def(
        "metrics.port",
        "int",
        None,
        "Port for the Prometheus metrics endpoint on the first listener's host; off when unset. "
        "(tidelog setting, not Kafka's.)",
        min_value=0,
        max_value=65535,
        importance="low",
    ),
    broker_def(
        "schema.registry.listeners",
        "list",
        None,
        "Listeners of the Schema Registry served by the broker (Confluent's REST API v1), as "
        "http://host:port or https://host:port (https uses the broker's ssl.* key store); off "
        "when unset. State is kept in the compacted _schemas topic. (tidelog setting, named "
        "after Confluent's listeners setting; docs/schema-registry.md.)",
        importance="low",
    ),
    *SECURITY_CONFIGS,
    # Topics.
    broker_def("num.partitions", "int", 1, "Partitions of auto-created topics.", min_value=1),
    broker_def(
        "default.replication.factor",
        "int",
        1,
        "Replication factor of auto-created topics. Accepted for compatibility, not read: a "
        "single node keeps one copy.",
        min_value=1,
        max_value=1,
    ),
    broker_def(
        "auto.create.topics.enable",
        "boolean",
        True,
        "Create a topic when a client asks Metadata for one that does not exist.",
        importance="high",
    ),
    broker_def("delete.topic.enable", "boolean", True, "Allow DeleteTopics.", importance="high"),
    # The log.
    broker_def(
        "log.dirs",
        "list",
        None,
        "Directories holding the partition logs. When unset, log.dir is used.",
        importance="high",
    ),
    broker_def(
        "log.dir",
        "string",
        "/tmp/kafka-logs",
        "The log directory, used when log.dirs is unset.",
        importance="high",
    ),
    broker_def(
        "log.segment.bytes", "int", 1073741824, "Largest size of one segment file.", min_value=14
    ),
    broker_def(
        "log.roll.ms", "long", None, "Roll a segment after this long; overrides log.roll.hours."
    ),
    broker_def("log.roll.hours", "int", 168, "Roll a segment after this many hours.", min_value=1),
    broker_def("log.roll.jitter.ms", "long", None, "Random jitter subtracted from the roll time."),
    broker_def(
        "log.roll.jitter.hours", "int", 0, "Jitter in hours, when log.roll.jitter.ms is unset."
    ),
    broker_def(
        "log.index.interval.bytes",
        "int",
        4096,
        "Bytes appended between two sparse index entries.",
        min_value=0,
    ),
    broker_def(
        "log.index.size.max.bytes",
        "int",
        10485760,
        "Size each index file is preallocated to; a full index rolls the segment.",
        min_value=4,
    ),
    broker_def(
        "log.retention.ms",
        "long",
        None,
        "Delete segments older than this (-1: keep forever). Overrides minutes and hours.",
        min_value=-1,
        importance="high",
    ),
    broker_def(
        "log.retention.minutes", "int", None, "Retention in minutes, when log.retention.ms unset."
    ),
    broker_def(
        "log.retention.hours", "int", 168, "Retention in hours, when ms and minutes are unset."
    ),
    broker_def(
        "log.retention.bytes",
        "long",
        -1,
        "Delete the oldest segments while a partition is larger than this (-1: no limit).",
        importance="high",
    ),
    broker_def(
        "log.retention.check.interval.ms",
        "long",
        300000,
        "How often retention runs.",
        min_value=1,
    ),
    broker_def(
        "log.segment.delete.delay.ms",
        "long",
        60000,
        "How long a deleted segment stays as a .deleted file before it is removed.",
        min_value=0,
    ),
    # Kafka divergence: Kafka's default is Long.MAX_VALUE (never forced: replicas make an ack
    # safe). A single node has no replica, so tidelog's default is 1: acks=all and acks=1 are
    # answered (and the HW moves) only once a group-commit fsync covers the batch. Set it back
    # to 9223372036854775807 (or any value > 1) to acknowledge from the page cache.
    broker_def(
        "log.flush.interval.messages",
        "long",
        1,
        "fsync after this many messages. 1 (tidelog's default): acks=all and acks=1 are answered "
        "only after the fsync (group commit) and consumers see only fsynced records; larger "
        "values (Kafka's default is 9223372036854775807) acknowledge from the page cache.",
        min_value=1,
        importance="high",
    ),
    broker_def(
        "log.flush.interval.ms",
        "long",
        None,
        "fsync data older than this; unset means only the OS decides.",
        importance="high",
    ),
    broker_def(
        "log.flush.scheduler.interval.ms",
        "long",
        LONG_MAX,
        "How often the flusher checks whether a log needs an fsync.",
    ),
    broker_def(
        "log.flush.offset.checkpoint.interval.ms",
        "int",
        60000,
        "How often the recovery-point and high-watermark checkpoints are written.",
        min_value=0,
    ),
    broker_def(
        "replica.high.watermark.checkpoint.interval.ms",
        "long",
        5000,
        "How often the high-watermark checkpoint (replication-offset-checkpoint) is written.",
        min_value=1,
    ),
    broker_def(
        "log.flush.start.offset.checkpoint.interval.ms",
        "int",
        60000,
        "How often the log-start-offset checkpoint is written (values below 100 ms count as "
        "100 ms).",
        min_value=0,
    ),
    broker_def(
        "log.cleanup.policy",
        "list",
        ["delete"],
        "delete, compact, or both: what happens to old segments.",
        choices=CLEANUP_POLICIES,
    ),
    broker_def(
        "log.message.timestamp.type",
        "string",
        "CreateTime",
        "Whether record timestamps are the producer's (CreateTime) or the broker's append time.",
        choices=TIMESTAMP_TYPES,
    ),
    broker_def(
        "message.max.bytes",
        "int",
        1048588,
        "Largest record batch accepted.",
        min_value=0,
        importance="high",
    ),
    broker_def(
        "compression.type",
        "string",
        "producer",
        "Codec batches are stored with; producer keeps the producer's codec.",
        choices=COMPRESSION_TYPES,
        importance="high",
    ),
    broker_def(
        "fetch.max.bytes",
        "int",
        57671680,
        "Most bytes the broker returns for one fetch request.",
        min_value=0,
    ),
    broker_def(
        "log.preallocate",
        "boolean",
        False,
        "Preallocate segment files (accepted for compatibility, not read).",
    ),
    broker_def(
        "min.insync.replicas",
        "int",
        1,
        "Replicas that must ack acks=all. Accepted for compatibility, not read: with one node "
        "acks=all waits for this broker only.",
        min_value=1,
    ),
    broker_def(
        "unclean.leader.election.enable",
        "boolean",
        False,
        "Accepted for compatibility, not read: a single node has no elections.",
        importance="low",
    ),
    broker_def(
        "num.recovery.threads.per.data.dir",
        "int",
        1,
        "Threads that open (and recover, after an unclean shutdown) the partition logs of "
        "each log dir at start-up.",
        min_value=1,
    ),
    # Kafka divergence: Kafka has no such bound (it keeps one descriptor per segment open and
    # maps the indexes); tidelog opens segment files through an LRU cache of this size so that
    # tens of thousands of partitions fit under a descriptor limit that cannot be raised.
    broker_def(
        "log.open.files.max",
        "int",
        -1,
        "tidelog only: most segment files (.log, .index, .timeindex) open at once; idle ones "
        "are closed least recently used first (fsynced first if written) and reopened when "
        "needed. -1 (the default): half the soft RLIMIT_NOFILE, which `tidelog serve` raises "
        "to the hard limit at start-up (10000 under a limit of 20000); the other half is left "
        "for connections and short-lived files.",
        min_value=-1,
    ),
    # Log cleaner (compaction).
    broker_def("log.cleaner.enable", "boolean", True, "Run the log cleaner for compacted topics."),
    broker_def("log.cleaner.threads", "int", 1, "Cleaner threads.", min_value=0),
    broker_def(
        "log.cleaner.io.max.bytes.per.second",
        "double",
        1.7976931348623157e308,
        "Throttle on the cleaner's reads and writes.",
    ),
    broker_def(
        "log.cleaner.min.cleanable.ratio",
        "double",
        0.5,
        "Dirty share of a log above which it is cleaned.",
        min_value=0,
        max_value=1,
    ),
    broker_def(
        "log.cleaner.delete.retention.ms",
        "long",
        DAY_MS,
        "How long tombstones are kept after compaction.",
        min_value=0,
    ),
    broker_def(
        "log.cleaner.min.compaction.lag.ms",
        "long",
        0,
        "Records younger than this are not compacted.",
        min_value=0,
    ),
    broker_def(
        "log.cleaner.max.compaction.lag.ms",
        "long",
        LONG_MAX,
        "Records older than this are compacted whatever the dirty ratio.",
        min_value=1,
    ),
    broker_def(
        "log.cleaner.backoff.ms", "long", 15000, "Sleep when nothing is cleanable.", min_value=0
    ),
    *GROUP_CONFIGS,
    # Producers.
    broker_def(
        "producer.id.expiration.ms",
        "int",
        DAY_MS,
        "Forget an idle producer id after this long.",
        min_value=1,
    ),
    broker_def(
        "transactional.id.expiration.ms",
        "int",
        WEEK_MS,
        "Forget an idle transactional id after this long: the transaction coordinator removes "
        "an id with no transaction in progress whose last transaction ended this long ago "
        "(checked every transaction.remove.expired.transaction.cleanup.interval.ms).",
        min_value=1,
    ),
    # Transactions (broker/txn/).
    broker_def(
        "transaction.state.log.num.partitions",
        "int",
        50,
        "Partitions of __transaction_state (fixed once the topic exists).",
        min_value=1,
    ),
    broker_def(
        "transaction.state.log.replication.factor",
        "short",
        1,
        "Replication factor of __transaction_state; not read (one node: one copy).",
        min_value=1,
    ),
    broker_def(
        "transaction.state.log.min.isr",
        "int",
        1,
        "min.insync.replicas of __transaction_state; not read (one node: one copy).",
        min_value=1,
    ),
    broker_def(
        "transaction.state.log.segment.bytes",
        "int",
        104857600,
        "segment.bytes of __transaction_state.",
        min_value=1024,
    ),
    broker_def(
        "transaction.state.log.load.buffer.size",
        "int",
        5242880,
        "Bytes read at a time while replaying __transaction_state at start-up.",
        min_value=1,
    ),
    broker_def(
        "transaction.max.timeout.ms",
        "int",
        900000,
        "Largest transaction timeout a producer may ask for (else INVALID_TRANSACTION_TIMEOUT).",
        min_value=1,
    ),
    broker_def(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        "How often transactions older than their timeout are looked for and aborted.",
        min_value=1,
    ),
    broker_def(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        "How often transactional ids idle for transactional.id.expiration.ms are removed.",
        min_value=1,
    ),
)


#: Settings defined (so Kafka configs load and DescribeConfigs lists them) but not implemented:
#: start-up refuses a value other than the default, with this reason. A setting leaves this map
#: when it is implemented (tests/config/test_settings_read.py checks every other one is read).
NOT_IMPLEMENTED: dict[str, str] = {}

#: Settings accepted for compatibility with Kafka configs and deliberately not read: a single
#: node has one copy of each partition and no elections. Their docs say so.
COMPATIBILITY_ONLY: frozenset[str] = frozenset(
    {
        "default.replication.factor",
        "offsets.topic.replication.factor",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "log.preallocate",
        "preallocate",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.protocol",
        "ssl.endpoint.identification.algorithm",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
    }
)


BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in BROKER_CONFIG_LIST}

#: Settings a listener may override as ``listener.name.<listener>.<setting>`` (Kafka's rule:
#: the security settings of a listener).
LISTENER_PREFIX = "listener.name."
LISTENER_SETTINGS: frozenset[str] = frozenset(
    n for n in BROKER_CONFIGS if n.startswith(("ssl.", "sasl.")) and n != "ssl.protocol"
) | {"connection.failed.authentication.delay.ms", "connections.max.reauth.ms"}
#: ``listener.name.<listener>.<mechanism>.<setting>``: per mechanism (JAAS).
MECHANISM_SETTINGS: frozenset[str] = frozenset(
    {"sasl.jaas.config", "sasl.server.callback.handler.class", "connections.max.reauth.ms"}
) | frozenset(n for n in BROKER_CONFIGS if n.startswith("sasl.oauthbearer."))


def int_default(name: str) -> int:
    """The default of an int or long broker setting: the one home of the defaults a component's
    settings object repeats (``broker/group/config.py``, ``broker/txn/state_manager.py``)."""
    default = BROKER_CONFIGS[name].default
    if isinstance(default, bool) or not isinstance(default, int):
        raise TypeError(f"{name} has no int default: {default!r}")
    return default


def listener_setting_base(name: str) -> str | None:
    """For ``listener.name.<l>.[<mechanism>.]<setting>`` the base setting's name, else None."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    rest = name[len(LISTENER_PREFIX) :]
    listener, dot, setting = rest.partition(".")
    if not dot or not listener:
        return None
    if setting in LISTENER_SETTINGS:
        return setting
    mechanism, dot, inner = setting.partition(".")
    if dot and mechanism and inner in MECHANISM_SETTINGS:
        return inner
    return None


TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in TOPIC_CONFIG_LIST}

#: Some broker settings are given in coarser units; Kafka multiplies them into the ms synonym.
UNIT_MS: dict[str, int] = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}

#: Broker names accepted as aliases for another broker name (older or topic-style spellings).
BROKER_ALIASES: dict[str, str] = {
    # Kafka divergence: Kafka's broker-wide name is log.segment.delete.delay.ms; the topic-style
    # name is accepted in the broker file too, since people write it there.
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
}
