"""The broker: configuration, storage, topics, HW waiters, listeners and background work.

``Broker`` is what handlers reach through ``ctx.broker``:

- ``config`` (BrokerConfig), ``node_id``, ``cluster_id``;
- ``log_manager`` (storage.LogManager) and ``topics`` (broker.topics.Topics: the topic registry;
  ``topics.get_log(topic, partition)`` is the usual way to a PartitionLog);
- ``partitions`` (HighWatermarkWaiters): the long polls' wake-ups (a delayed Fetch registers a
  future with ``partitions.add`` and is woken by callbacks; share fetches ``await wait_any``);
- ``log_flusher`` (broker/log_flusher.py, the acknowledgement policy): its ``after_append(log,
  hw_before)`` follows every append (through the ``partition_writer``); it wakes HW waiters now
  or schedules the group-commit fsync that will, and releases the answers the fsync covers;
- ``held_answers`` (HeldAnswers): produce answers parked until the fsync covering them returns
  (released by ``log_flusher``, expired by its tick);
- ``run_blocking(fn, *args)``: run blocking work (fsync, big reads) in the worker pool;
- ``run_heavy(fn, *args)``: CPU-heavy request work (a compacted topic's key check, big appends:
  ``append_queue`` keeps them in order per partition) in a small pool of its own, so the I/O
  pool's fsyncs never wait behind a decompression;
- ``producer_ids`` (InitProducerId's allocator) and the ``partition_writer``
  (``broker/coordinator/partition_writer.py``: the one append-wake-wait of the coordinators'
  writes, and the wake and HW wait of Produce's appends), ready before the first answer; the
  coordinators ``groups``, ``transactions`` and ``share_groups``, installed by ``start``
  (``broker/coordinators.py``) once the listeners answer what a producer sends first
  (``broker/router.py``, ``READY_AT_START``); ``services`` holds the components started and
  stopped with the broker, in order (stopped in reverse).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import resource
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tidelog.broker import coordinators
from tidelog.broker.client_quota_manager import ClientQuotas, monotonic_ms
from tidelog.broker.connection_quotas import ConnectionQuotas
from tidelog.broker.dynamic_configs import DYNAMIC_CONFIGS_FILE, DynamicConfigs
from tidelog.broker.endpoints import Endpoint, resolve_endpoints
from tidelog.broker.log_flusher import FLUSH_TICK_S, Flusher, LogFlusher
from tidelog.broker.loop_lag import LoopLag
from tidelog.broker.metrics import Metrics
from tidelog.broker.partition_appends import PartitionAppends
from tidelog.broker.producer_ids import ProducerIdManager
from tidelog.broker.purgatory import HeldAnswers, HighWatermarkWaiters
from tidelog.broker.router import Router
from tidelog.broker.security.service import BrokerSecurity
from tidelog.broker.server import ListenerServer
from tidelog.broker.topics import REGISTRY_FILE, Topics, log_config_from
from tidelog.config import BrokerConfig
from tidelog.config.topic import effective_topic_config
from tidelog.storage import LogManager
from tidelog.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)

if TYPE_CHECKING:  # installed by start() (broker/coordinators.py), imported lazily there
    from tidelog.broker.coordinator.partition_writer import PartitionWriter
    from tidelog.broker.group.coordinator import GroupCoordinator
    from tidelog.broker.group.streams import StreamsGroups
    from tidelog.broker.share.coordinator import ShareCoordinator
    from tidelog.broker.txn.coordinator import TransactionCoordinator
    from tidelog.storage.cleaner import LogCleaner

log = logging.getLogger("tidelog.broker")

__all__ = (
    "Broker",
    "now_ms",
    "open_files_max",
    "raise_open_file_limit",
)

T = TypeVar("T")

PRODUCE_API_KEY = 0
#: Threads of the pool for CPU-heavy request work (``run_heavy``): two batches decompressed and
#: scanned at once at most (as ``storage.record_scan.REQUEST_INFLATING`` allows).
HEAVY_THREADS = 2
#: How much lower (``nice``) the CPU priority of those threads is than the event loop's.
HEAVY_THREAD_NICE = 10
#: How often ``.deleted`` segment files past ``file.delete.delay.ms`` are removed.
DELETE_TICK_S = 5.0
#: How long shutdown waits for in-flight requests (long polls end sooner: max_wait_ms).
SHUTDOWN_DRAIN_S = 10.0


def _lower_thread_priority() -> None:
    """Give the calling worker thread a lower CPU priority (Linux: nice is per thread), so the
    event loop's thread wins a contended core over heavy request work (decompression, key
    scans). Best effort: not every system allows it."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), HEAVY_THREAD_NICE)
    except (AttributeError, OSError):
        pass


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def open_files_max(setting: int) -> int:
    """``log.open.files.max``, with -1 resolved to half the soft RLIMIT_NOFILE (at least 16)."""
    if setting > 0:
        return setting
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(soft // 2, 16)


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as Kafka's start scripts ask users to);
    returns ``(soft, hard)`` after. Logged by ``tidelog serve`` before the broker is built."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, exc)
    return soft, hard


class Broker:
    """One tidelog broker; ``await start()``, then ``await stop()``."""

    def __init__(self, config: BrokerConfig, *, clock: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.clock = clock
        self.node_id = config.node_id
        self.endpoints = resolve_endpoints(config)
        # Counters for the Prometheus endpoint (served only when metrics.port is set).
        self.metrics = Metrics.for_broker(self)
        self.log_dirs = [Path(d) for d in config.log_dirs]
        default_log_config = log_config_from(effective_topic_config(config, {}))
        self.log_manager = LogManager(
            self.log_dirs,
            default_config=default_log_config,
            clock=clock,
            node_id=self.node_id,
            producer_id_expiration_ms=config.get_int("producer.id.expiration.ms"),
            recovery_threads_per_data_dir=config.get_int("num.recovery.threads.per.data.dir"),
            open_files_max=open_files_max(config.get_int("log.open.files.max")),
        )
        self.topics = Topics(config, self.log_manager, self.log_dirs[0] / REGISTRY_FILE)
        # Group configs and Kafka-only broker settings set by admin tools (broker/dynamic_configs).
        self.dynamic_configs = DynamicConfigs(self.log_dirs[0] / DYNAMIC_CONFIGS_FILE, config.get)
        # Client quotas (AlterClientQuotas, kept in the same file; broker/client_quota_manager).
        self.client_quotas = ClientQuotas(
            self.dynamic_configs,
            int(cast(int, config.get("quota.window.num"))),
            int(cast(int, config.get("quota.window.size.seconds"))),
            monotonic_ms,
        )
        self.metrics.extra_families.append(self.client_quotas.managers.families)
        # Log compaction (storage/cleaner): made by ``_start_services`` (after the first answer),
        # log.cleaner.threads threads, stopped before storage shuts down.
        self.log_cleaner: LogCleaner
        self.partitions = HighWatermarkWaiters()
        #: Produce answers encoded at append time, sent once the fsync covering them returns.
        self.held_answers = HeldAnswers(
            lambda seconds, failed: self.router.observe(PRODUCE_API_KEY, seconds, failed)
        )
        # Listeners' TLS/SASL settings, SCRAM credentials and the authorizer (None unless
        # authorizer.class.name is set: then every handler's check is one attribute test).
        self.security = BrokerSecurity(config, self.log_dirs[0])
        self.security.configure_listeners(
            (e.name, config.listener_protocols.get(e.name, e.name)) for e in self.endpoints
        )
        self.authorizer = self.security.authorizer
        self.metrics.security_counts = lambda: (
            self.security.authentication_failures,
            self.security.denials,
        )
        self.router: Router = Router(self)
        # The group coordinator (broker/group/) sets ``groups`` (broker/coordinators.py).
        self.groups: GroupCoordinator
        #: FindCoordinator key type -> makes that coordinator's internal topic on first use
        #: (``__consumer_offsets``, ``__transaction_state``; set by the coordinators).
        self.coordinator_topics: dict[int, Callable[[], Awaitable[None]]] = {}
        self.producer_ids = ProducerIdManager.for_log_manager(
            self.log_manager, self.log_dirs[0], self.run_blocking
        )
        #: How late the event loop runs its timers (a stall detector, ``broker/loop_lag.py``).
        self.loop_lag = LoopLag()
        self.metrics.extra_families.append(self.loop_lag.families)
        self.services: list[coordinators.Service] = [self.metrics, self.loop_lag]
        # The transaction coordinator (broker/txn/) sets ``transactions``; it and the group
        # coordinators are installed by ``start`` (``broker/coordinators.py``), after the one
        # ``partition_writer`` (every coordinator write, and Produce's wake and HW wait), all
        # before the first request other than ApiVersions.
        self.transactions: TransactionCoordinator
        self.partition_writer: PartitionWriter
        # Share groups (KIP-932, broker/share/): sets ``share_groups`` (broker/coordinators.py).
        self.share_groups: ShareCoordinator | None = None
        # Streams groups (KIP-1071, broker/group/streams/): set by broker/coordinators.py.
        self.streams_groups: StreamsGroups | None = None
        self.listeners: list[ListenerServer] = []
        #: Set once the listeners answer what a producer sends first (ApiVersions, Metadata,
        #: InitProducerId, Produce); ``start`` goes on with the services (other requests wait
        #: for them, ``Router.hold_until``).
        self.answering = asyncio.Event()
        # max.connections / max.connections.per.ip, counted over every listener.
        self.connection_quotas = ConnectionQuotas(
            config.get_int("max.connections"), config.get_int("max.connections.per.ip")
        )
        io_threads = max(1, min(config.get_int("num.io.threads"), 8))
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=io_threads, thread_name_prefix="tidelog-io"
        )
        self._heavy_executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=HEAVY_THREADS,
            thread_name_prefix="tidelog-append",
            initializer=_lower_thread_priority,
        )
        #: Produce appends handed to ``run_heavy``, in order per partition.
        self.append_queue = PartitionAppends(self.run_heavy)
        #: Group-commit fsyncs: dedicated threads, one hand-off each way (broker/log_flusher.py).
        self._flusher = Flusher(io_threads)
        #: The acknowledgement policy: every append's ``after_append``, the group-commit fsync
        #: and the release of the answers it covers (broker/log_flusher.py).
        self.log_flusher = LogFlusher(
            self._flusher,
            self.held_answers,
            self.partitions.notify,
            clock,
            logs=self.log_manager.logs,
            run_blocking=self.run_blocking,
        )
        self._background: set[asyncio.Task[Any]] = set()
        self._periodic: list[asyncio.Task[None]] = []
        self._stopped = False
        self._storage_started = False
        self._cleaner_started = False
        self._services_started: list[coordinators.Service] = []
        #: True once shutdown began: long polls answer at once instead of waiting.
        self.stopping = False

    # ------------------------------------------------------------------ properties

    @property
    def cluster_id(self) -> str:
        return str(self.log_manager.cluster_id)

    @property
    def advertised(self) -> Endpoint:
        """The first listener's endpoint (for answers that come from no listener)."""
        return self.endpoints[0]

    def endpoint_for(self, listener_name: str) -> Endpoint:
        """The endpoint a client on ``listener_name`` is told about (Kafka: same listener)."""
        for endpoint in self.endpoints:
            if endpoint.name == listener_name:
                return endpoint
        return self.endpoints[0]

    def advertised_port(self, endpoint: Endpoint) -> int:
        """The advertised port, with port 0 (ephemeral) resolved to the bound port."""
        if endpoint.advertised_port:
            return endpoint.advertised_port
        for server in self.listeners:
            if server.name == endpoint.name:
                return server.port
        return endpoint.bind_port

    # ------------------------------------------------------------------ blocking work

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` in the worker thread pool and await its result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))

    async def run_heavy(self, fn: Callable[..., T], *args: Any) -> T:
        """Run CPU-heavy request work (decompression, key scans, big appends) in its own pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._heavy_executor, functools.partial(fn, *args))

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Start a background task the broker keeps a reference to (and awaits at stop)."""
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        """Lock and load the log dirs, start the services and the listeners.

        On failure everything started is undone (the ``.lock`` files released, nothing
        written to a dir this broker could not lock) before the exception propagates, and
        ``stop()`` becomes a no-op.
        """
        try:
            await self._start()
        except BaseException:
            await self._abort_start()
            raise

    async def _start(self) -> None:
        # Bind first, as Kafka's SocketServer does: a port in use fails the start before the
        # log dirs are locked or anything is loaded; connections are accepted once loaded.
        await self._bind_listeners()
        await self.run_blocking(self.log_manager.startup)
        self._storage_started = True
        self.topics.load_and_reconcile()
        self.dynamic_configs.load()
        self.client_quotas.load()
        # From here on (the logs are loaded) clients get answers at once to what a producer
        # sends first (ApiVersions, Metadata, InitProducerId, Produce, and on a SASL listener
        # SaslHandshake and SaslAuthenticate before them: their handlers, the
        # partition writer and the producer ids are ready before the first answer); every other
        # request, and a transactional one, waits until the coordinators, imported only now,
        # have loaded too (``Router.hold_until``).
        started: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        coordinators.install_partition_writer(self)
        await self.producer_ids.start()
        self.services.append(self.producer_ids)
        self._services_started.append(self.producer_ids)
        self.router.hold_until(
            started, sasl=any(s.uses_sasl for s in self.security.listeners.values())
        )
        try:
            for server in self.listeners:
                await server.serve()
            self.answering.set()
            await self._start_services()
        except BaseException:
            started.set_result(False)
            raise
        started.set_result(True)

    async def _start_services(self) -> None:
        """What the broker needs for requests other than a producer's first ones. The listeners
        answer those already: the coordinators' and handlers' modules are imported in a worker
        thread meanwhile, so the loop is free to answer."""
        await self.run_blocking(
            coordinators.import_modules,
            (
                *coordinators.modules_for(self.config),
                *self.router.modules(),
                "tidelog.storage.cleaner",
            ),
        )
        coordinators.install(self)
        self.router.load_all()  # the handlers, before the first request other than ApiVersions
        for service in self.services:
            if service not in self._services_started:  # the producer ids are up already
                await service.start()
                self._services_started.append(service)
        self.log_cleaner = self._new_log_cleaner()
        self.log_cleaner.startup()
        self._cleaner_started = True
        self._periodic = [
            asyncio.ensure_future(self._every(FLUSH_TICK_S, self.log_flusher.flush_due)),
            asyncio.ensure_future(
                self._every(
                    self.config.get_int("log.retention.check.interval.ms") / 1000,
                    self._retention,
                )
            ),
            asyncio.ensure_future(
                self._every(
                    self._checkpoint_interval_s(),
                    self._checkpoint,
                )
            ),
            asyncio.ensure_future(
                self._every(
                    max(self.config.get_int("log.flush.start.offset.checkpoint.interval.ms"), 100)
                    / 1000,
                    self._checkpoint_log_start,
                )
            ),
            asyncio.ensure_future(self._every(DELETE_TICK_S, self._delete_expired)),
        ]

    def _new_log_cleaner(self) -> LogCleaner:
        from tidelog.storage.cleaner import CleanerConfig, LogCleaner, compaction_config_from

        config = self.config
        return LogCleaner(
            self.log_manager,
            # Names this build does not define keep the cleaner's defaults; asking config.get
            # would build an "unknown setting" error (with spelling hints) only to drop it.
            CleanerConfig.from_lookup(lambda name: config.values.get(name)),
            compaction_config=lambda pl: compaction_config_from(
                self.topics.effective_config(pl.topic)
            ),
            clock=self.clock,
        )

    async def _bind_listeners(self) -> None:
        max_request = self.config.socket_request_max_bytes
        for endpoint in self.endpoints:
            server = ListenerServer(
                endpoint.name,
                endpoint.bind_host,
                endpoint.bind_port,
                self.router,
                max_request,
                quotas=self.connection_quotas,
                idle_ms=self.config.get_int("connections.max.idle.ms"),
                security=self.security if endpoint.name in self.security.listeners else None,
                ssl_context=self._ssl_context(endpoint.name),
                broker=self,
            )
            await server.bind()
            self.listeners.append(server)

    async def _abort_start(self) -> None:
        """Undo a start that failed part way (never raises: the first error is the news)."""
        self._stopped = True
        self.stopping = True
        for server in self.listeners:
            server.stop_accepting()
        for task in self._periodic:
            task.cancel()
        await asyncio.gather(*self._periodic, return_exceptions=True)
        for service in reversed(self._services_started):
            try:
                await service.stop()
            except Exception:
                log.debug("stopping %r after a failed start failed", service, exc_info=True)
        try:
            if self._cleaner_started:
                await self.run_blocking(self.log_cleaner.shutdown)
            if self._storage_started:
                # The dirs were locked and loaded: close them cleanly.
                await self.run_blocking(self.log_manager.shutdown)
            else:
                self.log_manager.release_locks()
        except Exception:
            log.debug("closing storage after a failed start failed", exc_info=True)
            self.log_manager.release_locks()
        self._executor.shutdown(wait=True)
        self._flusher.shutdown()
        self._heavy_executor.shutdown(wait=True)

    def _ssl_context(self, listener: str) -> Any:
        security = self.security.listeners.get(listener)
        return None if security is None else security.ssl_context

    def listening_line(self) -> str:
        """The one line ``tidelog serve`` logs once it listens (tests wait for it)."""
        parts = []
        for endpoint, server in zip(self.endpoints, self.listeners, strict=True):
            parts.append(
                f"{server.host}:{server.port} (advertised {endpoint.advertised_host}:"
                f"{self.advertised_port(endpoint)})"
            )
        dirs = ", ".join(str(d) for d in self.log_dirs)
        return f"tidelog listening on {', '.join(parts)}, log dirs {dirs}"

    async def stop(self) -> None:
        """Graceful stop: no new connections, answer what is in flight, flush, checkpoint."""
        if self._stopped:
            return
        self._stopped = True
        self.stopping = True
        for server in self.listeners:
            server.stop_accepting()
        if self.groups is not None:
            self.groups.begin_shutdown()  # answer parked JoinGroup/SyncGroup before the drain
        self.partitions.notify_all()  # long-poll fetches see ``stopping`` and answer now
        await asyncio.gather(*(s.finish_connections(SHUTDOWN_DRAIN_S) for s in self.listeners))
        for task in self._periodic:
            task.cancel()
        await asyncio.gather(*self._periodic, return_exceptions=True)
        if self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        await self.log_flusher.drain()
        for service in reversed(self.services):
            try:
                await service.stop()
            except Exception:
                log.exception("stopping %r failed", service)
        self.partitions.notify_all()
        # appends still running in the heavy pool finish before the logs close
        await self.run_blocking(self._heavy_executor.shutdown, True)
        await self.run_blocking(self.log_cleaner.shutdown)
        await self.run_blocking(self.log_manager.shutdown)
        self._executor.shutdown(wait=True)
        self._flusher.shutdown()
        self._heavy_executor.shutdown(wait=True)
        log.info("tidelog stopped cleanly")

    # ------------------------------------------------------------------ periodic work

    async def _every(self, interval_s: float, fn: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                result = fn()
                if asyncio.iscoroutine(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    async def _retention(self) -> None:
        await self.run_blocking(self.log_manager.run_retention, self.clock())

    def _checkpoint_interval_s(self) -> float:
        """The recovery-point and high-watermark checkpoints are written together, as often as
        the more frequent of them asks.

        Kafka writes the high-watermark checkpoint every 5 s, which keeps readers of the files
        (the Spark file path, dump-log) close to live; the recovery point rides along. The
        log-start-offset checkpoint has its own interval
        (``log.flush.start.offset.checkpoint.interval.ms``), as in Kafka.
        """
        ms = min(
            self.config.get_int("log.flush.offset.checkpoint.interval.ms"),
            self.config.get_int("replica.high.watermark.checkpoint.interval.ms"),
        )
        return max(ms, 100) / 1000

    async def _checkpoint(self) -> None:
        await self.run_blocking(
            self.log_manager.checkpoint, (RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)
        )

    async def _checkpoint_log_start(self) -> None:
        await self.run_blocking(self.log_manager.checkpoint, (LOG_START_OFFSET_CHECKPOINT,))

    async def _delete_expired(self) -> None:
        """Remove ``.deleted`` segment files and ``-delete`` dirs whose delay has passed."""

        def work(now: int) -> None:
            for partition_log in self.log_manager.logs():
                partition_log.delete_expired_files(now)
            self.log_manager.delete_expired_dirs(now)

        await self.run_blocking(work, self.clock())
