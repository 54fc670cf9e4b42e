"""``tidelog get-offsets``: offsets of partitions by time (kafka-get-offsets.sh).

Prints ``topic:partition:offset`` per partition, sorted by topic name, then by partition
number (``t:2`` before ``t:10``). ``--time`` is -1/latest (the next offset to be written,
i.e. the high watermark), -2/earliest (log start), -3/max-timestamp (the record with the largest
timestamp) or a timestamp in ms (the first offset whose timestamp is at least that). Partitions
with no such offset (a timestamp after the last record) are left out, as Kafka does.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from tidelog.tools._common import (
    EXIT_OK,
    SubParsers,
    ToolError,
    add_bootstrap,
    add_tool_parser,
    admin_session,
    topic_matcher,
)

__all__ = ["add_parser", "parse_time", "run"]

EXAMPLES = """\
  tidelog get-offsets --bootstrap-server 127.0.0.1:9092 --topic orders
  tidelog get-offsets --bootstrap-server 127.0.0.1:9092 --topic orders --time -2
  tidelog get-offsets --bootstrap-server 127.0.0.1:9092 --topic orders --partitions 0,2 \\
      --time 1700000000000
  tidelog get-offsets --bootstrap-server 127.0.0.1:9092 --topic-partitions 'orders:0-2,audit'
"""

_NAMED = {"latest": -1, "earliest": -2, "max-timestamp": -3}
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]+)|(?:([0-9]*)-([0-9]*))))?")


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "get-offsets",
        help="print partition offsets by time (like kafka-get-offsets.sh)",
        description="Look up offsets with ListOffsets and print topic:partition:offset lines.",
        examples=EXAMPLES,
        run=run,
    )
    add_bootstrap(p)
    p.add_argument("--topic", help="topic name or regular expression (default: all topics)")
    p.add_argument("--partitions", metavar="P[,P...]", help="partition ids (default: all)")
    p.add_argument(
        "--topic-partitions",
        metavar="RULES",
        help="comma-separated TOPIC_REGEX[:N | :N-M | :N- | :-M] rules (M exclusive); "
        "not with --topic/--partitions",
    )
    p.add_argument(
        "--time",
        default="latest",
        metavar="T",
        help="-1/latest (default), -2/earliest, -3/max-timestamp, or a timestamp in ms",
    )
    p.add_argument(
        "--exclude-internal-topics", action="store_true", help="leave out internal topics"
    )


def parse_time(value: str) -> int:
    """The ListOffsets timestamp for ``--time``."""
    if value in _NAMED:
        return _NAMED[value]
    try:
        ts = int(value)
    except ValueError:
        raise ToolError(
            f"Malformed time argument {value}. Please use -1 or latest / -2 or earliest / "
            "-3 or max-timestamp, or a timestamp in ms",
            2,
        ) from None
    if ts < -3:
        raise ToolError(f"--time {ts} is not supported: use -1, -2, -3 or a timestamp", 2)
    return ts


def _partition_set(value: str | None) -> set[int] | None:
    if not value:
        return None
    try:
        return {int(p) for p in value.split(",") if p.strip()}
    except ValueError:
        raise ToolError(
            "--partitions expects a comma separated list of numeric partition ids, "
            f"but received: {value}",
            2,
        ) from None


def _rules(value: str) -> list[tuple[Any, int, int]]:
    out = []
    for spec in value.split(","):
        m = _RULE.fullmatch(spec)
        if m is None:
            raise ToolError(f"Invalid rule specification: {spec}", 2)
        topic, single, lo, hi = m.groups()
        match = topic_matcher(topic or ".*")
        if single is not None:
            out.append((match, int(single), int(single) + 1))
        else:
            out.append((match, int(lo) if lo else 0, int(hi) if hi else 2**31 - 1))
    return out


def run(args: argparse.Namespace) -> int:
    if args.topic_partitions and (args.topic or args.partitions):
        raise ToolError("--topic-partitions cannot be used with --topic or --partitions", 2)
    ts = parse_time(args.time)
    wanted = _partition_set(args.partitions)
    rules = _rules(args.topic_partitions) if args.topic_partitions else None
    match = topic_matcher(args.topic)
    with admin_session(args) as admin:
        from kafka import TopicPartition

        names = [n for n in admin.list_topics() if rules is not None or match(n)]
        if args.exclude_internal_topics:
            names = [n for n in names if not n.startswith("__")]
        tps = []
        for topic in admin.describe_topics(names) if names else []:
            for p in topic.get("partitions", []):
                tp = TopicPartition(topic["name"], p["partition_index"])
                if rules is not None:
                    if any(m(tp.topic) and lo <= tp.partition < hi for m, lo, hi in rules):
                        tps.append(tp)
                elif wanted is None or tp.partition in wanted:
                    tps.append(tp)
        if not tps:
            raise ToolError("Could not match any topic-partitions with the specified filters")
        answer = admin.list_partition_offsets(dict.fromkeys(tps, ts))
    for tp in sorted(answer, key=lambda t: (t.topic, t.partition)):
        offset = int(answer[tp].offset)
        if offset >= 0:
            print(f"{tp.topic}:{tp.partition}:{offset}")
    return EXIT_OK
