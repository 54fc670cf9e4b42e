"""Prometheus metrics of a broker: requests, errors (by error code) and latency per API, bytes
in and out, connections, Kafka's per-topic BrokerTopicMetrics, per-partition offsets and sizes,
consumer-group offsets and lag, replication health, the process (RSS, CPU, descriptors).

Names a Kafka dashboard expects: the JMX exporter's spelling of Kafka's MBeans
(``kafka_server_brokertopicmetrics_messagesin_total{topic}``, ``..._bytesin_total``,
``..._bytesout_total``, ``kafka_server_replicamanager_underreplicatedpartitions``,
``kafka_controller_kafkacontroller_offlinepartitionscount``) and kafka_exporter's for groups and
partitions (``kafka_consumergroup_current_offset``, ``kafka_consumergroup_lag``,
``kafka_topic_partition_current_offset``, ``kafka_topic_partition_oldest_offset``,
``kafka_brokers``, ``kafka_topic_partitions``, the ``..._sum`` gauges). docs/metrics.md lists
every metric (a test checks the list against a scrape).

The endpoint is off unless ``metrics.port`` is set; it then serves ``/metrics`` from
prometheus_client's own HTTP server thread, bound to the first listener's host (127.0.0.1 when
that host is empty), with a private ``CollectorRegistry`` (no process-global state).
prometheus_client is imported only when the endpoint starts or a registry is asked for (it costs
~40 ms of start-up).

Hot path: ``observe_request``, ``bytes_in``, ``bytes_out``, ``topic_in``, ``topic_out`` and
``connection_opened/closed`` are called on the event loop thread and only bump plain ints (no
lock, no prometheus object, no per-record work: a dict look-up, a ``bisect`` and a few
additions). The numbers are turned into metric families at scrape time by a custom collector
running in the HTTP thread; an int read there may be one update behind, which a scrape cannot
tell from timing.

Per-partition figures (LEO, HW, log start, size) are read from the log manager at scrape time
(its accessors take their own locks); the group count is ``len()`` of the coordinator's group
dict, read at scrape time too (a single atomic read). Committed group offsets are copied on the
event loop thread (the scrape asks the loop and waits at most a second), so nothing the loop
owns is iterated elsewhere. Internal topics (``__consumer_offsets``: 50 partitions) are folded
into one series per topic with ``partition="all"`` (sums); ``Metrics(fold_internal=False)``
lists their partitions one by one.

Latency: ``tidelog_request_latency_seconds`` is the time a request was worked on, without the
time a Fetch spent parked in its long poll (Kafka's RemoteTime), which is
``tidelog_request_wait_seconds``; buckets start at 50 us.

Wiring: broker/app.py sets ``broker.metrics = Metrics.for_broker(broker)`` and starts it as the
first of ``broker.services``; broker/router.py calls ``observe_request`` around each handler
(an error: the handler raised, closed, or answered a non-zero top-level ``error_code``);
broker/server.py calls ``bytes_in``/``bytes_out`` and ``connection_opened/closed``.
Code that may run without a broker uses ``metrics_of(obj)``, which falls back to a shared
instance nobody scrapes.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

    from tidelog.broker.group.coordinator import GroupCoordinator

log = logging.getLogger("tidelog.metrics")

__all__ = ["LATENCY_BUCKETS", "LONG_POLL_WAIT", "Metrics", "PartitionStats", "metrics_of"]

#: Request latency histogram bounds, seconds (+Inf is implied): from 50 us.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip

#: Error codes that are a normal step of a protocol, not a failure: JoinGroup's
#: MEMBER_ID_REQUIRED (79) asks a new member to join again with the id it was given.
NORMAL_ERROR_CODES = frozenset({79})
#: error label of a request whose handler raised or closed the connection.
EXCEPTION = -1

#: Seconds the request being handled spent parked in a long poll (Fetch's ``handle`` adds to it;
#: the router reads it to keep that wait out of the latency).
LONG_POLL_WAIT: ContextVar[float] = ContextVar("tidelog_long_poll_wait", default=0.0)


@dataclass(frozen=True, slots=True)
class PartitionStats:
    """One partition's figures at scrape time."""

    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    size_bytes: int
    segments: int


class _ApiStats:
    __slots__ = ("buckets", "errors", "requests", "seconds", "wait_buckets", "wait_seconds")

    def __init__(self) -> None:
        self.requests = 0
        self.errors: dict[int, int] = {}
        self.seconds = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self.wait_seconds = 0.0
        self.wait_buckets = [0] * (len(LATENCY_BUCKETS) + 1)


class Metrics:
    """Counters of one broker and the Prometheus endpoint that shows them."""

    def __init__(
        self,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        partitions: Callable[[], Iterable[PartitionStats]] | None = None,
        group_count: Callable[[], int] | None = None,
        group_offsets: Callable[[], list[tuple[str, str, int, int]]] | None = None,
        fold_internal: bool = True,
    ) -> None:
        self.port = port
        self.host = host or "127.0.0.1"
        self._partitions = partitions
        self._group_count_fn = group_count
        self._group_offsets = group_offsets
        self.fold_internal = fold_internal
        #: topic -> [messages in, bytes in, bytes out]
        self._topics: dict[str, list[int]] = {}
        self._apis: dict[str, _ApiStats] = {}
        self._bytes_in = 0
        self._bytes_out = 0
        self._connections = 0
        self._connections_total = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None
        #: () -> (failed authentications, authorization denials), set by broker.security.
        self.security_counts: Callable[[], tuple[int, int]] | None = None
        #: More families other components add at scrape time (the loop-lag watchdog).
        self.extra_families: list[Callable[[], Iterable[Metric]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._registry: CollectorRegistry | None = None

    @property
    def registry(self) -> CollectorRegistry:
        """The private registry (made, and prometheus_client imported, on first use)."""
        if self._registry is None:
            from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector

            registry = CollectorRegistry(auto_describe=False)
            registry.register(_Collector(self))
            ProcessCollector(registry=registry)  # process_resident_memory_bytes, cpu, fds
            PlatformCollector(registry=registry)
            self._registry = registry
        return self._registry

    # ------------------------------------------------------------------ hot path

    def observe_request(
        self, api_name: str, seconds: float, error: int = 0, waited: float = 0.0
    ) -> None:
        """One request of ``api_name`` answered ``seconds`` after it was decoded, ``waited`` of
        them parked in a long poll; ``error``: its top-level error code (0: none; True or
        ``EXCEPTION``: the handler raised or closed)."""
        stats = self._apis.get(api_name)
        if stats is None:
            stats = self._apis[api_name] = _ApiStats()
        stats.requests += 1
        if waited:
            seconds = max(seconds - waited, 0.0)
            stats.wait_seconds += waited
            stats.wait_buckets[bisect_left(LATENCY_BUCKETS, waited)] += 1
        stats.seconds += seconds
        stats.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        if error and error not in NORMAL_ERROR_CODES:
            code = EXCEPTION if error is True else int(error)
            stats.errors[code] = stats.errors.get(code, 0) + 1

    def topic_in(self, topic: str, messages: int, nbytes: int) -> None:
        """``messages`` records of ``nbytes`` appended to ``topic`` (Kafka's MessagesIn and
        BytesIn)."""
        t = self._topics.get(topic)
        if t is None:
            t = self._topics[topic] = [0, 0, 0]
        t[0] += messages
        t[1] += nbytes

    def topic_out(self, topic: str, nbytes: int) -> None:
        """``nbytes`` of ``topic``'s records sent to a fetcher (Kafka's BytesOut)."""
        t = self._topics.get(topic)
        if t is None:
            t = self._topics[topic] = [0, 0, 0]
        t[2] += nbytes

    def bytes_in(self, n: int) -> None:
        self._bytes_in += n

    def bytes_out(self, n: int) -> None:
        self._bytes_out += n

    def connection_opened(self) -> None:
        self._connections += 1
        self._connections_total += 1

    def connection_closed(self) -> None:
        self._connections -= 1

    # ------------------------------------------------------------------ life cycle (Service)

    @classmethod
    def for_broker(cls, broker: Any) -> Metrics:
        """Metrics reading ``broker.log_manager`` and ``broker.groups``; the endpoint follows
        ``metrics.port`` on the first listener's host."""
        port = broker.config.get("metrics.port")
        host = broker.endpoints[0].bind_host if getattr(broker, "endpoints", None) else ""
        return cls(
            port=port if isinstance(port, int) else None,
            host=host,
            partitions=lambda: _partition_stats(broker.log_manager),
            group_count=lambda: _count_groups(getattr(broker, "groups", None)),
            group_offsets=lambda: _group_offsets(getattr(broker, "groups", None)),
        )

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.current_thread()
        if self.port is None:
            return
        from prometheus_client import start_http_server

        try:
            self._server, self._thread = start_http_server(
                self.port, addr=self.host, registry=self.registry
            )
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"cannot serve metrics on {self.host}:{self.port} ({exc.strerror}); "
                "choose a free metrics.port or leave it unset",
            ) from exc
        self.port = int(self._server.server_address[1])
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await asyncio.get_running_loop().run_in_executor(None, server.shutdown)
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _groups(self) -> int | None:
        if self._group_count_fn is None:
            return None
        try:
            return self._group_count_fn()
        except Exception:  # no coordinator (yet): leave the gauge out
            return None

    def _on_loop(self, fn: Callable[[], Any], timeout_s: float = 1.0) -> Any:
        """``fn()`` run on the event loop thread (it owns the data), or None when the loop is
        closed or did not answer in time."""
        loop = self._loop
        if loop is None or threading.current_thread() is self._loop_thread:
            return fn()  # not started (no loop owns the data), or on the loop thread itself
        if loop.is_closed():
            return None
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except Exception as exc:
                done.set_exception(exc)

        try:
            loop.call_soon_threadsafe(run)
            return done.result(timeout=timeout_s)
        except (RuntimeError, concurrent.futures.TimeoutError):
            return None
        except Exception:
            log.exception("reading group offsets for a scrape failed")
            return None

    def render(self) -> bytes:
        """The text a scrape gets (for tests and debugging)."""
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))

    # ------------------------------------------------------------------ scrape

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        apis = sorted(self._apis.items())
        requests = CounterMetricFamily(
            "tidelog_requests", "Requests answered, by API.", labels=["api"]
        )
        errors = CounterMetricFamily(
            "tidelog_request_errors",
            "Requests whose handler failed (error=EXCEPTION) or answered a top-level error "
            "code (its Kafka name), by API; MEMBER_ID_REQUIRED is a normal step, not counted.",
            labels=["api", "error"],
        )
        latency = HistogramMetricFamily(
            "tidelog_request_latency_seconds",
            "Time from a decoded request to its encoded answer without a long-poll wait, by API.",
            labels=["api"],
        )
        wait = HistogramMetricFamily(
            "tidelog_request_wait_seconds",
            "Time a request spent parked in a long poll (Fetch waiting for data), by API.",
            labels=["api"],
        )
        for name, s in apis:
            requests.add_metric([name], s.requests)
            for code, n in sorted(s.errors.items()):
                errors.add_metric([name, _error_name(code)], n)
            latency.add_metric([name], _buckets(s.buckets), s.seconds)
            if s.wait_seconds:
                wait.add_metric([name], _buckets(s.wait_buckets), s.wait_seconds)
        yield requests
        yield errors
        yield latency
        yield wait
        yield from self._topic_families()
        yield CounterMetricFamily(
            "tidelog_bytes_in", "Bytes read from client connections.", value=self._bytes_in
        )
        yield CounterMetricFamily(
            "tidelog_bytes_out", "Bytes written to client connections.", value=self._bytes_out
        )
        yield GaugeMetricFamily(
            "tidelog_connections", "Client connections open now.", value=self._connections
        )
        yield CounterMetricFamily(
            "tidelog_connections_opened",
            "Client connections accepted since start.",
            value=self._connections_total,
        )
        if self.security_counts is not None:
            failures, denials = self.security_counts()
            yield CounterMetricFamily(
                "tidelog_authentication_failures",
                "Failed authentications (SASL or TLS principal mapping) since start.",
                value=failures,
            )
            yield CounterMetricFamily(
                "tidelog_authorization_denials",
                "Requests or resources refused by the authorizer since start.",
                value=denials,
            )
        groups = self._groups()
        if groups is not None:
            yield GaugeMetricFamily(
                "tidelog_groups", "Consumer groups the coordinator knows.", value=groups
            )
        yield from self._partition_families()
        for families in self.extra_families:
            yield from families()

    def _topic_families(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        labels = ["topic"]
        messages = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended, by topic (Kafka's BrokerTopicMetrics MessagesInPerSec).",
            labels=labels,
        )
        bytes_in = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesin",
            "Record batch bytes appended by producers, by topic (BytesInPerSec).",
            labels=labels,
        )
        bytes_out = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesout",
            "Record batch bytes sent to fetchers, by topic (BytesOutPerSec).",
            labels=labels,
        )
        for topic, (m, b_in, b_out) in sorted(self._topics.items()):
            messages.add_metric([topic], m)
            bytes_in.add_metric([topic], b_in)
            bytes_out.add_metric([topic], b_out)
        yield messages
        yield bytes_in
        yield bytes_out
        # One node: nothing is ever under-replicated or offline; the standard panels read 0.
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions with fewer in-sync replicas than replicas (0: a single node).",
            value=0,
        )
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a leader (0: this node leads every partition).",
            value=0,
        )

    def _partition_families(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        if self._partitions is None:
            return

        try:
            stats = sorted(self._partitions(), key=lambda p: (p.topic, p.partition))
        except Exception:
            log.exception("reading partition figures for a scrape failed")
            return
        yield from self._group_families(stats)
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount",
            "Partitions this broker holds (all of them, internal ones included).",
            value=len(stats),
        )
        # kafka_exporter's cluster and topic gauges (its names, help texts and labels).
        yield GaugeMetricFamily("kafka_brokers", "Number of Brokers in the Kafka Cluster.", value=1)
        per_topic = GaugeMetricFamily(
            "kafka_topic_partitions", "Number of partitions for this Topic", labels=["topic"]
        )
        for topic, count in sorted(collections.Counter(p.topic for p in stats).items()):
            per_topic.add_metric([topic], count)
        yield per_topic
        if self.fold_internal:
            stats = _fold_internal(stats)
        labels = ["topic", "partition"]
        families = {
            "log_end_offset": GaugeMetricFamily(
                "tidelog_partition_log_end_offset", "Log end offset (LEO).", labels=labels
            ),
            "high_watermark": GaugeMetricFamily(
                "tidelog_partition_high_watermark", "High watermark (HW).", labels=labels
            ),
            "log_start_offset": GaugeMetricFamily(
                "tidelog_partition_log_start_offset", "Log start offset.", labels=labels
            ),
            "size_bytes": GaugeMetricFamily(
                "tidelog_partition_size_bytes", "Bytes in the partition's segments.", labels=labels
            ),
            "segments": GaugeMetricFamily(
                "tidelog_partition_segments", "Segments of the partition.", labels=labels
            ),
        }
        current = GaugeMetricFamily(
            "kafka_topic_partition_current_offset",
            "Next offset to be read by consumers (the high watermark), as kafka_exporter.",
            labels=labels,
        )
        oldest = GaugeMetricFamily(
            "kafka_topic_partition_oldest_offset",
            "Log start offset, as kafka_exporter.",
            labels=labels,
        )
        for p in stats:
            key = [p.topic, "all" if p.partition < 0 else str(p.partition)]
            for field, family in families.items():
                family.add_metric(key, getattr(p, field))
            current.add_metric(key, p.high_watermark)
            oldest.add_metric(key, p.log_start_offset)
        yield from families.values()
        yield current
        yield oldest

    def _group_families(self, stats: list[PartitionStats]) -> Iterator[Metric]:
        if self._group_offsets is None:
            return
        committed = self._on_loop(self._group_offsets)
        if committed is None:
            return
        # at scrape time only: a start does not import the exporter's group families
        from tidelog.broker.metrics_groups import group_families

        hw = {(p.topic, p.partition): p.high_watermark for p in stats}
        yield from group_families(committed, hw)


def _buckets(counts: list[int]) -> list[tuple[str, float]]:
    out, running = [], 0
    for bound, count in zip((*(repr(b) for b in LATENCY_BUCKETS), "+Inf"), counts, strict=True):
        running += count
        out.append((bound, float(running)))
    return out


_ERROR_NAMES: dict[int, str] = {}


def _error_name(code: int) -> str:
    """Kafka's name of an error code (``UNKNOWN_TOPIC_OR_PARTITION``), ``EXCEPTION`` for -1."""
    name = _ERROR_NAMES.get(code)
    if name is None:
        if code == EXCEPTION:
            name = "EXCEPTION"
        else:
            from tidelog.protocol.errors import ErrorCode

            try:
                name = ErrorCode(code).name.upper()
            except ValueError:
                name = str(code)
        _ERROR_NAMES[code] = name
    return name


def _fold_internal(stats: list[PartitionStats]) -> list[PartitionStats]:
    """Internal topics' partitions summed into one entry per topic (partition -1: "all")."""
    out: list[PartitionStats] = []
    folded: dict[str, list[int]] = {}
    for p in stats:
        if not p.topic.startswith("__"):
            out.append(p)
            continue
        acc = folded.setdefault(p.topic, [0, 0, 0, 0, 0])
        for i, v in enumerate((p.log_start_offset, p.log_end_offset, p.high_watermark,
                               p.size_bytes, p.segments)):  # fmt: skip
            acc[i] += v
    out.extend(PartitionStats(t, -1, *acc) for t, acc in sorted(folded.items()))
    return out


def _group_offsets(coordinator: GroupCoordinator | None) -> list[tuple[str, str, int, int]]:
    """(group, topic, partition, committed offset) of every group (run on the loop thread)."""
    if coordinator is None:
        return []
    store = coordinator.offsets
    return [
        (gid, topic, partition, int(o.offset))
        for gid in store.group_ids()
        for (topic, partition), o in store.group(gid).items()
    ]


class _Collector:
    """Adapter: prometheus_client calls ``collect()`` on registered collectors."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return self._metrics.collect()


def _partition_stats(log_manager: Any) -> list[PartitionStats]:
    out = []
    for plog in log_manager.logs():
        try:
            segments = len(plog.segments())
            out.append(
                PartitionStats(
                    plog.topic,
                    plog.partition,
                    plog.log_start_offset,
                    plog.log_end_offset,
                    plog.high_watermark,
                    plog.size_in_bytes,
                    segments,
                )
            )
        except Exception:  # a log closed or deleted under the scrape: skip it
            continue
    return out


def _count_groups(coordinator: GroupCoordinator | None) -> int:
    """The groups the coordinator holds (``GroupCoordinator.groups``)."""
    if coordinator is None:
        raise LookupError("no group coordinator")
    return len(coordinator.groups)


_UNSCRAPED = Metrics()


def metrics_of(obj: Any) -> Metrics:
    """``obj.metrics`` when it has one (a Broker), else a shared instance nobody scrapes."""
    m = getattr(obj, "metrics", None)
    return m if isinstance(m, Metrics) else _UNSCRAPED
