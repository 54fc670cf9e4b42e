"""Shared plumbing of the ``tidelog`` tools: exit codes, errors, ``--property``, progress bars.

Every tool module (``broker/tools/<name>.py``) exposes ``add_parser(subparsers)`` and a
``run(args) -> int``. Exit codes scripts can trust:

* 0 - the work was done;
* 1 - it failed (broker unreachable, topic missing, corrupt file ...), one line on stderr;
* 2 - the command line was wrong (argparse's own convention).

Tool modules import Kafka clients lazily (inside ``run``) so that ``tidelog serve`` and
``tidelog --help`` do not pay for them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, TypeVar

__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "Progress",
    "SubParsers",
    "ToolError",
    "add_bootstrap",
    "add_tool_parser",
    "client_errors",
    "format_table",
    "parse_bootstrap",
    "parse_properties",
    "run_tool",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    SubParsers = argparse._SubParsersAction
T = TypeVar("T")


class ToolError(Exception):
    """A failure to report in one line (the message says what to do about it)."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def add_tool_parser(
    subparsers: SubParsers,
    name: str,
    *,
    help: str,
    description: str,
    examples: str,
    run: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """A sub-command parser with an examples epilog kept as written; ``func`` wraps ``run``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description=textwrap.fill(description, 79),
        epilog="examples:\n" + examples.rstrip() + "\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=lambda args: run_tool(name, run, args))
    return parser


def run_tool(name: str, run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a tool; a ToolError becomes its exit code and one line on stderr."""
    try:
        return run(args)
    except ToolError as exc:
        print(f"tidelog {name}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"tidelog {name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tidelog consume ... | head`: not an error
        with contextlib.suppress(Exception):
            sys.stdout = open("/dev/null", "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK


def add_bootstrap(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument(
        "--bootstrap-server",
        required=required,
        metavar="HOST:PORT[,HOST:PORT]",
        help="the broker(s) to connect to, e.g. 127.0.0.1:9092",
    )


def parse_bootstrap(value: str) -> list[str]:
    """``a:1,b:2`` -> ``['a:1', 'b:2']``; a missing port is an error that shows the form."""
    servers = [s.strip() for s in value.split(",") if s.strip()]
    if not servers:
        raise ToolError("--bootstrap-server is empty: give HOST:PORT, e.g. 127.0.0.1:9092", 2)
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ToolError(
                f"--bootstrap-server {server!r} is not HOST:PORT (e.g. 127.0.0.1:9092)", 2
            )
    return servers


def parse_properties(items: Sequence[str] | None, option: str = "--property") -> dict[str, str]:
    """Repeated ``KEY=VALUE`` options as a dict; a missing '=' is a usage error."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"{option} {item!r} must be written KEY=VALUE", 2)
        out[key.strip()] = value
    return out


def parse_bool(value: str, name: str) -> bool:
    low = value.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ToolError(f"property {name}={value!r} must be true or false", 2)


@contextlib.contextmanager
def client_errors(bootstrap: str) -> Iterator[None]:
    """Turn kafka-python's exceptions into one-line ToolErrors that say what to check."""
    try:
        yield
    except (ToolError, BrokenPipeError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise ToolError(describe_client_error(exc, bootstrap)) from exc


def describe_client_error(exc: BaseException, bootstrap: str) -> str:
    name = type(exc).__name__
    text = str(exc) or name
    if name in ("NoBrokersAvailable", "KafkaConnectionError", "ConnectionRefusedError"):
        return (
            f"no broker answered at {bootstrap} ({text}); check that it runs "
            "(`tidelog probe --bootstrap-server ...`) and the address"
        )
    if name in ("KafkaTimeoutError", "RequestTimedOutError", "TimeoutError"):
        return f"the broker at {bootstrap} did not answer in time ({text})"
    if name in ("UnsupportedVersionError", "IncompatibleBrokerVersion"):
        return f"the broker at {bootstrap} does not support this request yet ({text})"
    return f"{name}: {text}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by at least one space (as Kafka's tools print)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        " ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal (else it does nothing).

    ``update(n)`` adds ``n`` units of work; redraws at most ten times a second. With no known
    total (``total <= 0``) it shows a running count instead of a bar.
    """

    __slots__ = ("_done", "_enabled", "_label", "_last", "_stream", "_total", "_unit")

    def __init__(
        self,
        total: int,
        label: str,
        unit: str = "B",
        stream: IO[str] | None = None,
        enabled: bool | None = None,
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = stderr_is_tty() if enabled is None else enabled
        self._total = max(total, 0)
        self._label = label
        self._unit = unit
        self._done = 0
        self._last = 0.0

    def update(self, n: int) -> None:
        self._done += n
        if not self._enabled:
            return
        now = time.monotonic()
        if now - self._last >= 0.1:
            self._last = now
            self._draw()

    def _draw(self) -> None:
        if self._total <= 0:  # no known total: a counter
            self._stream.write(f"\r{self._label} {_human(self._done, self._unit)}\033[K")
            self._stream.flush()
            return
        width = 30
        frac = min(self._done / self._total, 1.0) if self._total else 1.0
        bar = "#" * int(frac * width)
        self._stream.write(
            f"\r{self._label} [{bar:<{width}}] {frac * 100:5.1f}% "
            f"{_human(self._done, self._unit)}/{_human(self._total, self._unit)}\033[K"
        )
        self._stream.flush()

    def close(self) -> None:
        if self._enabled:
            self._draw()
            self._stream.write("\r\033[K")
            self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _human(n: int, unit: str) -> str:
    if unit != "B":
        return f"{n} {unit}"
    size = float(n)
    for suffix in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or suffix == "GiB":
            return f"{size:.0f}{suffix}" if suffix == "B" else f"{size:.1f}{suffix}"
        size /= 1024
    return f"{n}B"  # pragma: no cover


def close_quietly(obj: Any) -> None:
    """Close a Kafka client, ignoring errors (the answer has been printed already)."""
    with contextlib.suppress(Exception):
        obj.close()


def admin_client(bootstrap: str, timeout_ms: int = 30000) -> Any:
    """A kafka-python KafkaAdminClient for ``bootstrap`` (imported here: tools load lazily)."""
    from kafka import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers=parse_bootstrap(bootstrap),
        client_id="tidelog-tools",
        request_timeout_ms=timeout_ms,
    )


def topic_matcher(pattern: str | None) -> Callable[[str], bool]:
    """Kafka's tools take --topic as a regular expression (a plain name matches itself)."""
    import re

    if pattern is None:
        return lambda _name: True
    try:
        regex = re.compile(pattern)
    except re.error:
        return lambda name: name == pattern
    return lambda name: name == pattern or regex.fullmatch(name) is not None
