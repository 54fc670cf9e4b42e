"""Every setting tidelog understands, under Kafka's property names, types and defaults.

Broker settings (``BROKER_CONFIGS``) come from the YAML file, ``TIDELOG_*`` environment variables
and ``--override``. Topic settings (``TOPIC_CONFIGS``) are set per topic at creation or by
AlterConfigs; a topic setting that is not set falls back to its broker synonym (``synonyms``,
first one set wins, then the first synonym's default), exactly as Kafka resolves them.

Values are typed: ``int`` and ``long`` are Python ints (range-checked to 32/64 bits), ``boolean``
is bool, ``list`` is ``list[str]``, ``double`` is float, ``string`` is str. ``None`` means null.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

ConfigType = Literal["int", "long", "short", "double", "boolean", "string", "list", "password"]
Importance = Literal["high", "medium", "low"]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
DAY_MS = 24 * 3600 * 1000
WEEK_MS = 7 * DAY_MS


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


def _b(
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


_CLEANUP = ("delete", "compact")
_TS_TYPES = ("CreateTime", "LogAppendTime")
_BROKER_CODECS = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

BROKER_CONFIG_LIST: tuple[ConfigDef, ...] = (
    # Identity and network.
    _b(
        "node.id", "int", 1, "The id of this broker in the cluster.", min_value=0, importance="high"
    ),
    _b(
        "listeners",
        "list",
        ["PLAINTEXT://127.0.0.1:9092"],
        "Addresses the broker listens on, as NAME://host:port (NAME mapped to a security "
        "protocol by listener.security.protocol.map). An empty host (PLAINTEXT://:9092) binds "
        "127.0.0.1 only, unlike Kafka, where it binds every interface: write 0.0.0.0 (or ::) "
        "to listen on every interface.",
        importance="high",
    ),
    _b(
        "advertised.listeners",
        "list",
        None,
        "Addresses given to clients in Metadata answers. Defaults to listeners. Set it when "
        "clients reach the broker by another name (docker, NAT).",
        importance="high",
    ),
    _b(
        "listener.security.protocol.map",
        "list",
        ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
        "Listener name to security protocol, NAME:PROTOCOL pairs. Names other than PLAINTEXT "
        "(INTERNAL, EXTERNAL, ...) let one broker listen twice and tell each client the "
        "address of the listener it came in on. Protocols: PLAINTEXT, SSL, SASL_PLAINTEXT, "
        "SASL_SSL.",
    ),
    _b("broker.rack", "string", None, "Rack of this broker, shown in Metadata.", importance="low"),
    _b(
        "socket.request.max.bytes",
        "int",
        104857600,
        "Largest request accepted; a larger size prefix closes the connection before buffering.",
        min_value=1,
    ),
    _b(
        "max.connections",
        "int",
        INT_MAX,
        "Most client connections held at once; more are closed on accept.",
        min_value=0,
    ),
    _b(
        "max.connections.per.ip",
        "int",
        INT_MAX,
        "Most connections from one IP address.",
        min_value=0,
    ),
    _b(
        "connections.max.idle.ms",
        "long",
        600000,
        "Close connections idle for longer than this.",
        min_value=-1,
    ),
    _b(
        "num.io.threads",
        "int",
        8,
        "Worker threads for blocking work (fsync, large reads, recovery); values above 8 "
        "are capped at 8 (the event loop is one thread, so more workers only contend).",
        min_value=1,
    ),
    _b(
        "metrics.port",
        "int",
        None,
        "Port for the Prometheus metrics endpoint on the first listener's host; off when unset. "
        "(tidelog setting, not Kafka's.)",
        min_value=0,
        max_value=65535,
        importance="low",
    ),
    # Security (broker/security/). Each ssl.* and sasl.* setting may also be given per listener
    # as listener.name.<listener>.<setting> (the listener name in lower case), as in Kafka.
    _b(
        "ssl.keystore.type",
        "string",
        "JKS",
        "Format of the key store: PEM (JKS and PKCS12 are refused at start-up; convert them).",
    ),
    _b(
        "ssl.keystore.location",
        "string",
        None,
        "PEM file holding the private key (plain or encrypted PKCS#8) and the certificate chain.",
        importance="high",
    ),
    _b(
        "ssl.keystore.password",
        "password",
        None,
        "Password of the key store file; not read (PEM stores only: the key's own password is "
        "ssl.key.password).",
    ),
    _b("ssl.key.password", "password", None, "Password of an encrypted private key."),
    _b("ssl.keystore.key", "password", None, "The private key inline (PEM)."),
    _b(
        "ssl.keystore.certificate.chain",
        "password",
        None,
        "The certificate chain inline (PEM), with ssl.keystore.key.",
    ),
    _b("ssl.truststore.type", "string", "JKS", "Format of the trust store: PEM."),
    _b(
        "ssl.truststore.location",
        "string",
        None,
        "PEM file of the CA certificates trusted for client certificates.",
    ),
    _b(
        "ssl.truststore.password",
        "password",
        None,
        "Password of the trust store; not read (PEM trust stores have none).",
    ),
    _b(
        "ssl.truststore.certificates",
        "password",
        None,
        "The trusted CA certificates inline (PEM).",
    ),
    _b(
        "ssl.client.auth",
        "string",
        "none",
        "Mutual TLS: required, requested (checked when sent) or none.",
        choices=("required", "requested", "none"),
    ),
    _b(
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        "Rules mapping a client certificate's subject DN to a principal name "
        "(RULE:pattern/replacement/[LU], ..., DEFAULT).",
    ),
    _b(
        "ssl.enabled.protocols",
        "list",
        ["TLSv1.2", "TLSv1.3"],
        "TLS versions accepted.",
        choices=("TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1"),
    ),
    _b(
        "ssl.protocol",
        "string",
        "TLSv1.3",
        "The TLS protocol family; not read (ssl.enabled.protocols decides the versions).",
    ),
    _b(
        "ssl.cipher.suites",
        "list",
        [],
        "Cipher suites allowed (OpenSSL or IANA names); empty: the library's defaults.",
    ),
    _b(
        "ssl.endpoint.identification.algorithm",
        "string",
        "https",
        "Host name check of the peer's certificate; not read (a client setting: the broker has no "
        "outgoing TLS connections).",
    ),
    _b(
        "sasl.enabled.mechanisms",
        "list",
        ["GSSAPI"],
        "SASL mechanisms a SASL listener accepts: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.",
        importance="high",
    ),
    _b(
        "sasl.jaas.config",
        "password",
        None,
        "JAAS login configuration; per listener and mechanism as "
        "listener.name.<listener>.<mechanism>.sasl.jaas.config.",
    ),
    _b(
        "sasl.server.max.receive.size",
        "int",
        524288,
        "Largest SASL token accepted before authentication; larger closes the connection.",
        min_value=1,
    ),
    _b(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        "Delay before closing a connection whose authentication failed.",
        min_value=0,
    ),
    _b(
        "connections.max.reauth.ms",
        "long",
        0,
        "Re-authentication of SASL connections (KIP-368). Not implemented: a value other than 0 is "
        "refused at start-up.",
        min_value=0,
    ),
    _b(
        "authorizer.class.name",
        "string",
        "",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACL authorization on.",
        importance="high",
    ),
    _b(
        "super.users",
        "string",
        None,
        "Principals allowed everything, separated by ';' (User:admin;User:CN=broker).",
        importance="high",
    ),
    _b(
        "allow.everyone.if.no.acl.found",
        "boolean",
        False,
        "Allow an action on a resource no ACL matches (false: deny).",
    ),
    # Topics.
    _b("num.partitions", "int", 1, "Partitions of auto-created topics.", min_value=1),
    _b(
        "default.replication.factor",
        "int",
        1,
        "Replication factor of auto-created topics. Accepted for compatibility, not read: a "
        "single node keeps one copy.",
        min_value=1,
        max_value=1,
    ),
    _b(
        "auto.create.topics.enable",
        "boolean",
        True,
        "Create a topic when a client asks Metadata for one that does not exist.",
        importance="high",
    ),
    _b("delete.topic.enable", "boolean", True, "Allow DeleteTopics.", importance="high"),
    # The log.
    _b(
        "log.dirs",
        "list",
        None,
        "Directories holding the partition logs. When unset, log.dir is used.",
        importance="high",
    ),
    _b(
        "log.dir",
        "string",
        "/tmp/kafka-logs",
        "The log directory, used when log.dirs is unset.",
        importance="high",
    ),
    _b("log.segment.bytes", "int", 1073741824, "Largest size of one segment file.", min_value=14),
    _b("log.roll.ms", "long", None, "Roll a segment after this long; overrides log.roll.hours."),
    _b("log.roll.hours", "int", 168, "Roll a segment after this many hours.", min_value=1),
    _b("log.roll.jitter.ms", "long", None, "Random jitter subtracted from the roll time."),
    _b("log.roll.jitter.hours", "int", 0, "Jitter in hours, when log.roll.jitter.ms is unset."),
    _b(
        "log.index.interval.bytes",
        "int",
        4096,
        "Bytes appended between two sparse index entries.",
        min_value=0,
    ),
    _b(
        "log.index.size.max.bytes",
        "int",
        10485760,
        "Size each index file is preallocated to; a full index rolls the segment.",
        min_value=4,
    ),
    _b(
        "log.retention.ms",
        "long",
        None,
        "Delete segments older than this (-1: keep forever). Overrides minutes and hours.",
        min_value=-1,
        importance="high",
    ),
    _b("log.retention.minutes", "int", None, "Retention in minutes, when log.retention.ms unset."),
    _b("log.retention.hours", "int", 168, "Retention in hours, when ms and minutes are unset."),
    _b(
        "log.retention.bytes",
        "long",
        -1,
        "Delete the oldest segments while a partition is larger than this (-1: no limit).",
        importance="high",
    ),
    _b(
        "log.retention.check.interval.ms",
        "long",
        300000,
        "How often retention runs.",
        min_value=1,
    ),
    _b(
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
    _b(
        "log.flush.interval.messages",
        "long",
        1,
        "fsync after this many messages. 1 (tidelog's default): acks=all and acks=1 are answered "
        "only after the fsync (group commit) and consumers see only fsynced records; larger "
        "values (Kafka's default is 9223372036854775807) acknowledge from the page cache.",
        min_value=1,
        importance="high",
    ),
    _b(
        "log.flush.interval.ms",
        "long",
        None,
        "fsync data older than this; unset means only the OS decides.",
        importance="high",
    ),
    _b(
        "log.flush.scheduler.interval.ms",
        "long",
        LONG_MAX,
        "How often the flusher checks whether a log needs an fsync.",
    ),
    _b(
        "log.flush.offset.checkpoint.interval.ms",
        "int",
        60000,
        "How often the recovery-point and high-watermark checkpoints are written.",
        min_value=0,
    ),
    _b(
        "replica.high.watermark.checkpoint.interval.ms",
        "long",
        5000,
        "How often the high-watermark checkpoint (replication-offset-checkpoint) is written.",
        min_value=1,
    ),
    _b(
        "log.flush.start.offset.checkpoint.interval.ms",
        "int",
        60000,
        "How often the log-start-offset checkpoint is written (values below 100 ms count as "
        "100 ms).",
        min_value=0,
    ),
    _b(
        "log.cleanup.policy",
        "list",
        ["delete"],
        "delete, compact, or both: what happens to old segments.",
        choices=_CLEANUP,
    ),
    _b(
        "log.message.timestamp.type",
        "string",
        "CreateTime",
        "Whether record timestamps are the producer's (CreateTime) or the broker's append time.",
        choices=_TS_TYPES,
    ),
    _b(
        "message.max.bytes",
        "int",
        1048588,
        "Largest record batch accepted.",
        min_value=0,
        importance="high",
    ),
    _b(
        "compression.type",
        "string",
        "producer",
        "Codec batches are stored with; producer keeps the producer's codec.",
        choices=_BROKER_CODECS,
        importance="high",
    ),
    _b(
        "fetch.max.bytes",
        "int",
        57671680,
        "Most bytes the broker returns for one fetch request.",
        min_value=0,
    ),
    _b(
        "log.preallocate",
        "boolean",
        False,
        "Preallocate segment files (accepted for compatibility, not read).",
    ),
    _b(
        "min.insync.replicas",
        "int",
        1,
        "Replicas that must ack acks=all. Accepted for compatibility, not read: with one node "
        "acks=all waits for this broker only.",
        min_value=1,
    ),
    _b(
        "unclean.leader.election.enable",
        "boolean",
        False,
        "Accepted for compatibility, not read: a single node has no elections.",
        importance="low",
    ),
    _b(
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
    _b(
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
    _b("log.cleaner.enable", "boolean", True, "Run the log cleaner for compacted topics."),
    _b("log.cleaner.threads", "int", 1, "Cleaner threads.", min_value=0),
    _b(
        "log.cleaner.io.max.bytes.per.second",
        "double",
        1.7976931348623157e308,
        "Throttle on the cleaner's reads and writes.",
    ),
    _b(
        "log.cleaner.min.cleanable.ratio",
        "double",
        0.5,
        "Dirty share of a log above which it is cleaned.",
        min_value=0,
        max_value=1,
    ),
    _b(
        "log.cleaner.delete.retention.ms",
        "long",
        DAY_MS,
        "How long tombstones are kept after compaction.",
        min_value=0,
    ),
    _b(
        "log.cleaner.min.compaction.lag.ms",
        "long",
        0,
        "Records younger than this are not compacted.",
        min_value=0,
    ),
    _b(
        "log.cleaner.max.compaction.lag.ms",
        "long",
        LONG_MAX,
        "Records older than this are compacted whatever the dirty ratio.",
        min_value=1,
    ),
    _b("log.cleaner.backoff.ms", "long", 15000, "Sleep when nothing is cleanable.", min_value=0),
    # Groups and offsets.
    _b(
        "offsets.topic.num.partitions",
        "int",
        50,
        "Partitions of __consumer_offsets (fixed once the topic exists).",
        min_value=1,
    ),
    _b(
        "offsets.topic.replication.factor",
        "short",
        1,
        "Replication factor of __consumer_offsets. Accepted for compatibility, not read (one "
        "node).",
        min_value=1,
    ),
    _b(
        "offsets.topic.segment.bytes",
        "int",
        104857600,
        "Segment size of __consumer_offsets.",
        min_value=1,
    ),
    _b(
        "offsets.retention.minutes",
        "int",
        10080,
        "Committed offsets of an empty group expire after this long.",
        min_value=1,
    ),
    _b(
        "offsets.retention.check.interval.ms",
        "long",
        600000,
        "How often expired offsets are removed.",
        min_value=1,
    ),
    _b(
        "offsets.commit.timeout.ms",
        "int",
        5000,
        "The longest an OffsetCommit answer waits for its __consumer_offsets append to be "
        "covered by the high watermark (with flush.messages=1, the default, that is its fsync); "
        "REQUEST_TIMED_OUT after that.",
        min_value=1,
    ),
    _b(
        "offsets.load.buffer.size",
        "int",
        5242880,
        "Read size when loading __consumer_offsets at start-up.",
        min_value=1,
    ),
    _b(
        "offset.metadata.max.bytes",
        "int",
        4096,
        "Longest metadata string stored with a committed offset.",
        min_value=0,
    ),
    _b(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        "Wait this long for more members before the first rebalance of an empty group.",
        min_value=0,
    ),
    _b(
        "group.min.session.timeout.ms",
        "int",
        6000,
        "Smallest session timeout a member may ask for.",
        min_value=0,
    ),
    _b(
        "group.max.session.timeout.ms",
        "int",
        1800000,
        "Largest session timeout a member may ask for.",
        min_value=0,
    ),
    _b("group.max.size", "int", INT_MAX, "Most members in one group.", min_value=1),
    # Consumer groups of KIP-848 (group.protocol=consumer); Kafka 4's names and defaults.
    _b(
        "group.consumer.session.timeout.ms",
        "int",
        45000,
        "A consumer-group member that sends no heartbeat for this long is fenced.",
        min_value=1,
    ),
    _b(
        "group.consumer.min.session.timeout.ms",
        "int",
        45000,
        "Smallest consumer.session.timeout.ms a group config may set.",
        min_value=1,
    ),
    _b(
        "group.consumer.max.session.timeout.ms",
        "int",
        60000,
        "Largest consumer.session.timeout.ms a group config may set.",
        min_value=1,
    ),
    _b(
        "group.consumer.heartbeat.interval.ms",
        "int",
        5000,
        "How often consumer-group members are told to heartbeat.",
        min_value=1,
    ),
    _b(
        "group.consumer.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest consumer.heartbeat.interval.ms a group config may set.",
        min_value=1,
    ),
    _b(
        "group.consumer.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest consumer.heartbeat.interval.ms a group config may set.",
        min_value=1,
    ),
    _b(
        "group.consumer.assignors",
        "list",
        "uniform,range",
        "Server-side assignors of consumer groups; the first is the default.",
    ),
    _b(
        "group.consumer.max.size",
        "int",
        INT_MAX,
        "Most members in one consumer group.",
        min_value=1,
    ),
    # Share groups (KIP-932).
    _b(
        "group.share.max.size",
        "int",
        200,
        "Most members in one share group.",
        min_value=1,
        max_value=1000,
    ),
    _b(
        "group.share.session.timeout.ms",
        "int",
        45000,
        "How long a share-group member may go without a heartbeat.",
        min_value=1,
    ),
    _b(
        "group.share.min.session.timeout.ms",
        "int",
        45000,
        "Smallest share.session.timeout.ms a group config may set.",
        min_value=1,
    ),
    _b(
        "group.share.max.session.timeout.ms",
        "int",
        60000,
        "Largest share.session.timeout.ms a group config may set.",
        min_value=1,
    ),
    _b(
        "group.share.heartbeat.interval.ms",
        "int",
        5000,
        "How often share-group members are told to heartbeat.",
        min_value=1,
    ),
    _b(
        "group.share.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest share.heartbeat.interval.ms a group config may set.",
        min_value=1,
    ),
    _b(
        "group.share.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest share.heartbeat.interval.ms a group config may set.",
        min_value=1,
    ),
    _b(
        "group.share.record.lock.duration.ms",
        "int",
        30000,
        "How long a share-group member holds the records it acquired.",
        min_value=1000,
        max_value=3600000,
    ),
    _b(
        "group.share.min.record.lock.duration.ms",
        "int",
        15000,
        "Smallest share.record.lock.duration.ms a group config may set.",
        min_value=1000,
        max_value=3600000,
    ),
    _b(
        "group.share.max.record.lock.duration.ms",
        "int",
        60000,
        "Largest share.record.lock.duration.ms a group config may set.",
        min_value=1000,
        max_value=3600000,
    ),
    _b(
        "group.share.delivery.count.limit",
        "int",
        5,
        "Deliveries of a record to share-group members before it is archived.",
        min_value=2,
        max_value=10,
    ),
    _b(
        "group.share.partition.max.record.locks",
        "int",
        2000,
        "Most in-flight records of one share partition.",
        min_value=100,
        max_value=10000,
    ),
    _b(
        "group.share.max.share.sessions",
        "int",
        2000,
        "Most share sessions the broker keeps.",
        min_value=1,
    ),
    _b(
        "share.coordinator.state.topic.num.partitions",
        "int",
        50,
        "Partitions of __share_group_state (fixed once the topic exists).",
        min_value=1,
    ),
    _b(
        "share.coordinator.state.topic.segment.bytes",
        "int",
        104857600,
        "Segment size of __share_group_state.",
        min_value=14,
    ),
    # Producers.
    _b(
        "producer.id.expiration.ms",
        "int",
        DAY_MS,
        "Forget an idle producer id after this long.",
        min_value=1,
    ),
    _b(
        "transactional.id.expiration.ms",
        "int",
        WEEK_MS,
        "Forget an idle transactional id after this long: the transaction coordinator removes "
        "an id with no transaction in progress whose last transaction ended this long ago "
        "(checked every transaction.remove.expired.transaction.cleanup.interval.ms).",
        min_value=1,
    ),
    # Transactions (broker/txn/).
    _b(
        "transaction.state.log.num.partitions",
        "int",
        50,
        "Partitions of __transaction_state (fixed once the topic exists).",
        min_value=1,
    ),
    _b(
        "transaction.state.log.replication.factor",
        "short",
        1,
        "Replication factor of __transaction_state; not read (one node: one copy).",
        min_value=1,
    ),
    _b(
        "transaction.state.log.min.isr",
        "int",
        1,
        "min.insync.replicas of __transaction_state; not read (one node: one copy).",
        min_value=1,
    ),
    _b(
        "transaction.state.log.segment.bytes",
        "int",
        104857600,
        "segment.bytes of __transaction_state.",
        min_value=1024,
    ),
    _b(
        "transaction.state.log.load.buffer.size",
        "int",
        5242880,
        "Bytes read at a time while replaying __transaction_state at start-up.",
        min_value=1,
    ),
    _b(
        "transaction.max.timeout.ms",
        "int",
        900000,
        "Largest transaction timeout a producer may ask for (else INVALID_TRANSACTION_TIMEOUT).",
        min_value=1,
    ),
    _b(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        "How often transactions older than their timeout are looked for and aborted.",
        min_value=1,
    ),
    _b(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        "How often transactional ids idle for transactional.id.expiration.ms are removed.",
        min_value=1,
    ),
)

_TOPIC_CODECS = _BROKER_CODECS

#: Settings defined (so Kafka configs load and DescribeConfigs lists them) but not implemented:
#: start-up refuses a value other than the default, with this reason. A setting leaves this map
#: when it is implemented (tests/config/test_settings_read.py checks every other one is read).
NOT_IMPLEMENTED: dict[str, str] = {
    "connections.max.reauth.ms": "SASL re-authentication (KIP-368) is not done",
}

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


def _t(
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
    return ConfigDef(
        name=name,
        type=type_,
        default=default,
        doc=doc,
        min_value=min_value,
        max_value=max_value,
        choices=tuple(choices) if choices is not None else None,
        synonyms=tuple(synonyms),
        read_only=False,
    )


TOPIC_CONFIG_LIST: tuple[ConfigDef, ...] = (
    _t(
        "cleanup.policy",
        "list",
        ["log.cleanup.policy"],
        "delete, compact or both.",
        choices=_CLEANUP,
    ),
    _t(
        "compression.type",
        "string",
        ["compression.type"],
        "Codec of stored batches.",
        choices=_TOPIC_CODECS,
    ),
    _t(
        "delete.retention.ms",
        "long",
        ["log.cleaner.delete.retention.ms"],
        "How long tombstones survive compaction.",
        min_value=0,
    ),
    _t(
        "file.delete.delay.ms",
        "long",
        ["log.segment.delete.delay.ms"],
        "Delay before a deleted segment's files are removed.",
        min_value=0,
    ),
    _t(
        "flush.messages",
        "long",
        ["log.flush.interval.messages"],
        "fsync after this many messages; 1 means an ack (acks=all or 1) waits for the fsync.",
        min_value=1,
    ),
    _t(
        "flush.ms",
        "long",
        ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
        "fsync data older than this.",
        min_value=0,
    ),
    _t(
        "index.interval.bytes",
        "int",
        ["log.index.interval.bytes"],
        "Bytes between index entries.",
        min_value=0,
    ),
    _t(
        "max.compaction.lag.ms",
        "long",
        ["log.cleaner.max.compaction.lag.ms"],
        "Longest a record stays uncompacted.",
        min_value=1,
    ),
    _t(
        "max.message.bytes",
        "int",
        ["message.max.bytes"],
        "Largest record batch.",
        min_value=0,
    ),
    _t(
        "message.timestamp.type",
        "string",
        ["log.message.timestamp.type"],
        "CreateTime or LogAppendTime.",
        choices=_TS_TYPES,
    ),
    _t(
        "min.cleanable.dirty.ratio",
        "double",
        ["log.cleaner.min.cleanable.ratio"],
        "Dirty share above which the log is compacted.",
        min_value=0,
        max_value=1,
    ),
    _t(
        "min.compaction.lag.ms",
        "long",
        ["log.cleaner.min.compaction.lag.ms"],
        "Shortest a record stays uncompacted.",
        min_value=0,
    ),
    _t(
        "min.insync.replicas",
        "int",
        ["min.insync.replicas"],
        "Accepted for compatibility, not read (one node).",
        min_value=1,
    ),
    _t("preallocate", "boolean", ["log.preallocate"], "Accepted for compatibility, not read."),
    _t(
        "retention.bytes",
        "long",
        ["log.retention.bytes"],
        "Largest partition size before old segments go (-1: none).",
    ),
    _t(
        "retention.ms",
        "long",
        ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
        "Age after which segments are deleted (-1: never).",
        min_value=-1,
    ),
    _t(
        "segment.bytes",
        "int",
        ["log.segment.bytes"],
        "Largest segment file.",
        min_value=14,
    ),
    _t(
        "segment.index.bytes",
        "int",
        ["log.index.size.max.bytes"],
        "Preallocated index size.",
        min_value=4,
    ),
    _t(
        "segment.jitter.ms",
        "long",
        ["log.roll.jitter.ms", "log.roll.jitter.hours"],
        "Jitter on segment.ms.",
        min_value=0,
    ),
    _t(
        "segment.ms",
        "long",
        ["log.roll.ms", "log.roll.hours"],
        "Roll the active segment after this long.",
        min_value=1,
    ),
    _t(
        "unclean.leader.election.enable",
        "boolean",
        ["unclean.leader.election.enable"],
        "Accepted for compatibility, not read (one node).",
    ),
)

BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in BROKER_CONFIG_LIST}

#: Settings a listener may override as ``listener.name.<listener>.<setting>`` (Kafka's rule:
#: the security settings of a listener).
LISTENER_PREFIX = "listener.name."
LISTENER_SETTINGS: frozenset[str] = frozenset(
    n for n in BROKER_CONFIGS if n.startswith(("ssl.", "sasl.")) and n != "ssl.protocol"
) | {"connection.failed.authentication.delay.ms", "connections.max.reauth.ms"}
#: ``listener.name.<listener>.<mechanism>.<setting>``: per mechanism (JAAS).
MECHANISM_SETTINGS: frozenset[str] = frozenset({"sasl.jaas.config"})


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
