"""``tidelog consume``: print records of a topic (kafka-console-consumer.sh).

Output is kafka-console-consumer's DefaultMessageFormatter: per record, the columns asked for
by ``--property print.*=true`` in the order timestamp, partition, offset, headers, key, value,
separated by ``key.separator`` (TAB), e.g. ``CreateTime:1700000000000\\tkey\\tvalue``; null
prints ``null.literal`` ("null"). "Processed a total of N messages" goes to stderr at the end.

Without ``--group`` the partitions are assigned directly (no consumer-group protocol: works on
any broker); with ``--group`` the consumer joins the group and commits its offsets.

Exit 0 when the run ended as asked (``--max-messages`` reached, ``--timeout-ms`` of silence
without ``--max-messages``); 1 when ``--timeout-ms`` passed before ``--max-messages`` records
came, or the broker failed; 2 on a bad command line; 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from tidelog.broker.tools._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Progress,
    SubParsers,
    ToolError,
    add_bootstrap,
    add_tool_parser,
    client_errors,
    close_quietly,
    parse_bool,
    parse_bootstrap,
    parse_properties,
    stderr_is_tty,
)
from tidelog.broker.tools.probe import served_apis

__all__ = ["RecordFormat", "add_parser", "format_record", "run"]

EXAMPLES = """\
  tidelog consume --bootstrap-server 127.0.0.1:9092 --topic orders --from-beginning
  tidelog consume --bootstrap-server 127.0.0.1:9092 --topic orders --from-beginning \\
      --property print.key=true --property print.offset=true --max-messages 10
  tidelog consume --bootstrap-server 127.0.0.1:9092 --topic orders --partition 0 --offset 42 \\
      --property print.timestamp=true --timeout-ms 5000
  tidelog consume --bootstrap-server 127.0.0.1:9092 --topic orders --group audit --from-beginning
"""

_BOOL_PROPS = ("print.timestamp", "print.key", "print.value", "print.partition", "print.offset",
               "print.headers")  # fmt: skip
_TEXT_PROPS = ("key.separator", "line.separator", "headers.separator", "null.literal")
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
GROUP_APIS = {10: "FindCoordinator", 11: "JoinGroup", 14: "SyncGroup", 12: "Heartbeat"}


@dataclass(frozen=True, slots=True)
class RecordFormat:
    """kafka-console-consumer's formatter properties."""

    print_timestamp: bool = False
    print_key: bool = False
    print_value: bool = True
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> RecordFormat:
        unknown = sorted(set(props) - set(_BOOL_PROPS) - set(_TEXT_PROPS))
        if unknown:
            known = ", ".join((*_BOOL_PROPS, *_TEXT_PROPS))
            raise ToolError(f"unknown --property {', '.join(unknown)}; known: {known}", 2)
        kw: dict[str, Any] = {}
        for name in _BOOL_PROPS:
            if name in props:
                kw[name.replace(".", "_")] = parse_bool(props[name], name)
        for name in _TEXT_PROPS:
            if name in props:
                kw[name.replace(".", "_")] = props[name].encode()
        return cls(**kw)


def format_record(r: Any, fmt: RecordFormat) -> bytes:
    """One record as the console consumer prints it (``r``: a kafka-python ConsumerRecord)."""
    cols: list[bytes] = []
    if fmt.print_timestamp:
        ts_type = TIMESTAMP_TYPES.get(r.timestamp_type)
        cols.append(f"{ts_type}:{r.timestamp}".encode() if ts_type else b"NO_TIMESTAMP")
    if fmt.print_partition:
        cols.append(f"Partition:{r.partition}".encode())
    if fmt.print_offset:
        cols.append(f"Offset:{r.offset}".encode())
    if fmt.print_headers:
        headers = list(r.headers or ())
        if not headers:
            cols.append(b"NO_HEADERS")
        else:
            cols.append(
                fmt.headers_separator.join(
                    k.encode() + b":" + (fmt.null_literal if v is None else bytes(v))
                    for k, v in headers
                )
            )
    if fmt.print_key:
        cols.append(fmt.null_literal if r.key is None else bytes(r.key))
    if fmt.print_value:
        cols.append(fmt.null_literal if r.value is None else bytes(r.value))
    return fmt.key_separator.join(cols) + fmt.line_separator


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "consume",
        help="print records of a topic (like kafka-console-consumer.sh)",
        description="Read records and print them, one per line, as kafka-console-consumer.sh "
        "does. Without --group the partitions are assigned directly; with --group the "
        "consumer joins that group and commits offsets.",
        examples=EXAMPLES,
        run=run,
    )
    add_bootstrap(p)
    p.add_argument("--topic", required=True, help="topic to read")
    p.add_argument("--group", help="consumer group to join (offsets are committed)")
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset when there is no committed one",
    )
    p.add_argument("--partition", type=int, metavar="N", help="read only partition N")
    p.add_argument(
        "--offset",
        metavar="earliest|latest|N",
        help="with --partition: where to start (default latest, or earliest with --from-beginning)",
    )
    p.add_argument("--max-messages", type=int, metavar="N", help="stop after N records")
    p.add_argument(
        "--timeout-ms",
        type=int,
        metavar="MS",
        help="stop when no record came for this long (default: wait forever)",
    )
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="output format: print.key, print.offset, print.timestamp, print.headers, "
        "print.partition, print.value, key.separator, line.separator, headers.separator, "
        "null.literal",
    )
    p.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed skips aborted transactions (default read_uncommitted)",
    )
    p.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a kafka-python consumer setting in Kafka spelling, e.g. fetch.max.bytes=1048576",
    )


def _start_offset(args: argparse.Namespace) -> str | int:
    if args.offset is None:
        return "earliest" if args.from_beginning else "latest"
    if args.partition is None:
        raise ToolError("--offset needs --partition (the partition to start in)", 2)
    if args.offset in ("earliest", "latest"):
        return str(args.offset)
    try:
        offset = int(args.offset)
    except ValueError:
        raise ToolError(
            f"--offset {args.offset!r} must be earliest, latest or a number", 2
        ) from None
    if offset < 0:
        raise ToolError("--offset must not be negative (use earliest or latest)", 2)
    return offset


def _consumer(args: argparse.Namespace) -> Any:
    from kafka import KafkaConsumer

    settings: dict[str, Any] = {
        "bootstrap_servers": parse_bootstrap(args.bootstrap_server),
        "client_id": "tidelog-console-consumer",
        "group_id": args.group,
        "enable_auto_commit": args.group is not None,
        "auto_offset_reset": "earliest" if args.from_beginning else "latest",
        "isolation_level": args.isolation_level,
        "allow_auto_create_topics": False,  # a typo in --topic should not create a topic
    }
    for key, value in parse_properties(args.consumer_property, "--consumer-property").items():
        settings[key.replace(".", "_").replace("-", "_")] = int(value) if value.isdigit() else value
    try:
        return KafkaConsumer(**settings)
    except (TypeError, ValueError, AssertionError) as exc:
        raise ToolError(f"bad consumer setting: {exc}", 2) from exc


def _assign(consumer: Any, args: argparse.Namespace, start: str | int) -> None:
    from kafka import TopicPartition

    wait_s = 10.0 if args.timeout_ms is None else max(1.0, min(10.0, args.timeout_ms / 1000))
    deadline = time.monotonic() + wait_s
    partitions = consumer.partitions_for_topic(args.topic)
    while not partitions and time.monotonic() < deadline:
        time.sleep(0.2)
        partitions = consumer.partitions_for_topic(args.topic)
    if not partitions:
        raise ToolError(
            f"topic '{args.topic}' does not exist (create it with `tidelog topics --create`)"
        )
    if args.partition is not None:
        if args.partition not in partitions:
            raise ToolError(
                f"topic '{args.topic}' has no partition {args.partition} "
                f"(it has {', '.join(str(p) for p in sorted(partitions))})"
            )
        partitions = {args.partition}
    tps = [TopicPartition(args.topic, p) for p in sorted(partitions)]
    consumer.assign(tps)
    if start == "earliest":
        consumer.seek_to_beginning(*tps)
    elif start == "latest":
        if args.group is None or args.partition is not None:
            consumer.seek_to_end(*tps)
    else:
        for tp in tps:
            consumer.seek(tp, int(start))


def _check_group_apis(args: argparse.Namespace) -> None:
    served = served_apis(args)
    missing = [name for key, name in GROUP_APIS.items() if served and key not in served]
    if missing:
        raise ToolError(
            f"the broker at {args.bootstrap_server} does not serve consumer groups "
            f"({', '.join(missing)} missing from ApiVersions); drop --group to read with "
            "direct partition assignment"
        )


def run(args: argparse.Namespace) -> int:
    fmt = RecordFormat.from_properties(parse_properties(args.property))
    start = _start_offset(args)
    if args.max_messages is not None and args.max_messages < 1:
        raise ToolError("--max-messages must be at least 1", 2)
    out: BinaryIO = sys.stdout.buffer
    count = 0
    consumer = None
    try:
        with client_errors(args.bootstrap_server):
            if args.group is not None:
                _check_group_apis(args)
            consumer = _consumer(args)
            if args.group is not None and args.partition is None:
                consumer.subscribe([args.topic])
            else:
                _assign(consumer, args, start)
            count, complete = _loop(consumer, args, fmt, out)
    except KeyboardInterrupt:
        print(f"Processed a total of {count} messages", file=sys.stderr)
        raise
    finally:
        if consumer is not None:
            close_quietly(consumer)
    print(f"Processed a total of {count} messages", file=sys.stderr)
    if not complete:
        raise ToolError(
            f"timed out after {args.timeout_ms} ms with {count} of {args.max_messages} messages"
        )
    return EXIT_OK if complete else EXIT_FAILURE


def _loop(
    consumer: Any, args: argparse.Namespace, fmt: RecordFormat, out: BinaryIO
) -> tuple[int, bool]:
    """Poll and print until --max-messages or --timeout-ms; (count, whether that ended it as
    asked)."""
    count = 0
    limit = args.max_messages
    timeout_s = args.timeout_ms / 1000 if args.timeout_ms is not None else None
    last = time.monotonic()
    # A count on the terminal only while the records go elsewhere (a file, a pipe).
    with Progress(limit or 0, "consumed", "records", enabled=_show_progress()) as progress:
        while True:
            n = _poll_once(consumer, fmt, out, limit, count, timeout_s)
            count += n
            progress.update(n)
            if limit is not None and count >= limit:
                return count, True
            if n:
                last = time.monotonic()
            elif timeout_s is not None and time.monotonic() - last >= timeout_s:
                return count, limit is None


def _show_progress() -> bool:
    try:
        return stderr_is_tty() and not sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _poll_once(
    consumer: Any,
    fmt: RecordFormat,
    out: BinaryIO,
    limit: int | None,
    count: int,
    timeout_s: float | None,
) -> int:
    """One poll: print what came (at most up to ``limit``); how many records were printed."""
    wait_ms = 1000 if timeout_s is None else max(1, min(1000, int(timeout_s * 1000)))
    batches = consumer.poll(
        timeout_ms=wait_ms, max_records=None if limit is None else limit - count
    )
    printed = 0
    for records in batches.values():
        for r in records:
            out.write(format_record(r, fmt))
            printed += 1
            if limit is not None and count + printed >= limit:
                out.flush()
                return printed
    if printed:
        out.flush()
    return printed
