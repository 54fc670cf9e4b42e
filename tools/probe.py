"""``tidelog probe``: is a Kafka-protocol broker answering at HOST:PORT? (health checks).

Sends one hand-built ApiVersions v0 request over a plain socket (no client library, so it is
quick to start and works in a slim container) and reads the answer. Without
``--bootstrap-server`` it probes the broker's own first listener, as configured by the
``TIDELOG_*`` variables (and ``--broker-config FILE``): what a container health check wants.
Exit 0 when a broker answers (a KIP-511 UNSUPPORTED_VERSION answer counts: it is a Kafka
broker answering), 1 when none does within ``--timeout`` seconds, 2 on a bad command line.
Prints one line either way.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import ssl
import struct
import sys
import time
from dataclasses import dataclass

from tidelog.tools._client_config import ClientConfigError, client_settings, read_properties
from tidelog.tools._common import (
    EXIT_FAILURE,
    EXIT_OK,
    SubParsers,
    ToolError,
    add_bootstrap,
    add_tool_parser,
    connect_error,
    parse_bootstrap,
)

__all__ = ["ProbeResult", "add_parser", "probe", "run", "served_apis"]

API_VERSIONS = 18
_CORRELATION_ID = 0x7D1E  # "tide"
_CLIENT_ID = b"tidelog-probe"
_UNSUPPORTED_VERSION = 35
_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 18: "ApiVersions"}

EXAMPLES = """\
  tidelog probe --bootstrap-server 127.0.0.1:9092
  tidelog probe --bootstrap-server broker:9092 --timeout 2 && echo up
  HEALTHCHECK CMD tidelog probe --timeout 3     (the listener TIDELOG_LISTENERS names)
"""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What one broker answered: its ApiVersions error code and (api_key, min, max) ranges."""

    server: str
    error_code: int
    ranges: tuple[tuple[int, int, int], ...]
    seconds: float

    def describe(self) -> str:
        if self.error_code == _UNSUPPORTED_VERSION:
            what = "answers ApiVersions (UNSUPPORTED_VERSION for v0: a newer broker)"
        else:
            known = [
                f"{_NAMES[k]} v{lo}-{hi}" for k, lo, hi in self.ranges if k in _NAMES and k != 18
            ]
            what = f"answers ApiVersions: {len(self.ranges)} APIs" + (
                f" ({', '.join(known)})" if known else ""
            )
        return f"broker at {self.server} {what} in {self.seconds * 1000:.1f} ms"


def add_parser(subparsers: SubParsers) -> None:
    p = add_tool_parser(
        subparsers,
        "probe",
        help="check that a broker answers (exit 0) or not (exit 1)",
        description="Send one ApiVersions request and report whether a Kafka-protocol broker "
        "answers. Exit status 0 when one does, 1 when none does in time, 2 on a bad command "
        "line: fit for HEALTHCHECK and readiness scripts.",
        examples=EXAMPLES,
        run=run,
    )
    add_bootstrap(p, required=False)
    p.add_argument(
        "--broker-config",
        metavar="FILE",
        help="without --bootstrap-server: the broker's config file whose first listener to "
        "probe (TIDELOG_* variables apply too)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="give up after this long per broker (default 5)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing, only set the status")


def configured_address(config_file: str | None = None) -> str:
    """HOST:PORT of the broker's first listener as its configuration names it (a wildcard host
    is probed on 127.0.0.1)."""
    from tidelog.config import ConfigError, load_broker_config, parse_listener

    try:
        config = load_broker_config(config_file)
        host, port = parse_listener(config.listeners[0], "listeners", config.listener_protocols)
    except ConfigError as exc:
        raise ToolError(f"cannot tell the broker's listener: {exc}", 2) from None
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def run(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        raise ToolError("--timeout must be positive, e.g. --timeout 2", 2)
    if not args.bootstrap_server:
        args.bootstrap_server = configured_address(args.broker_config)
    errors = []
    tls = tls_context(args.command_config)
    for server in parse_bootstrap(args.bootstrap_server):
        try:
            result = probe(server, args.timeout, tls)
        except OSError as exc:
            errors.append(f"{server}: {connect_error(exc)}")
            continue
        if not args.quiet:
            print(result.describe())
        return EXIT_OK
    if not args.quiet:
        print(f"no broker answered: {'; '.join(errors)}", file=sys.stderr)
    return EXIT_FAILURE


def request_bytes(correlation_id: int = _CORRELATION_ID) -> bytes:
    """ApiVersions v0 with request header v1 (api key, version, correlation id, client id)."""
    body = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    return struct.pack(">i", len(body)) + body


def tls_context(command_config: str | None) -> ssl.SSLContext | None:
    """The TLS context ``--command-config`` asks for (security.protocol SSL or SASL_SSL, its
    PEM trust store, key store and host name check), None for a plain connection. ApiVersions
    is answered before SASL authentication, so SASL needs nothing more here."""
    if not command_config:
        return None
    try:
        kw = client_settings(read_properties(command_config), "admin").kwargs
    except ClientConfigError as exc:
        raise ToolError(f"--command-config: {exc}", 2) from None
    if kw.get("security_protocol") not in ("SSL", "SASL_SSL"):
        return None
    context = ssl.create_default_context(cafile=kw.get("ssl_cafile"))
    context.check_hostname = bool(kw.get("ssl_check_hostname", True))
    if kw.get("ssl_certfile"):
        context.load_cert_chain(kw["ssl_certfile"], kw.get("ssl_keyfile"), kw.get("ssl_password"))
    return context


def probe(server: str, timeout: float, tls: ssl.SSLContext | None = None) -> ProbeResult:
    """Ask ``server`` (HOST:PORT) for its API versions, over TLS when ``tls`` is given;
    OSError when it does not answer properly within ``timeout`` seconds."""
    host, _, port = server.rpartition(":")
    host = host.strip("[]")
    start = time.monotonic()
    deadline = start + timeout
    with contextlib.ExitStack() as stack:
        sock = stack.enter_context(socket.create_connection((host, int(port)), timeout=timeout))
        if tls is not None:
            sock = stack.enter_context(tls.wrap_socket(sock, server_hostname=host))
        sock.sendall(request_bytes())
        (size,) = struct.unpack(">i", _read_exact(sock, 4, deadline))
        if not 6 <= size <= 1 << 20:
            raise OSError(f"answer of {size} bytes is not an ApiVersions answer")
        body = _read_exact(sock, size, deadline)
    correlation_id, error_code = struct.unpack_from(">ih", body, 0)
    if correlation_id != _CORRELATION_ID:
        raise OSError(f"answer carries correlation id {correlation_id}, not {_CORRELATION_ID}")
    ranges: list[tuple[int, int, int]] = []
    if len(body) >= 10:
        (count,) = struct.unpack_from(">i", body, 6)
        if 0 <= count <= (len(body) - 10) // 6:
            ranges = [struct.unpack_from(">hhh", body, 10 + 6 * i) for i in range(count)]
    return ProbeResult(server, error_code, tuple(ranges), time.monotonic() - start)


def served_apis(args: argparse.Namespace, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) that the first answering ``--bootstrap-server`` serves; empty when
    none answers (the Kafka client then reports the connection problem itself)."""
    for server in parse_bootstrap(args.bootstrap_server):
        try:
            result = probe(server, timeout)
        except OSError:
            continue
        return {k: (lo, hi) for k, lo, hi in result.ranges}
    return {}


def _read_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    chunks, got = [], 0
    while got < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out")
        sock.settimeout(remaining)
        chunk = sock.recv(n - got)
        if not chunk:
            raise OSError("the connection closed before an answer came (not a Kafka broker?)")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
