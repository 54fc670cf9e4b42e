"""Shared plumbing of the ``tidelog`` tools: exit codes, errors, ``--property``, progress bars.

Every tool module (``tools/<name>.py``) exposes ``add_parser(subparsers)`` and a
``run(args) -> int``. Exit codes scripts can trust:

* 0 - the work was done;
* 1 - it failed (broker unreachable, topic missing, corrupt file ...), one line on stderr;
* 2 - the command line was wrong (argparse's own convention).

Tool modules import Kafka clients lazily (inside ``run``) so that ``tidelog serve`` and
``tidelog --help`` do not pay for them.

Clients are built here, by ``admin_client``, ``consumer_client`` and ``producer_client``, from
``--bootstrap-server`` and the Kafka client properties of ``--command-config`` (added to every
parser by ``add_bootstrap``) and of the tool's own options (``--consumer.config``,
``--producer-property`` ...); ``_client_config`` translates Kafka's property names. Before a
client is built the bootstrap addresses are tried with a plain TCP connect, so a refused
connection is reported at once instead of after the client's bootstrap timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import re
import socket
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, TypeVar

from tidelog.tools._client_config import (
    ClientConfigError,
    client_settings,
    read_properties,
)

__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "Progress",
    "SubParsers",
    "ToolError",
    "add_admin_options",
    "add_bootstrap",
    "add_tool_parser",
    "admin_client",
    "client_errors",
    "compact_json",
    "consumer_client",
    "producer_client",
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
    """A failure to report in one line (the message says what to do about it).

    ``plain``: print the message as it is (a line in Kafka's tools' own words), without the
    ``tidelog <tool>:`` prefix."""

    def __init__(self, message: str, code: int = EXIT_FAILURE, *, plain: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.plain = plain


#: The arguments of the tool running now (set by ``run_tool``): ``admin_client("host:port")``
#: then still honours that run's ``--command-config``.
_CURRENT_ARGS: contextvars.ContextVar[argparse.Namespace | None] = contextvars.ContextVar(
    "tidelog_tool_args", default=None
)


def tool_version() -> str:
    """``tidelog <version>`` as ``--version`` prints it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"tidelog {version('tidelog')}"
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "tidelog (not installed)"


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
    parser.add_argument("--version", action="version", version=tool_version())
    parser.set_defaults(func=lambda args: run_tool(name, run, args))
    return parser


def add_admin_options(parser: argparse.ArgumentParser, actions: Sequence[tuple[str, str]]) -> None:
    """The first options of an admin tool (topics, groups, share-groups, acls, configs):
    ``--bootstrap-server`` and ``--command-config``, then its action flags (``add_actions``);
    the tool adds its own options after these."""
    add_bootstrap(parser)
    add_actions(parser, actions)


def compact_json(obj: Mapping[str, Any]) -> str:
    """JSON without spaces, as Kafka's tools print a decoded record (dump-log's decoders)."""
    return json.dumps(obj, separators=(",", ":"))


def no_such_partition(topic: str, partition: int, partitions: Iterable[int]) -> ToolError:
    """The error of --partition N on a topic without partition N (produce and consume)."""
    have = ", ".join(str(p) for p in sorted(partitions))
    return ToolError(f"topic '{topic}' has no partition {partition} (it has {have})")


def run_tool(name: str, run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a tool; a ToolError becomes its exit code and one line on stderr."""
    token = _CURRENT_ARGS.set(args)
    try:
        return run(args)
    except ToolError as exc:
        print(str(exc) if exc.plain else f"tidelog {name}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"tidelog {name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tidelog consume ... | head`: not an error
        with contextlib.suppress(Exception):
            sys.stdout = open("/dev/null", "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK
    finally:
        _CURRENT_ARGS.reset(token)


def add_bootstrap(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """``--bootstrap-server`` and ``--command-config`` (every tool that talks to a broker)."""
    parser.add_argument(
        "--bootstrap-server",
        required=required,
        metavar="HOST:PORT[,HOST:PORT]",
        help="the broker(s) to connect to, e.g. 127.0.0.1:9092",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties file: security.protocol, sasl.mechanism, "
        "sasl.jaas.config, ssl.truststore.location (PEM) ... and any client setting",
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
def client_errors(bootstrap: str, template: str | None = None) -> Iterator[None]:
    """Turn kafka-python's exceptions into one-line ToolErrors that say what to check.

    ``template`` words a broker's error as Kafka's tool does, e.g. ``TOPIC_COMMAND_ERROR``:
    ``Error while executing topic command : <the broker's message>``."""
    try:
        yield
    except (ToolError, BrokenPipeError, KeyboardInterrupt):
        raise
    except Exception as exc:
        broker_said = broker_message(exc)
        if broker_said is not None and template is not None:
            raise ToolError(template.format(broker_said), plain=True) from exc
        raise ToolError(broker_said or describe_client_error(exc, bootstrap)) from exc


@contextlib.contextmanager
def admin_session(
    args: argparse.Namespace, timeout_ms: int = 30000, template: str | None = None
) -> Iterator[Any]:
    """The admin client of one tool run (``admin_client(args)``): kafka-python's errors worded
    by ``client_errors`` (``template`` as there), the client closed at the end."""
    with client_errors(args.bootstrap_server, template):
        admin = admin_client(args, timeout_ms)
        try:
            yield admin
        finally:
            close_quietly(admin)


def add_actions(parser: argparse.ArgumentParser, actions: Sequence[tuple[str, str]]) -> None:
    """The action flags of a Kafka tool (``--create``, ``--list`` ...: ``(flag, help)``
    pairs), of which a command line gives exactly one."""
    group = parser.add_mutually_exclusive_group(required=True)
    for flag, help_text in actions:
        group.add_argument(flag, action="store_true", help=help_text)


def add_timeout_ms(parser: argparse.ArgumentParser, help_text: str = argparse.SUPPRESS) -> None:
    """``--timeout-ms`` (30000): the admin client's request timeout; hidden unless a help is
    given."""
    parser.add_argument("--timeout-ms", type=int, default=30000, metavar="MS", help=help_text)


#: Kafka's tools' words for a failed command (kafka-topics, kafka-consumer-groups).
TOPIC_COMMAND_ERROR = "Error while executing topic command : {}"
GROUP_COMMAND_ERROR = "Error: Executing consumer group command failed due to {}"

_ERROR_MESSAGE = re.compile(r"error_message=(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\")")


def broker_message(exc: BaseException) -> str | None:
    """The broker's own words for a kafka-python error answer: its ``error_message`` when the
    answer carried one, else the error code's description; None for a non-broker failure."""
    from kafka.errors import BrokerResponseError

    if not isinstance(exc, BrokerResponseError):
        return None
    m = _ERROR_MESSAGE.search(str(exc))
    if m is not None:
        text = (m.group(1) if m.group(1) is not None else m.group(2)) or ""
        if text and text != "None":
            return text.replace("\\'", "'")
    description = getattr(exc, "description", "") or type(exc).__name__
    return f"{description} ({getattr(exc, 'message', type(exc).__name__)})"


def describe_client_error(exc: BaseException, bootstrap: str) -> str:
    name = type(exc).__name__
    text = str(exc) or name
    if name in ("NoBrokersAvailable", "KafkaConnectionError", "ConnectionRefusedError"):
        return (
            f"no broker answered at {bootstrap} ({text}); check that it runs "
            "(`tidelog probe --bootstrap-server ...`) and the address"
        )
    if name in ("KafkaTimeoutError", "RequestTimedOutError", "TimeoutError"):
        hint = ""
        if "Unable to bootstrap" in text:
            # kafka-python retries a refused SASL login or TLS handshake until this timeout.
            hint = (
                "; if it runs, it may have refused the login: check security.protocol, "
                "sasl.mechanism and sasl.jaas.config in --command-config"
            )
        return f"the broker at {bootstrap} did not answer in time ({text}){hint}"
    if name in ("UnsupportedVersionError", "IncompatibleBrokerVersion"):
        return f"the broker at {bootstrap} does not support this request yet ({text})"
    return f"{name}: {text}"


def connect_error(exc: OSError) -> str:
    """Why a TCP connect failed, in a few words."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host ({exc.strerror})"
    return exc.strerror or str(exc)


def check_reachable(servers: Sequence[str], timeout_s: float = 5.0) -> None:
    """ToolError at once when no bootstrap server accepts a TCP connection (refused, unknown
    host, timed out), instead of waiting out the client's bootstrap timeout."""
    reasons = []
    for server in servers:
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return
        except OSError as exc:
            reasons.append(f"{server}: {connect_error(exc)}")
    raise ToolError(
        f"cannot connect to the broker: {'; '.join(reasons)}; check that it runs and the "
        "--bootstrap-server address"
    )


def client_kwargs(
    args: argparse.Namespace | None,
    role: str,
    files: Sequence[str | None] = (),
    properties: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """kafka-python settings from ``--command-config`` (when ``args`` has one), then ``files``
    (e.g. ``--consumer.config``), then ``properties`` (``--consumer-property``): later wins."""
    merged: dict[str, str] = {}
    paths = [getattr(args, "command_config", None), *files]
    try:
        for path in paths:
            if path:
                merged.update(read_properties(path))
        for props in properties:
            merged.update(props)
        settings = client_settings(merged, role)
    except ClientConfigError as exc:
        raise ToolError(str(exc), 2) from None
    if settings.ignored:
        print(
            f"WARN: ignoring Java-only client properties: {', '.join(settings.ignored)}",
            file=sys.stderr,
        )
    return settings.kwargs


def _build(cls: Any, role: str, kwargs: dict[str, Any]) -> Any:
    servers = kwargs["bootstrap_servers"]
    check_reachable(servers, min(5.0, kwargs.get("request_timeout_ms", 30000) / 1000))
    try:
        return cls(**kwargs)
    except (TypeError, ValueError, AssertionError) as exc:
        raise ToolError(f"bad {role} setting: {exc}", 2) from exc


def admin_client(
    bootstrap: str | argparse.Namespace, timeout_ms: int = 30000, **overrides: Any
) -> Any:
    """A kafka-python KafkaAdminClient for ``bootstrap`` (a HOST:PORT list, or a tool's args
    with ``bootstrap_server`` and ``command_config``); a plain string still takes the running
    tool's ``--command-config``. ``overrides`` are kafka-python keyword arguments."""
    from kafka import KafkaAdminClient

    args = bootstrap if isinstance(bootstrap, argparse.Namespace) else _CURRENT_ARGS.get()
    servers = bootstrap.bootstrap_server if isinstance(bootstrap, argparse.Namespace) else bootstrap
    kwargs: dict[str, Any] = {"client_id": "tidelog-tools", "request_timeout_ms": timeout_ms}
    kwargs.update(client_kwargs(args, "admin"))
    kwargs.update(overrides)
    kwargs["bootstrap_servers"] = parse_bootstrap(servers)
    return _build(KafkaAdminClient, "admin", kwargs)


def consumer_client(
    args: argparse.Namespace,
    defaults: Mapping[str, Any],
    files: Sequence[str | None] = (),
    properties: Sequence[Mapping[str, str]] = (),
) -> Any:
    """A KafkaConsumer: ``defaults`` (the tool's choices), then the client properties."""
    from kafka import KafkaConsumer

    return _client(KafkaConsumer, "consumer", args, defaults, files, properties)


def producer_client(
    args: argparse.Namespace,
    defaults: Mapping[str, Any],
    files: Sequence[str | None] = (),
    properties: Sequence[Mapping[str, str]] = (),
) -> Any:
    """A KafkaProducer: ``defaults`` (the tool's choices), then the client properties."""
    from kafka import KafkaProducer

    return _client(KafkaProducer, "producer", args, defaults, files, properties)


def _client(
    cls: Any,
    role: str,
    args: argparse.Namespace,
    defaults: Mapping[str, Any],
    files: Sequence[str | None],
    properties: Sequence[Mapping[str, str]],
) -> Any:
    kwargs = dict(defaults)
    kwargs.update(client_kwargs(args, role, files, properties))
    kwargs["bootstrap_servers"] = parse_bootstrap(args.bootstrap_server)
    return _build(cls, role, kwargs)


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
