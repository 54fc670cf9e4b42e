"""The contract every request handler follows.

One module per Kafka API lives in ``broker/handlers/`` (``produce.py``, ``fetch.py``, ...). Each
module defines a module-level ``SPEC = HandlerSpec(...)``, repeated as a row of ``API_TABLE``
(``broker/api_table.py``, checked against the SPECs by ``tests/broker/test_api_table.py``). The
broker's router reads ``API_TABLE`` and imports a handler module on the first request of its API;
the ApiVersions answer is built from the same rows, so a version is advertised exactly when a
handler claims it.

A handler is
``async def handle(ctx: RequestContext, request: <kio request>) -> <kio response> | None``.
It returns Kafka error codes as data inside the response (``ErrorCode.unknown_topic_or_partition``
and so on). It raises only for bugs: the router's single catch-all logs the request and answers
UNKNOWN_SERVER_ERROR where the response shape allows it, else closes the connection. Returning
``None`` means "send no response" (Produce with acks=0).

A handler may also return ``Close(reason)`` (close the connection after the earlier answers)
or a ``RawBody`` (a body it encoded itself); these and ``Answer``, what the router turns a
request into, live in ``broker/request_channel.py``.

Handlers see the broker through ``BrokerView``: the part of ``broker.app.Broker`` they may use.

Handlers run on the event loop thread. Anything that can block for long (fsync, a big read,
recovery) goes through ``ctx.broker.run_blocking(fn, *args)``, which runs it in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from tidelog.broker.client_quota_manager import ClientQuotas
    from tidelog.broker.coordinator.partition_writer import PartitionWriter
    from tidelog.broker.dynamic_configs import DynamicConfigs
    from tidelog.broker.endpoints import Endpoint
    from tidelog.broker.group.coordinator import GroupCoordinator
    from tidelog.broker.group.streams import StreamsGroups
    from tidelog.broker.log_flusher import LogFlusher
    from tidelog.broker.metrics import Metrics
    from tidelog.broker.partition_appends import PartitionAppends
    from tidelog.broker.producer_ids import ProducerIdManager
    from tidelog.broker.purgatory import HeldAnswers, HighWatermarkWaiters
    from tidelog.broker.security.authorizer import Authorizer
    from tidelog.broker.security.sasl import ConnectionSecurity
    from tidelog.broker.security.service import BrokerSecurity
    from tidelog.broker.share.coordinator import ShareCoordinator
    from tidelog.broker.topics import Topics
    from tidelog.broker.txn.coordinator import TransactionCoordinator
    from tidelog.config import BrokerConfig
    from tidelog.storage import LogManager

__all__ = (
    "ApiRanges",
    "BrokerView",
    "HandleFn",
    "HandlerSpec",
    "RequestContext",
)

T = TypeVar("T")


class ApiRanges(Protocol):
    """What handlers use of the router: the API ranges served (ApiVersions' answer)."""

    def api_ranges(self) -> list[tuple[int, int, int]]: ...


class BrokerView(Protocol):
    """The broker as handlers see it (``broker.app.Broker`` implements it)."""

    config: BrokerConfig
    node_id: int
    topics: Topics
    partitions: HighWatermarkWaiters
    held_answers: HeldAnswers
    #: The acknowledgement policy (group-commit fsyncs, release of held answers).
    log_flusher: LogFlusher
    metrics: Metrics
    log_manager: LogManager
    #: Group configs and the Kafka-only dynamic broker settings tidelog stores.
    dynamic_configs: DynamicConfigs
    #: Client quotas: their configs and the managers enforcing them.
    client_quotas: ClientQuotas
    #: FindCoordinator key type -> creates that coordinator's internal topic on first use.
    coordinator_topics: dict[int, Callable[[], Awaitable[None]]]
    #: The ACL authorizer, None unless ``authorizer.class.name`` is set.
    authorizer: Authorizer | None
    #: Listeners' TLS/SASL settings, SCRAM credentials and security counters.
    security: BrokerSecurity
    producer_ids: ProducerIdManager
    #: Produce appends that run in a worker thread, in order per partition.
    append_queue: PartitionAppends
    stopping: bool
    #: The group coordinator (``broker/coordinators.py`` sets it).
    groups: GroupCoordinator
    #: The transaction coordinator (``broker/coordinators.py`` sets it).
    transactions: TransactionCoordinator
    #: Kafka's CoordinatorPartitionWriter: every coordinator write to a partition, and the
    #: markers WriteTxnMarkers writes (``broker/coordinator/partition_writer.py``).
    partition_writer: PartitionWriter
    #: The share coordinator (KIP-932; ``broker/coordinators.py`` sets it).
    share_groups: ShareCoordinator | None
    #: Streams groups (KIP-1071; ``broker/coordinators.py`` sets it).
    streams_groups: StreamsGroups | None

    @property
    def router(self) -> ApiRanges:
        """The router, for the API ranges it serves (ApiVersions)."""
        ...

    @property
    def clock(self) -> Callable[[], int]: ...

    @property
    def cluster_id(self) -> str: ...

    def endpoint_for(self, listener_name: str) -> Endpoint: ...

    def advertised_port(self, endpoint: Endpoint) -> int: ...

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T: ...

    def spawn(self, coro: Any) -> asyncio.Task[Any]: ...


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    client_port: int
    broker: BrokerView
    #: The name of the listener the request came in on (``PLAINTEXT``, ``EXTERNAL``...); the
    #: broker's own address in answers is that listener's advertised one, as in Kafka.
    listener_name: str = ""
    #: Who sent it: ``User:<name>`` after SASL or mutual TLS, else ``User:ANONYMOUS``.
    principal: str = "User:ANONYMOUS"
    #: The connection's authentication state (broker.security.sasl.ConnectionSecurity) on
    #: SSL and SASL listeners, else None.
    session: ConnectionSecurity | None = None


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
    at_once: Callable[[BrokerView, int, int, Any], Any] | None = None
