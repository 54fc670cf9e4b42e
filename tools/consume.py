"""``tidelog consume``: print records of a topic (kafka-console-consumer.sh).

Output is kafka-console-consumer's DefaultMessageFormatter: per record, the columns asked for
by ``--property print.*=true`` in the order timestamp, partition, offset, headers, key, value,
separated by ``key.separator`` (TAB), e.g. ``CreateTime:1700000000000\\tkey\\tvalue``; null
prints ``null.literal`` ("null"). "Processed a total of N messages" goes to stderr at the end.

Without ``--group`` the partitions are assigned directly (no consumer-group protocol: works on
any broker); with ``--group`` the consumer joins the group and commits its offsets.

Exit 0 when the run ended as asked (``--max-messages`` reached, ``--timeout-ms`` of silence
without ``--max-messages``); 1 when ``--timeout-ms`` passed before ``--max-messages`` records
came, or the broker failed; 2 on a bad command line; 130 on Ctrl-C, 143 on SIGTERM (after
"Processed a total of N messages" with the records written so far).
"""

from __future__ import annotations

import argparse
import re
import signal
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from tidelog.tools._client_config import ClientConfigError, read_properties
from tidelog.tools._common import (
    EXIT_OK,
    Progress,
    SubParsers,
    ToolError,
    add_bootstrap,
    add_tool_parser,
    client_errors,
    close_quietly,
    consumer_client,
    no_such_partition,
    parse_bool,
    parse_properties,
    stderr_is_tty,
)
from tidelog.tools.probe import served_apis

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
               "print.headers", "print.epoch")  # fmt: skip
_TEXT_PROPS = ("key.separator", "line.separator", "headers.separator", "null.literal")
_DESERIALIZER_PROPS = ("key.deserializer", "value.deserializer", "headers.deserializer")
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
    print_epoch: bool = False
    key_deserializer: str | None = None
    value_deserializer: str | None = None
    headers_deserializer: str | None = None
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> RecordFormat:
        unknown = sorted(
            n for n in set(props) - set(_BOOL_PROPS) - set(_TEXT_PROPS) - set(_DESERIALIZER_PROPS)
            if not n.startswith(tuple(f"{d}." for d in _DESERIALIZER_PROPS))  # their configs
        )  # fmt: skip
        if unknown:
            known = ", ".join((*_BOOL_PROPS, *_TEXT_PROPS, *_DESERIALIZER_PROPS))
            raise ToolError(f"unknown --property {', '.join(unknown)}; known: {known}", 2)
        kw: dict[str, Any] = {}
        for name in _BOOL_PROPS:
            if name in props:
                kw[name.replace(".", "_")] = parse_bool(props[name], name)
        for name in _TEXT_PROPS:
            if name in props:
                kw[name.replace(".", "_")] = props[name].encode()
        for name in _DESERIALIZER_PROPS:
            if props.get(name):
                kw[name.replace(".", "_")] = deserializer_kind(props[name], name)
        return cls(**kw)


#: Kafka's deserializer classes (by simple name) as the kinds this tool decodes.
DESERIALIZERS = {
    "StringDeserializer": "string", "ByteArrayDeserializer": "raw",
    "BytesDeserializer": "bytes", "ByteBufferDeserializer": "bytes",
    "LongDeserializer": "long", "IntegerDeserializer": "integer", "ShortDeserializer": "short",
    "DoubleDeserializer": "double", "FloatDeserializer": "float", "UUIDDeserializer": "uuid",
    "VoidDeserializer": "void",
}  # fmt: skip
_FIXED = {"long": (8, ">q"), "integer": (4, ">i"), "short": (2, ">h"), "double": (8, ">d"),
          "float": (4, ">f")}  # fmt: skip


def deserializer_kind(name: str, option: str) -> str:
    """A Java deserializer class name (or a kind: string, long, bytes ...) as its kind."""
    simple = name.strip().rsplit(".", 1)[-1]
    if simple in DESERIALIZERS:
        return DESERIALIZERS[simple]
    if simple.lower() in set(DESERIALIZERS.values()):
        return simple.lower()
    raise ToolError(
        f"{option} {name!r} is not one this tool decodes; use one of "
        f"{', '.join(sorted(DESERIALIZERS))} (org.apache.kafka.common.serialization.*)",
        2,
    )


def deserialize(data: bytes, kind: str | None) -> bytes:
    """Bytes of a key, value or header as the Java deserializer's toString() prints them."""
    if kind is None or kind in ("raw", "string"):
        return data
    if kind == "bytes":  # org.apache.kafka.common.utils.Bytes.toString: \xNN for the unprintable
        return "".join(
            chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02X}" for b in data
        ).encode()
    if kind == "void":
        return b"null"
    if kind == "uuid":
        import uuid

        return str(uuid.UUID(data.decode("utf-8", "replace"))).encode()
    size, code = _FIXED[kind]
    if len(data) != size:
        raise ToolError(
            f"a {len(data)}-byte field cannot be read by the {kind} deserializer "
            f"(it needs {size} bytes); choose another deserializer"
        )
    value = struct.unpack(code, data)[0]
    return (repr(float(value)) if kind in ("double", "float") else str(value)).encode()


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
    if fmt.print_epoch:
        epoch = getattr(r, "leader_epoch", None)
        cols.append(f"LeaderEpoch:{'NONE' if epoch is None or epoch < 0 else epoch}".encode())
    if fmt.print_headers:
        headers = list(r.headers or ())
        header_kind = fmt.headers_deserializer
        if not headers:
            cols.append(b"NO_HEADERS")
        else:
            cols.append(
                fmt.headers_separator.join(
                    k.encode()
                    + b":"
                    + (fmt.null_literal if v is None else deserialize(bytes(v), header_kind))
                    for k, v in headers
                )
            )
    if fmt.print_key:
        key = r.key
        cols.append(
            fmt.null_literal if key is None else deserialize(bytes(key), fmt.key_deserializer)
        )
    if fmt.print_value:
        value = r.value
        cols.append(
            fmt.null_literal if value is None else deserialize(bytes(value), fmt.value_deserializer)
        )
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
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="topic to read")
    which.add_argument(
        "--include", metavar="REGEX", help="read every topic whose whole name matches REGEX"
    )
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
        help="a consumer setting in Kafka's spelling, e.g. fetch.max.bytes=1048576 (repeatable)",
    )
    p.add_argument(
        "--consumer.config",
        dest="consumer_config",
        metavar="FILE",
        help="consumer properties file (Kafka's names; --consumer-property wins)",
    )
    p.add_argument(
        "--formatter-config",
        metavar="FILE",
        help="properties file of formatter settings (print.key=true ...); --property wins",
    )
    p.add_argument(
        "--formatter",
        default="kafka.tools.DefaultMessageFormatter",
        help="only the default formatter (org.apache.kafka.tools.consumer."
        "DefaultMessageFormatter) is offered; its --property options shape the output",
    )
    for part in ("key", "value"):
        p.add_argument(
            f"--{part}-deserializer",
            metavar="CLASS",
            help=f"decode {part}s: StringDeserializer, LongDeserializer, IntegerDeserializer, "
            f"BytesDeserializer ... (or --property {part}.deserializer=...)",
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
    props = parse_properties(args.consumer_property, "--consumer-property")
    from_file: dict[str, str] = {}
    if args.consumer_config:
        try:
            from_file = read_properties(args.consumer_config)
        except ClientConfigError as exc:
            raise ToolError(str(exc), 2) from None
    named = {g for g in (args.group, props.get("group.id"), from_file.get("group.id")) if g}
    if len(named) > 1:
        raise ToolError(
            "The group ids provided in different places (--group, --consumer-property, "
            f"--consumer.config) do not match: {', '.join(sorted(named))}",
            2,
        )
    group = next(iter(named), None)
    defaults: dict[str, Any] = {
        "client_id": "tidelog-console-consumer",
        "group_id": args.group,
        "enable_auto_commit": group is not None,
        "auto_offset_reset": "earliest" if args.from_beginning else "latest",
        "isolation_level": args.isolation_level,
        "allow_auto_create_topics": False,  # a typo in --topic should not create a topic
    }
    consumer = consumer_client(args, defaults, [args.consumer_config], [props])
    args.group = consumer.config.get("group_id")  # --consumer.config may name the group
    return consumer


def _topic_partitions(consumer: Any, args: argparse.Namespace) -> dict[str, set[int]]:
    """The partitions of --topic (or of the topics --include matches), waiting a little for a
    topic just created; ToolError when there is none (the same with and without --group)."""
    wait_s = 10.0 if args.timeout_ms is None else max(1.0, min(10.0, args.timeout_ms / 1000))
    deadline = time.monotonic() + wait_s
    while True:
        if args.include is not None:
            try:
                regex = re.compile(args.include)
            except re.error as exc:
                raise ToolError(
                    f"--include {args.include!r} is not a regular expression: {exc}", 2
                ) from None
            names = [t for t in consumer.topics() if regex.fullmatch(t)]
            found = {t: consumer.partitions_for_topic(t) or set() for t in names}
            found = {t: ps for t, ps in found.items() if ps}
        elif args.topic not in consumer.topics():  # one Metadata request for every topic
            found = {}
            break  # the broker does not have it: say so now, not after the wait
        else:
            ps = consumer.partitions_for_topic(args.topic)
            found = {args.topic: ps} if ps else {}
        if found or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if not found:
        if args.include is not None:
            raise ToolError(f"no topic matches --include {args.include!r}")
        raise ToolError(
            f"topic '{args.topic}' does not exist (create it with `tidelog topics --create`)"
        )
    return found


def _assign(consumer: Any, args: argparse.Namespace, start: str | int) -> None:
    from kafka import TopicPartition

    found = _topic_partitions(consumer, args)
    if args.partition is not None:
        partitions = found[args.topic]
        if args.partition not in partitions:
            raise no_such_partition(args.topic, args.partition, partitions)
        partitions = {args.partition}
        tps = [TopicPartition(args.topic, p) for p in sorted(partitions)]
    else:
        tps = [TopicPartition(t, p) for t in sorted(found) for p in sorted(found[t])]
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


class _Stop:
    """Ctrl-C and SIGTERM ask the loop to stop between two records, so the count printed is
    the number of records written; a second signal stops at once."""

    def __init__(self) -> None:
        self.signum = 0

    def __call__(self, signum: int, frame: object) -> None:
        if self.signum:
            raise KeyboardInterrupt
        self.signum = signum


class _Stopped(BaseException):
    """The loop stopped on a signal (a BaseException: not a client error to report)."""


def run(args: argparse.Namespace) -> int:
    props: dict[str, str] = {}
    if args.formatter_config:
        try:
            props.update(read_properties(args.formatter_config))
        except ClientConfigError as exc:
            raise ToolError(f"--formatter-config: {exc}", 2) from None
    props.update(parse_properties(args.property))
    for part in ("key", "value"):
        if getattr(args, f"{part}_deserializer"):
            props[f"{part}.deserializer"] = getattr(args, f"{part}_deserializer")
    fmt = RecordFormat.from_properties(props)
    if args.formatter.rsplit(".", 1)[-1] != "DefaultMessageFormatter":
        raise ToolError(
            f"--formatter {args.formatter}: only DefaultMessageFormatter is offered "
            "(shape its output with --property print.key=true ...)",
            2,
        )
    start = _start_offset(args)
    if args.max_messages is not None and args.max_messages < 1:
        raise ToolError("--max-messages must be at least 1", 2)
    if args.include is not None and args.partition is not None:
        raise ToolError("--partition goes with --topic, not --include", 2)
    out: BinaryIO = sys.stdout.buffer
    counter = [0]
    complete = False
    consumer = None
    stop = _Stop()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with client_errors(args.bootstrap_server):
            if args.group is not None:
                _check_group_apis(args)
            consumer = _consumer(args)
            if args.group is not None and args.partition is None:
                found = _topic_partitions(consumer, args)  # a missing topic fails as without
                if args.include is not None:
                    consumer.subscribe(pattern=f"^(?:{args.include})$")
                else:
                    consumer.subscribe(sorted(found))
            else:
                _assign(consumer, args, start)
            complete = _loop(consumer, args, fmt, out, counter, stop)
    except (KeyboardInterrupt, _Stopped):
        print(f"Processed a total of {counter[0]} messages", file=sys.stderr)
        return 128 + (stop.signum or signal.SIGINT)  # 130 on Ctrl-C, 143 on SIGTERM
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if consumer is not None:
            close_quietly(consumer)
    print(f"Processed a total of {counter[0]} messages", file=sys.stderr)
    if not complete:
        raise ToolError(
            f"timed out after {args.timeout_ms} ms with {counter[0]} of {args.max_messages} "
            "messages"
        )
    return EXIT_OK


def _loop(
    consumer: Any,
    args: argparse.Namespace,
    fmt: RecordFormat,
    out: BinaryIO,
    counter: list[int],
    stop: _Stop,
) -> bool:
    """Poll and print until --max-messages or --timeout-ms (or a signal: ``_Stopped``),
    counting in ``counter[0]``; whether that ended it as asked."""
    limit = args.max_messages
    timeout_s = args.timeout_ms / 1000 if args.timeout_ms is not None else None
    last = time.monotonic()
    # A count on the terminal only while the records go elsewhere (a file, a pipe).
    with Progress(limit or 0, "consumed", "records", enabled=_show_progress()) as progress:
        while True:
            n = _poll_once(consumer, fmt, out, limit, counter, timeout_s, stop)
            progress.update(n)
            if stop.signum:
                raise _Stopped
            if limit is not None and counter[0] >= limit:
                return True
            if n:
                last = time.monotonic()
            elif timeout_s is not None and time.monotonic() - last >= timeout_s:
                return limit is None


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
    counter: list[int],
    timeout_s: float | None,
    stop: _Stop,
) -> int:
    """One poll: print what came (at most up to ``limit``), adding each printed record to
    ``counter[0]`` as it goes; how many records were printed."""
    wait_ms = 1000 if timeout_s is None else max(1, min(1000, int(timeout_s * 1000)))
    batches = consumer.poll(
        timeout_ms=wait_ms, max_records=None if limit is None else limit - counter[0]
    )
    printed = 0
    for records in batches.values():
        for r in records:
            out.write(format_record(r, fmt))
            printed += 1
            counter[0] += 1
            if (limit is not None and counter[0] >= limit) or stop.signum:
                out.flush()
                return printed
    if printed:
        out.flush()
    return printed
