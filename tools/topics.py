"""``tidelog topics``: create, list, describe, alter and delete topics (kafka-topics.sh).

Speaks the Kafka protocol through kafka-python's admin client, so it works against Apache
Kafka as well. ``--describe`` adds each partition's log start offset and high watermark
(ListOffsets earliest/latest) to kafka-topics' columns, and lists the configs whose source is
not the default (DescribeConfigs).
"""

from __future__ import annotations

import argparse
from typing import Any

from tidelog.tools._common import (
    EXIT_OK,
    TOPIC_COMMAND_ERROR,
    SubParsers,
    ToolError,
    add_admin_options,
    add_timeout_ms,
    add_tool_parser,
    admin_session,
    parse_properties,
    topic_matcher,
)

__all__ = ["add_parser", "run"]

EXAMPLES = """\
  tidelog topics --bootstrap-server 127.0.0.1:9092 --list
  tidelog topics --bootstrap-server 127.0.0.1:9092 --create --topic orders --partitions 3 \\
      --config retention.ms=86400000 --config cleanup.policy=compact
  tidelog topics --bootstrap-server 127.0.0.1:9092 --describe --topic orders
  tidelog topics --bootstrap-server 127.0.0.1:9092 --describe --topic 'orders.*'
  tidelog topics --bootstrap-server 127.0.0.1:9092 --alter --topic orders --partitions 6
  tidelog topics --bootstrap-server 127.0.0.1:9092 --alter --topic orders --config retention.ms=-1
  tidelog topics --bootstrap-server 127.0.0.1:9092 --delete --topic orders
"""

ACTIONS = ("create", "list", "describe", "alter", "delete")
#: Kafka's internal topics (Topic.isInternal): never deleted by this tool.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "topics",
        help="create, list, describe, alter or delete topics (like kafka-topics.sh)",
        description="Manage topics over the Kafka protocol, with kafka-topics.sh's options. "
        "--topic takes a name or a regular expression (except with --create).",
        examples=EXAMPLES,
        run=run,
    )
    add_admin_options(
        p,
        (
            ("--create", "create a topic"),
            ("--list", "list topic names"),
            ("--describe", "show partitions, offsets and configs"),
            ("--alter", "add partitions and/or change configs"),
            ("--delete", "delete topics"),
        ),
    )
    p.add_argument("--topic", metavar="TOPIC", help="topic name (a regular expression allowed)")
    p.add_argument("--partitions", type=int, metavar="N", help="partition count")
    p.add_argument(
        "--replication-factor",
        type=int,
        metavar="N",
        help="replicas per partition (a single broker supports 1)",
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic config for --create/--alter (repeatable)",
    )
    p.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="KEY",
        help="with --alter: reset a topic config to its default (repeatable)",
    )
    p.add_argument("--if-not-exists", action="store_true", help="--create: no error if it exists")
    p.add_argument("--if-exists", action="store_true", help="no error if no topic matches")
    p.add_argument(
        "--exclude-internal", action="store_true", help="leave out internal topics (__*)"
    )
    p.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="--describe: only topics with configs set, topic lines only",
    )
    p.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="--describe: only partitions whose ISR is smaller than their replicas "
        "(none on one node)",
    )
    p.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="--describe: only partitions without a leader",
    )
    add_timeout_ms(p, "request timeout (30000)")


def run(args: argparse.Namespace) -> int:
    configs = parse_properties(args.config, "--config")
    _check_args(args, configs)
    with admin_session(args, args.timeout_ms, TOPIC_COMMAND_ERROR) as admin:
        if args.create:
            return _create(admin, args, configs)
        if args.list:
            for name in _matching(admin, args):
                print(name)
            return EXIT_OK
        if args.describe:
            return _describe(admin, args)
        if args.alter:
            return _alter(admin, args, configs)
        return _delete(admin, args)


def _check_args(args: argparse.Namespace, configs: dict[str, str]) -> None:
    if (args.create or args.alter or args.delete) and not args.topic:
        action = next(a for a in ACTIONS if getattr(args, a))
        raise ToolError(f"--{action} needs --topic NAME", 2)
    if configs and not (args.create or args.alter):
        raise ToolError("--config applies to --create and --alter only", 2)
    if args.delete_config and not args.alter:
        raise ToolError("--delete-config applies to --alter only", 2)
    if args.partitions is not None and args.partitions < 1:
        raise ToolError("--partitions must be at least 1", 2)
    if args.alter and args.partitions is None and not configs and not args.delete_config:
        raise ToolError("--alter needs --partitions N, --config KEY=VALUE or --delete-config", 2)
    if args.replication_factor is not None and not args.create:
        raise ToolError("--replication-factor applies to --create only", 2)
    filters = [f for f in ("topics_with_overrides", "under_replicated_partitions",
                           "unavailable_partitions") if getattr(args, f)]  # fmt: skip
    if filters and not args.describe:
        raise ToolError(f"--{filters[0].replace('_', '-')} applies to --describe only", 2)


def _error_name(exc: BaseException) -> str:
    return type(exc).__name__


def _matching(admin: Any, args: argparse.Namespace) -> list[str]:
    match = topic_matcher(args.topic)
    names = sorted(n for n in admin.list_topics() if match(n))
    if args.exclude_internal:
        names = [n for n in names if not n.startswith("__")]
    return names


def _require(names: list[str], args: argparse.Namespace) -> list[str]:
    if not names and not args.if_exists:
        raise ToolError(
            f"Topic '{args.topic}' does not exist as expected "
            "(list topics with --list, or add --if-exists)"
        )
    return names


def _create(admin: Any, args: argparse.Namespace, configs: dict[str, str]) -> int:
    from kafka.errors import TopicAlreadyExistsError

    spec: dict[str, Any] = {
        "num_partitions": args.partitions if args.partitions is not None else -1,
        "replication_factor": (
            args.replication_factor if args.replication_factor is not None else -1
        ),
    }
    if configs:
        spec["configs"] = configs
    try:
        admin.create_topics({args.topic: spec})
    except TopicAlreadyExistsError:
        if args.if_not_exists:
            return EXIT_OK
        raise ToolError(f"Topic '{args.topic}' already exists (add --if-not-exists)") from None
    print(f"Created topic {args.topic}.")
    return EXIT_OK


def _delete(admin: Any, args: argparse.Namespace) -> int:
    """Delete the matching topics; internal ones are refused (named on stderr, exit 1) while
    the others are deleted."""
    names = _require(_matching(admin, args), args)
    refused = [n for n in names if n in INTERNAL_TOPICS]
    names = [n for n in names if n not in INTERNAL_TOPICS]
    if names:
        admin.delete_topics(names)
    if refused:
        deleted = f" (deleted: {', '.join(names)})" if names else ""
        raise ToolError(
            f"Error while executing topic command : Topic {', '.join(refused)} "
            f"{'is a kafka internal topic' if len(refused) == 1 else 'are kafka internal topics'}"
            f" and is not allowed to be marked for deletion.{deleted}",
            plain=True,
        )
    return EXIT_OK


def _alter(admin: Any, args: argparse.Namespace, configs: dict[str, str]) -> int:
    from kafka.admin import ConfigResource, ConfigResourceType

    names = _require(_matching(admin, args), args)
    for name in names:
        if args.partitions is not None:
            admin.create_partitions({name: args.partitions})
        if configs:
            result = admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name, configs=configs)],
                raise_on_unknown=False,
            )
            _raise_config_errors(result)
        if args.delete_config:
            result = admin.reset_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name, configs=args.delete_config)],
                raise_on_unknown=False,
            )
            _raise_config_errors(result)
    return EXIT_OK


def _raise_config_errors(result: Any) -> None:
    """alter_configs answers {type: {name: error or result}}; raise the first error."""
    if not isinstance(result, dict):
        return
    for by_name in result.values():
        if not isinstance(by_name, dict):
            continue
        for name, outcome in by_name.items():
            if isinstance(outcome, BaseException) or (
                isinstance(outcome, type) and issubclass(outcome, BaseException)
                and getattr(outcome, "errno", 0) != 0
            ):  # fmt: skip
                raise ToolError(f"changing the configs of {name} failed: {outcome}")


def _describe(admin: Any, args: argparse.Namespace) -> int:
    from kafka import TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec

    names = _require(_matching(admin, args), args)
    if not names:
        return EXIT_OK
    topics = {t["name"]: t for t in admin.describe_topics(names)}
    partitions = [
        TopicPartition(name, p["partition_index"])
        for name in names
        for p in topics.get(name, {}).get("partitions", [])
    ]
    earliest = _offsets(admin, partitions, OffsetSpec.EARLIEST)
    latest = _offsets(admin, partitions, OffsetSpec.LATEST)
    configs = _non_default_configs(
        admin, [ConfigResource(ConfigResourceType.TOPIC, n) for n in names]
    )
    # As kafka-topics: a partition filter shows partition lines only; --topics-with-overrides
    # shows the topic lines of topics with configs set, without partitions.
    only_partitions = args.under_replicated_partitions or args.unavailable_partitions
    for name in names:
        topic = topics.get(name)
        if topic is None:
            continue
        parts = sorted(topic.get("partitions", []), key=lambda p: p["partition_index"])
        rf = len(parts[0]["replica_nodes"]) if parts else 0
        overrides = configs.get(name, {})
        cfg = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
        if not only_partitions and (overrides or not args.topics_with_overrides):
            print(
                f"Topic: {name}\tTopicId: {topic.get('topic_id', '')}\tPartitionCount: "
                f"{len(parts)}\tReplicationFactor: {rf}\tConfigs: {cfg}"
            )
        if args.topics_with_overrides:
            continue
        for p in parts:
            if args.under_replicated_partitions and len(p["isr_nodes"]) >= len(p["replica_nodes"]):
                continue
            if args.unavailable_partitions and p["leader_id"] >= 0:
                continue
            tp = TopicPartition(name, p["partition_index"])
            print(
                f"\tTopic: {name}\tPartition: {p['partition_index']}\tLeader: "
                f"{_leader(p['leader_id'])}\tReplicas: {_ids(p['replica_nodes'])}\tIsr: "
                f"{_ids(p['isr_nodes'])}\tLogStartOffset: {earliest.get(tp, '-')}\t"
                f"HighWatermark: {latest.get(tp, '-')}"
            )
    return EXIT_OK


def _leader(node: int) -> str:
    return "none" if node < 0 else str(node)


def _ids(nodes: list[int]) -> str:
    return ",".join(str(n) for n in nodes)


def _offsets(admin: Any, partitions: list[Any], spec: Any) -> dict[Any, int]:
    if not partitions:
        return {}
    try:
        answer = admin.list_partition_offsets(dict.fromkeys(partitions, spec))
    except Exception:  # offsets are extra information: print '-' rather than fail
        return {}
    return {tp: int(o.offset) for tp, o in answer.items()}


def _non_default_configs(admin: Any, resources: list[Any]) -> dict[str, dict[str, str]]:
    try:
        answer = admin.describe_configs(resources, config_filter="all")
    except Exception:
        return {}
    out: dict[str, dict[str, str]] = {}
    for by_name in answer.values():
        for name, entries in by_name.items():
            out[name] = {
                key: "" if e.get("value") is None else str(e["value"])
                for key, e in entries.items()
                if str(e.get("config_source", "")).upper() not in ("DEFAULT_CONFIG", "5")
                and not e.get("is_sensitive")
            }
    return out
