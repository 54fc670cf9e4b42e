"""``tidelog produce``: send lines of standard input as records (kafka-console-producer.sh).

Each line is one record (its line ending removed). With ``--property parse.key=true`` the line
is split at the first ``key.separator`` (default TAB) into key and value; with
``parse.headers=true`` a leading ``k1:v1,k2:v2`` block, ended by ``headers.delimiter`` (TAB),
becomes headers. ``null.marker`` turns a key or value equal to it into null.

Exit 0 when every record was acknowledged (as ``--acks`` asks), 1 when any failed (the first
error is printed with the count), 2 on a bad command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from tidelog.tools._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Progress,
    SubParsers,
    ToolError,
    add_bootstrap,
    add_tool_parser,
    client_errors,
    no_such_partition,
    parse_bool,
    parse_properties,
    producer_client,
    stderr_is_tty,
)
from tidelog.tools.probe import served_apis

INIT_PRODUCER_ID = 22

__all__ = ["LineFormat", "add_parser", "parse_line", "run"]

EXAMPLES = """\
  echo hello | tidelog produce --bootstrap-server 127.0.0.1:9092 --topic orders
  printf 'k1:v1\\nk2:v2\\n' | tidelog produce --bootstrap-server 127.0.0.1:9092 --topic orders \\
      --property parse.key=true --property key.separator=:
  tidelog produce --bootstrap-server 127.0.0.1:9092 --topic orders --compression-codec zstd \\
      --acks all < events.txt
  printf 'h1:a,h2:b\\tkey\\tvalue\\n' | tidelog produce --bootstrap-server 127.0.0.1:9092 \\
      --topic orders --property parse.headers=true --property parse.key=true
"""

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = {"0": 0, "1": 1, "-1": "all", "all": "all"}
_KNOWN_PROPERTIES = {
    "parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
    "headers.key.separator", "null.marker", "ignore.error",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How a line becomes a record (kafka-console-producer's LineMessageReader properties)."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineFormat:
        unknown = sorted(set(props) - _KNOWN_PROPERTIES)
        if unknown:
            known = ", ".join(sorted(_KNOWN_PROPERTIES))
            raise ToolError(f"unknown --property {', '.join(unknown)}; known: {known}", 2)

        def b(name: str, default: bytes) -> bytes:
            return props[name].encode() if name in props else default

        fmt = cls(
            parse_key=parse_bool(props.get("parse.key", "false"), "parse.key"),
            key_separator=b("key.separator", b"\t"),
            parse_headers=parse_bool(props.get("parse.headers", "false"), "parse.headers"),
            headers_delimiter=b("headers.delimiter", b"\t"),
            headers_separator=b("headers.separator", b","),
            headers_key_separator=b("headers.key.separator", b":"),
            null_marker=props["null.marker"].encode() if "null.marker" in props else None,
            ignore_error=parse_bool(props.get("ignore.error", "false"), "ignore.error"),
        )
        for name in ("key.separator", "headers.delimiter", "headers.separator"):
            if name in props and not props[name]:
                raise ToolError(f"--property {name} must not be empty", 2)
        return fmt


class LineError(ValueError):
    """A line that does not have the shape the properties ask for."""


def parse_line(
    line: bytes, number: int, fmt: LineFormat
) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    """(key, value, headers) of one input line (without its line ending)."""
    headers: list[tuple[str, bytes | None]] = []
    rest = line
    if fmt.parse_headers:
        block, sep, after = rest.partition(fmt.headers_delimiter)
        if not sep:
            if not fmt.ignore_error:
                raise LineError(
                    f"No headers delimiter found on line number {number}: "
                    f"{line.decode('utf-8', 'replace')!r}"
                )
            block, after = b"", rest
        rest = after
        for item in block.split(fmt.headers_separator) if block else ():
            hk, hsep, hv = item.partition(fmt.headers_key_separator)
            if not hsep:
                raise LineError(
                    f"No header key separator found in pair {item.decode('utf-8', 'replace')!r} "
                    f"on line number {number}"
                )
            headers.append((hk.decode("utf-8"), _nullable(hv, fmt)))
    key: bytes | None = None
    if fmt.parse_key:
        k, sep, v = rest.partition(fmt.key_separator)
        if not sep:
            if not fmt.ignore_error:
                raise LineError(
                    f"No key separator found on line number {number}: "
                    f"{line.decode('utf-8', 'replace')!r} (the separator is "
                    f"{fmt.key_separator.decode()!r}; set it with --property key.separator=...)"
                )
            k, v = b"", rest
        key, rest = _nullable(k, fmt), v
    return key, _nullable(rest, fmt), headers


def _nullable(value: bytes, fmt: LineFormat) -> bytes | None:
    return None if fmt.null_marker is not None and value == fmt.null_marker else value


def read_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Lines without their ending (\\n, \\r\\n or \\r, as Java's readLine)."""
    for raw in stream:
        yield raw.rstrip(b"\n").rstrip(b"\r")


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "produce",
        help="send lines of stdin as records (like kafka-console-producer.sh)",
        description="Read lines from standard input and send each as one record.",
        examples=EXAMPLES,
        run=run,
    )
    add_bootstrap(p)
    p.add_argument("--topic", required=True, help="topic to send to")
    p.add_argument(
        "--property",
        "--reader-property",
        dest="property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="line format: parse.key, key.separator, parse.headers, headers.delimiter, "
        "headers.separator, headers.key.separator, null.marker, ignore.error",
    )
    p.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        default="none",
        choices=CODECS,
        help="compress batches (default none; the bare flag means gzip, as in Kafka)",
    )
    p.add_argument(
        "--acks",
        "--request-required-acks",
        dest="acks",
        default="all",
        choices=sorted(ACKS),
        help="acknowledgements: 0 none, 1 leader, -1/all committed (default all)",
    )
    p.add_argument("--partition", type=int, metavar="N", help="send every record to partition N")
    p.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a producer setting in Kafka's spelling, e.g. linger.ms=5 (repeatable)",
    )
    p.add_argument(
        "--producer.config",
        dest="producer_config",
        metavar="FILE",
        help="producer properties file (Kafka's names; --producer-property wins)",
    )
    p.add_argument(
        "--sync",
        action="store_true",
        help="send each record on its own and wait for its acknowledgement",
    )
    p.add_argument(
        "--timeout-ms",
        type=int,
        default=60000,
        metavar="MS",
        help="how long to wait for the last acknowledgements at the end (60000)",
    )


def _producer(args: argparse.Namespace) -> Any:
    from kafka.codec import has_snappy

    codec = None if args.compression_codec == "none" else args.compression_codec
    if codec == "snappy" and not has_snappy():
        raise ToolError(
            "snappy needs the python-snappy package in this environment "
            "(pip install python-snappy), or choose gzip, lz4 or zstd"
        )
    acks = ACKS[args.acks]
    defaults: dict[str, Any] = {
        "client_id": "tidelog-console-producer",
        "acks": acks,
        "compression_type": codec,
        # Idempotence as Kafka's console producer has it (acks=all), when the broker can give
        # out producer ids; else plain acks=all.
        "enable_idempotence": acks == "all" and INIT_PRODUCER_ID in served_apis(args),
        "linger_ms": 0 if args.sync else 5,
    }
    props = parse_properties(args.producer_property, "--producer-property")
    return producer_client(args, defaults, [args.producer_config], [props])


def run(args: argparse.Namespace) -> int:
    fmt = LineFormat.from_properties(parse_properties(args.property))
    show = stderr_is_tty() and not sys.stdin.isatty()  # a count while a file is being sent
    with client_errors(args.bootstrap_server):
        producer = _producer(args)
        if args.partition is not None:
            partitions = producer.partitions_for(args.topic)
            if args.partition not in partitions:
                producer.close(timeout=0)
                raise no_such_partition(args.topic, args.partition, partitions)
        failures: list[BaseException] = []
        sent = 0
        progress = Progress(0, "sent", "records", enabled=show)
        try:
            for number, line in enumerate(read_lines(sys.stdin.buffer), 1):
                try:
                    key, value, headers = parse_line(line, number, fmt)
                except LineError as exc:
                    raise ToolError(f"{exc}; {sent} records sent before it") from None
                future = producer.send(
                    args.topic, value=value, key=key, headers=headers, partition=args.partition
                )
                future.add_errback(failures.append)
                if args.sync:
                    producer.flush(timeout=args.timeout_ms / 1000)
                    if failures:
                        break
                sent += 1
                progress.update(1)
            producer.flush(timeout=args.timeout_ms / 1000)
        finally:
            progress.close()
            producer.close(timeout=args.timeout_ms / 1000)
        if failures:
            raise ToolError(
                f"{len(failures)} of {sent} records failed; the first: "
                f"{type(failures[0]).__name__}: {failures[0]}"
            )
    return EXIT_OK if not failures else EXIT_FAILURE
