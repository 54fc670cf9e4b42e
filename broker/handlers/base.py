"""The contract every request handler follows.

One module per Kafka API lives in ``broker/handlers/`` (``produce.py``, ``fetch.py``, ...). Each
module defines a module-level ``SPEC = HandlerSpec(...)``; the router discovers the modules of this
package at start-up, and the ApiVersions answer is built from the specs found, so a version is
advertised exactly when a handler claims it.

A handler is
``async def handle(ctx: RequestContext, request: <kio request>) -> <kio response> | None``.
It returns Kafka error codes as data inside the response (``ErrorCode.unknown_topic_or_partition``
and so on). It raises only for bugs: the router's single catch-all logs the request and answers
UNKNOWN_SERVER_ERROR where the response shape allows it, else closes the connection. Returning
``None`` means "send no response" (Produce with acks=0).

Handlers run on the event loop thread. Anything that can block for long (fsync, a big read,
recovery) goes through ``ctx.broker.run_blocking(fn, *args)``, which runs it in a worker thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidelog.broker.app import Broker


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    client_port: int
    broker: Broker
    #: The name of the listener the request came in on (``PLAINTEXT``, ``EXTERNAL``...); the
    #: broker's own address in answers is that listener's advertised one, as in Kafka.
    listener_name: str = ""
    #: Who sent it: ``User:<name>`` after SASL or mutual TLS, else ``User:ANONYMOUS``.
    principal: str = "User:ANONYMOUS"
    #: The connection's authentication state (broker.security.sasl.ConnectionSecurity) on
    #: SSL and SASL listeners, else None.
    session: Any = None


HandleFn = Callable[[RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """One API's handler and the versions it implements (inclusive range)."""

    api_key: int
    name: str
    min_version: int
    max_version: int
    handle: HandleFn
    #: Lowest version listed in ApiVersions when it is below ``min_version``. Versions in
    #: ``[advertised_min_version, min_version)`` are advertised but refused by ``refuse``, which
    #: turns the request frame into a response body (Kafka 4 does this for Produce v0-2).
    advertised_min_version: int | None = None
    refuse: Callable[[bytes | memoryview, int], bytes] | None = None
    #: Produce and Fetch: ``(broker, version, correlation_id, lean request)`` -> the answer of
    #: the common request without a context or a handler coroutine: the framed bytes (or
    #: chunks), a future of them (a long poll), a coroutine giving them, or None to take
    #: ``handle``. The router calls it for lean-parsed requests; what it raises is logged and
    #: answered as from ``handle``.
    at_once: Callable[[Broker, int, int, Any], Any] | None = None
