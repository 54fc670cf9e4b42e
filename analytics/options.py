"""The `tidelog` data source's options, checked as Spark's Kafka source and sink check them.

Reading (`parse_options`):

    source        path (a log dir, or a copy of one)  |  kafka.bootstrap.servers (+ kafka.*)
    topics        subscribe | subscribePattern | assign       (exactly one)
    range         startingOffsets / endingOffsets: earliest | latest | {"t":{"0":23,"1":-2}}
                  (-2 earliest, -1 latest); startingTimestamp / endingTimestamp (epoch ms)
    shape         includeHeaders, maxRecordsPerPartition, maxOffsetsPerTrigger (streaming)

Writing (`parse_sink_options`):

    target        kafka.bootstrap.servers (required), topic (wins over a `topic` column)
    producer      every kafka.* producer setting, Kafka's names (kafka.acks, kafka.linger.ms,
                  kafka.compression.type, ...), handed to kafka-python's KafkaProducer
    delivery      exactlyOnce=true: one transaction per task and micro-batch (see sink.py)

Every bad value raises `OptionError` naming the option and what it accepts. `kafka_config`
turns Kafka property names and string values into kafka-python's arguments for both ways.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1

# kafka.* options a Kafka client may take (mapped to kafka-python's names: dots -> underscores)
_KAFKA_CLIENT_KEYS = frozenset(
    {
        "client.id",
        "request.timeout.ms",
        "security.protocol",
        "sasl.mechanism",
        "sasl.plain.username",
        "sasl.plain.password",
        "ssl.cafile",
        "ssl.certfile",
        "ssl.keyfile",
        "ssl.check.hostname",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "fetch.max.wait.ms",
        "fetch.min.bytes",
        "receive.buffer.bytes",
        "isolation.level",
        "api.version.auto.timeout.ms",
        "connections.max.idle.ms",
        "metadata.max.age.ms",
    }
)
# Spark's Kafka source options that change nothing here; accepted so jobs port unchanged.
_IGNORED = frozenset(
    {
        "failondataloss",
        "kafkaconsumer.polltimeoutms",
        "fetchoffset.numretries",
        "fetchoffset.retryintervalms",
        "groupidprefix",
        "minpartitions",
    }
)
_KNOWN = {
    "path",
    "kafka.bootstrap.servers",
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "includeheaders",
    "maxrecordsperpartition",
    "maxoffsetspertrigger",
    # typed columns from a Schema Registry (analytics/schemas.py: source_decoder)
    "decode",
    "schemaregistryurl",
}


class OptionError(ValueError):
    """A data source option that is unknown or has a bad value."""


# A topic -> partition -> offset (or EARLIEST / LATEST) map, or "earliest" / "latest".
OffsetSpec = str | dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Checked options. `topics` / `pattern` / `assign`: exactly one is set."""

    path: str | None
    bootstrap: str | None
    kafka_config: tuple[tuple[str, str], ...]
    topics: tuple[str, ...]
    pattern: str | None
    assign: tuple[tuple[str, int], ...]
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None
    ending_timestamp: int | None
    include_headers: bool
    max_records_per_partition: int | None
    max_offsets_per_trigger: int | None

    def topic_selected(self, topic: str) -> bool:
        if self.topics:
            return topic in self.topics
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None and not topic.startswith("__")
        return any(t == topic for t, _ in self.assign)

    def to_dict(self) -> dict[str, str]:
        """Back to Spark option names (for re-creating a source elsewhere)."""
        out: dict[str, str] = {}
        if self.path:
            out["path"] = self.path
        if self.bootstrap:
            out["kafka.bootstrap.servers"] = self.bootstrap
        out.update({f"kafka.{k}": v for k, v in self.kafka_config})
        if self.topics:
            out["subscribe"] = ",".join(self.topics)
        if self.pattern is not None:
            out["subscribePattern"] = self.pattern
        if self.assign:
            parts: dict[str, list[int]] = {}
            for t, p in self.assign:
                parts.setdefault(t, []).append(p)
            out["assign"] = json.dumps(parts)
        for name, spec in (("startingOffsets", self.starting), ("endingOffsets", self.ending)):
            out[name] = (
                spec
                if isinstance(spec, str)
                else json.dumps({t: {str(p): o for p, o in ps.items()} for t, ps in spec.items()})
            )
        if self.starting_timestamp is not None:
            out["startingTimestamp"] = str(self.starting_timestamp)
        if self.ending_timestamp is not None:
            out["endingTimestamp"] = str(self.ending_timestamp)
        out["includeHeaders"] = str(self.include_headers).lower()
        if self.max_records_per_partition is not None:
            out["maxRecordsPerPartition"] = str(self.max_records_per_partition)
        if self.max_offsets_per_trigger is not None:
            out["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        return out


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise OptionError(f"option {name}={value!r}: use true or false")
    return v == "true"


def _positive(name: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n <= 0:
        raise OptionError(f"option {name}={value!r}: use a positive whole number")
    return n


def _timestamp(name: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise OptionError(f"option {name}={value!r}: use milliseconds since the epoch") from None
    if n < 0:
        raise OptionError(f"option {name}={value!r}: a timestamp cannot be negative")
    return n


def parse_offsets(name: str, value: str, *, allow: tuple[int, ...]) -> OffsetSpec:
    """'earliest', 'latest' or Spark's JSON {"topic":{"partition":offset}}."""
    v = value.strip()
    if v.lower() in ("earliest", "latest"):
        word = v.lower()
        if (EARLIEST if word == "earliest" else LATEST) not in allow:
            raise OptionError(f"option {name}={value!r}: {word} is not allowed here")
        return word
    try:
        raw = json.loads(v)
    except json.JSONDecodeError:
        raw = None
    if not isinstance(raw, dict) or not raw:
        raise OptionError(
            f"option {name}={value!r}: use earliest, latest or JSON like "
            '{"topicA":{"0":23,"1":-2}} (-2 earliest, -1 latest)'
        )
    out: dict[str, dict[int, int]] = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name}: topic {topic!r} needs a partition->offset object")
        out[topic] = {}
        for p, off in parts.items():
            if not (isinstance(p, str) and p.isdigit()) or type(off) is not int:
                raise OptionError(f"option {name}: {topic}/{p}={off!r} is not partition->offset")
            if off < 0 and off not in allow:
                raise OptionError(
                    f"option {name}: offset {off} for {topic}/{p} is not allowed "
                    "(-2 = earliest, -1 = latest)"
                )
            out[topic][int(p)] = off
    return out


def _assign(value: str) -> tuple[tuple[str, int], ...]:
    try:
        raw = json.loads(value)
    except json.JSONDecodeError:
        raw = None
    ok = (
        isinstance(raw, dict)
        and raw
        and all(
            isinstance(ps, list) and ps and all(type(p) is int and p >= 0 for p in ps)
            for ps in raw.values()
        )
    )
    if not ok:
        raise OptionError(f'option assign={value!r}: use JSON like {{"topicA":[0,1],"topicB":[2]}}')
    assert isinstance(raw, dict)
    return tuple(sorted((t, p) for t, ps in raw.items() for p in ps))


def parse_options(options: Mapping[str, str], *, streaming: bool = False) -> SourceOptions:
    """Check every option; Spark lower-cases option names, so accept any case."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    kafka_cfg: list[tuple[str, str]] = []
    for key in sorted(opts):
        if key in _KNOWN or key in _IGNORED:
            continue
        if key.startswith("kafka.") and key[6:] in _KAFKA_CLIENT_KEYS:
            kafka_cfg.append((key[6:], opts[key]))
            continue
        raise OptionError(
            f"unknown option {key!r}: tidelog takes path or kafka.bootstrap.servers, subscribe, "
            "subscribePattern, assign, startingOffsets, endingOffsets, startingTimestamp, "
            "endingTimestamp, includeHeaders, maxRecordsPerPartition, maxOffsetsPerTrigger, "
            "decode, schemaRegistryUrl"
        )
    path, bootstrap = opts.get("path"), opts.get("kafka.bootstrap.servers")
    if bool(path) == bool(bootstrap):
        raise OptionError(
            "set exactly one of option path (a log dir) and option "
            "kafka.bootstrap.servers (host:port[,host:port])"
        )
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) != 1:
        raise OptionError(
            "set exactly one of options subscribe, subscribePattern and assign "
            f"(got {', '.join(chosen) or 'none'})"
        )
    topics: tuple[str, ...] = ()
    pattern = None
    assign: tuple[tuple[str, int], ...] = ()
    if "subscribe" in opts:
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe is empty: use a comma-separated topic list")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option subscribePattern={pattern!r}: bad regex ({e})") from None
    else:
        assign = _assign(opts["assign"])
    starting = parse_offsets(
        "startingOffsets",
        opts.get("startingoffsets", "latest" if streaming else "earliest"),
        allow=(EARLIEST, LATEST),
    )
    ending = parse_offsets("endingOffsets", opts.get("endingoffsets", "latest"), allow=(LATEST,))
    if streaming and "endingoffsets" in opts:
        raise OptionError("option endingOffsets is for batch queries only (streaming reads on)")
    sts = opts.get("startingtimestamp")
    ets = opts.get("endingtimestamp")
    if streaming and ets is not None:
        raise OptionError("option endingTimestamp is for batch queries only")
    max_rpp = opts.get("maxrecordsperpartition")
    max_trig = opts.get("maxoffsetspertrigger")
    return SourceOptions(
        path=path or None,
        bootstrap=bootstrap or None,
        kafka_config=tuple(kafka_cfg),
        topics=topics,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_timestamp=None if sts is None else _timestamp("startingTimestamp", sts),
        ending_timestamp=None if ets is None else _timestamp("endingTimestamp", ets),
        include_headers=_bool("includeHeaders", opts.get("includeheaders", "false")),
        max_records_per_partition=None
        if max_rpp is None
        else _positive("maxRecordsPerPartition", max_rpp),
        max_offsets_per_trigger=None
        if max_trig is None
        else _positive("maxOffsetsPerTrigger", max_trig),
    )


# ---- kafka.* settings -> kafka-python arguments (shared by the wire reader and the sink) ----

# Java client settings kafka-python has no counterpart for: accepted and ignored (Kafka itself
# only warns about settings it does not use), so a job written for Spark's Kafka sink ports as is.
_JAVA_ONLY = frozenset(
    {
        "buffer.memory",
        "partitioner.class",
        "partitioner.ignore.keys",
        "partitioner.adaptive.partitioning.enable",
        "partitioner.availability.timeout.ms",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "metadata.max.idle.ms",
        "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
        "enable.metrics.push",
        "interceptor.classes",
    }
)
_NOT_SUPPORTED = {
    "key.serializer": "Kafka option 'key.serializer' is not supported as keys are serialized "
    "with ByteArraySerializer.",
    "value.serializer": "Kafka option 'value.serializer' is not supported as value are serialized "
    "with ByteArraySerializer.",
}


def kafka_value(name: str, raw: str, default: Any) -> Any:
    """One setting's string value as kafka-python wants it, typed after its default."""
    v = raw.strip()
    if name == "acks":
        if v.lower() == "all" or v == "-1":
            return -1
        if v in ("0", "1"):
            return int(v)
        raise OptionError(f"option kafka.acks={raw!r}: use all, -1, 0 or 1")
    if name == "compression_type":
        c = v.lower()
        if c not in ("none", "gzip", "snappy", "lz4", "zstd"):
            raise OptionError(
                f"option kafka.compression.type={raw!r}: use none, gzip, snappy, lz4 or zstd"
            )
        return None if c == "none" else c
    if isinstance(default, bool):
        return _bool("kafka." + name.replace("_", "."), v)
    if isinstance(default, int) or (default is None and re.fullmatch(r"-?\d+", v)):
        try:
            return int(v)
        except ValueError:
            raise OptionError(
                f"option kafka.{name.replace('_', '.')}={raw!r}: use a whole number"
            ) from None
    if isinstance(default, float):
        try:
            return float(v)
        except ValueError:
            raise OptionError(
                f"option kafka.{name.replace('_', '.')}={raw!r}: use a number"
            ) from None
    return v


def producer_config(bootstrap: str, settings: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python KafkaProducer arguments from Kafka producer property names (no `kafka.`)."""
    from kafka import KafkaProducer

    defaults = KafkaProducer.DEFAULT_CONFIG
    cfg: dict[str, Any] = {
        "bootstrap_servers": [s.strip() for s in bootstrap.split(",") if s.strip()],
        "client_id": "tidelog-sink",
    }
    for key, raw in settings.items():
        if key in _NOT_SUPPORTED:
            raise OptionError(_NOT_SUPPORTED[key])
        name = key.replace(".", "_")
        if name in ("bootstrap_servers", "key_serializer", "value_serializer", "partitioner"):
            continue
        if name not in defaults:
            if key in _JAVA_ONLY:
                log.warning("kafka.%s has no kafka-python counterpart: ignored", key)
                continue
            raise OptionError(
                f"option kafka.{key}: not a Kafka producer setting kafka-python knows "
                "(see https://kafka-python.readthedocs.io KafkaProducer; Kafka's names with dots)"
            )
        cfg[name] = kafka_value(name, raw, defaults[name])
    return cfg


_SINK_KNOWN = {"kafka.bootstrap.servers", "topic", "includeheaders", "exactlyonce"}
# Options Spark itself hands every sink, and source-only options of Spark's Kafka source (a
# shared option map is common): accepted and unused.
_SINK_IGNORED = {"checkpointlocation", "path", "queryname", "failondataloss"}


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Checked sink options. `producer` holds kafka-python KafkaProducer arguments."""

    bootstrap: str
    topic: str | None
    producer: tuple[tuple[str, Any], ...]
    exactly_once: bool
    transactional_id_prefix: str | None

    def producer_kwargs(self) -> dict[str, Any]:
        return dict(self.producer)


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Check the sink's options (any case, as Spark passes them)."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    settings: dict[str, str] = {}
    for key in sorted(opts):
        if key in _SINK_KNOWN or key in _SINK_IGNORED:
            continue
        if key.startswith("kafka."):
            settings[key[6:]] = opts[key]
            continue
        raise OptionError(
            f"unknown option {key!r} for writing: tidelog's sink takes kafka.bootstrap.servers, "
            "topic, includeHeaders, exactlyOnce and kafka.* producer settings"
        )
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
        )
    exactly_once = _bool("exactlyOnce", opts.get("exactlyonce", "false"))
    _bool("includeHeaders", opts.get("includeheaders", "false"))  # headers go out when present
    prefix = settings.pop("transactional.id", None)
    if prefix is not None and not exactly_once:
        raise OptionError(
            "option kafka.transactional.id is used with exactlyOnce=true only (as the prefix of "
            "each task's transactional id)"
        )
    cfg = producer_config(bootstrap, settings)
    if exactly_once:
        if cfg.get("enable_idempotence") is False or cfg.get("acks", -1) != -1:
            raise OptionError(
                "exactlyOnce=true needs kafka.enable.idempotence=true and kafka.acks=all"
            )
        # Kafka divergence: transaction.timeout.ms defaults to 5 minutes, not 1: a task's
        # transaction stays open until the driver's commit step, after the stage's last task.
        cfg.setdefault("transaction_timeout_ms", 300_000)
    topic = opts.get("topic")
    return SinkOptions(
        bootstrap=bootstrap,
        topic=None if topic is None else topic.strip(),
        producer=tuple(sorted(cfg.items(), key=lambda kv: kv[0])),
        exactly_once=exactly_once,
        transactional_id_prefix=prefix.strip() if prefix else None,
    )
