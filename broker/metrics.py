"""Prometheus metrics of a broker: requests, errors and latency per API, bytes in and out,
connections, per-partition offsets and sizes, group count.

The endpoint is off unless ``metrics.port`` is set; it then serves ``/metrics`` from
prometheus_client's own HTTP server thread, bound to the first listener's host (127.0.0.1 when
that host is empty), with a private ``CollectorRegistry`` (no process-global state).
prometheus_client is imported only when the endpoint starts or a registry is asked for (it costs
~40 ms of start-up).

Hot path: ``observe_request``, ``bytes_in``, ``bytes_out`` and ``connection_opened/closed`` are
called on the event loop thread and only bump plain ints (no lock, no prometheus object, no
per-record work: a dict look-up, a ``bisect`` and a few additions). The numbers are turned into
metric families at scrape time by a custom collector running in the HTTP thread; an int read
there may be one update behind, which a scrape cannot tell from timing.

Per-partition figures (LEO, HW, log start, size) are read from the log manager at scrape time
(its accessors take their own locks); the group count is ``len()`` of the coordinator's group
dict, read at scrape time too (a single atomic read; nothing is iterated off the loop).

Wiring: broker/app.py sets ``broker.metrics = Metrics.for_broker(broker)`` and starts it as the
first of ``broker.services``; broker/router.py calls ``observe_request`` around each handler
(an error: the handler raised, closed, or answered a non-zero top-level ``error_code``);
broker/server.py calls ``bytes_in``/``bytes_out`` and ``connection_opened/closed``.
Code that may run without a broker uses ``metrics_of(obj)``, which falls back to a shared
instance nobody scrapes.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

log = logging.getLogger("tidelog.metrics")

__all__ = ["LATENCY_BUCKETS", "Metrics", "PartitionStats", "metrics_of"]

#: Request latency histogram bounds, seconds (+Inf is implied).
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


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
    __slots__ = ("buckets", "errors", "requests", "seconds")

    def __init__(self) -> None:
        self.requests = 0
        self.errors = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)


class Metrics:
    """Counters of one broker and the Prometheus endpoint that shows them."""

    def __init__(
        self,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        partitions: Callable[[], Iterable[PartitionStats]] | None = None,
        group_count: Callable[[], int] | None = None,
    ) -> None:
        self.port = port
        self.host = host or "127.0.0.1"
        self._partitions = partitions
        self._group_count_fn = group_count
        self._apis: dict[str, _ApiStats] = {}
        self._bytes_in = 0
        self._bytes_out = 0
        self._connections = 0
        self._connections_total = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._registry: CollectorRegistry | None = None

    @property
    def registry(self) -> CollectorRegistry:
        """The private registry (made, and prometheus_client imported, on first use)."""
        if self._registry is None:
            from prometheus_client import CollectorRegistry

            registry = CollectorRegistry(auto_describe=False)
            registry.register(_Collector(self))
            self._registry = registry
        return self._registry

    # ------------------------------------------------------------------ hot path

    def observe_request(self, api_name: str, seconds: float, error: bool = False) -> None:
        """One request of ``api_name`` answered in ``seconds``; ``error`` when it failed."""
        stats = self._apis.get(api_name)
        if stats is None:
            stats = self._apis[api_name] = _ApiStats()
        stats.requests += 1
        stats.seconds += seconds
        stats.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        if error:
            stats.errors += 1

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
        )

    async def start(self) -> None:
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
            "Requests whose handler failed or answered a top-level error, by API.",
            labels=["api"],
        )
        latency = HistogramMetricFamily(
            "tidelog_request_latency_seconds",
            "Time from a decoded request to its encoded answer, by API.",
            labels=["api"],
        )
        for name, s in apis:
            requests.add_metric([name], s.requests)
            errors.add_metric([name], s.errors)
            buckets, running = [], 0
            for bound, count in zip(
                (*(repr(b) for b in LATENCY_BUCKETS), "+Inf"), s.buckets, strict=True
            ):
                running += count
                buckets.append((bound, float(running)))
            latency.add_metric([name], buckets, s.seconds)
        yield requests
        yield errors
        yield latency
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
        groups = self._groups()
        if groups is not None:
            yield GaugeMetricFamily(
                "tidelog_groups", "Consumer groups the coordinator knows.", value=groups
            )
        yield from self._partition_families()

    def _partition_families(self) -> Iterator[Metric]:
        if self._partitions is None:
            return
        from prometheus_client.core import GaugeMetricFamily

        try:
            stats = sorted(self._partitions(), key=lambda p: (p.topic, p.partition))
        except Exception:
            log.exception("reading partition figures for a scrape failed")
            return
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
        for p in stats:
            key = [p.topic, str(p.partition)]
            for field, family in families.items():
                family.add_metric(key, getattr(p, field))
        yield from families.values()


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


def _count_groups(coordinator: Any) -> int:
    if coordinator is None:
        raise LookupError("no group coordinator")
    fn = getattr(coordinator, "group_count", None)
    if callable(fn):
        return int(fn())
    groups = getattr(coordinator, "groups", None)
    if isinstance(groups, dict):
        return len(groups)
    raise LookupError("the group coordinator exposes no group count")


_UNSCRAPED = Metrics()


def metrics_of(obj: Any) -> Metrics:
    """``obj.metrics`` when it has one (a Broker), else a shared instance nobody scrapes."""
    m = getattr(obj, "metrics", None)
    return m if isinstance(m, Metrics) else _UNSCRAPED
