"""The group, consumer-group, transaction and share coordinators, wired in as a broker starts.

A broker answers what a producer sends first (ApiVersions, Metadata, InitProducerId, Produce)
before it needs them (``Broker._start_services``): ``MODULES`` are imported in a worker thread
while the loop answers, then ``install`` wires the coordinators in (each joins
``broker.services``, started right after). The one ``PartitionWriter`` is made before the first
answer (``install_partition_writer``), as Produce needs it.

This module and ``broker/app.py`` are the broker's wiring: they alone know the ``Broker``, through
``CoordinatorHost`` (what ``install`` reads and sets). Each coordinator gets only its own
collaborators (Kafka passes a ``ReplicaManager``, a ``PartitionWriter``, a ``Time``): the config,
the topic registry, the one ``PartitionWriter``, ``run_blocking`` and the clock.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from tidelog.broker.coordinator.partition_writer import PartitionWriter
    from tidelog.broker.dynamic_configs import DynamicConfigs
    from tidelog.broker.group.coordinator import GroupCoordinator
    from tidelog.broker.group.streams import StreamsGroups
    from tidelog.broker.log_flusher import LogFlusher
    from tidelog.broker.metrics import Metrics
    from tidelog.broker.producer_ids import ProducerIdManager
    from tidelog.broker.purgatory import HighWatermarkWaiters
    from tidelog.broker.security.service import BrokerSecurity
    from tidelog.broker.share.coordinator import ShareCoordinator
    from tidelog.broker.topics import Topics
    from tidelog.broker.txn.coordinator import TransactionCoordinator
    from tidelog.config import BrokerConfig

__all__ = (
    "MODULES",
    "CoordinatorHost",
    "Service",
    "import_modules",
    "install",
    "install_partition_writer",
    "modules_for",
)

T = TypeVar("T")

#: Imported once the broker listens, not before (tests/broker/test_startup_imports.py).
MODULES = (
    "tidelog.broker.coordinator.runtime",
    "tidelog.broker.group.service",
    "tidelog.broker.group.consumer",
    "tidelog.broker.txn.service",
    "tidelog.broker.share.service",
)


#: Imported (with aiohttp and the schema libraries) only when ``schema.registry.listeners`` is set.
SCHEMA_REGISTRY_MODULE = "tidelog.broker.schema_registry.service"


class Service(Protocol):
    """A component that lives as long as the broker (group coordinator, producer ids...)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class CoordinatorHost(Protocol):
    """What ``install`` reads from the broker (``broker.app.Broker``) and the coordinators it
    sets on it (handlers reach them through ``handlers.base.BrokerView``)."""

    config: BrokerConfig
    topics: Topics
    partitions: HighWatermarkWaiters
    #: the acknowledgement policy: every coordinator append goes through its ``after_append``
    log_flusher: LogFlusher
    dynamic_configs: DynamicConfigs
    security: BrokerSecurity
    metrics: Metrics
    producer_ids: ProducerIdManager
    services: list[Service]
    coordinator_topics: dict[int, Callable[[], Awaitable[None]]]
    # set by ``install``
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    partition_writer: PartitionWriter
    share_groups: ShareCoordinator | None
    streams_groups: StreamsGroups | None

    @property
    def clock(self) -> Callable[[], int]: ...

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T: ...

    def spawn(self, coro: Any) -> Any: ...

    @property
    def stopping(self) -> bool: ...


def modules_for(config: BrokerConfig) -> tuple[str, ...]:
    """``MODULES``, and the Schema Registry's when it is configured."""
    if config.get("schema.registry.listeners"):
        return (*MODULES, SCHEMA_REGISTRY_MODULE)
    return MODULES


def import_modules(names: Iterable[str]) -> None:
    """Import ``names`` (in a worker thread: the loop goes on answering meanwhile)."""
    for name in names:
        importlib.import_module(name)


def install_partition_writer(broker: CoordinatorHost) -> None:
    """Kafka's CoordinatorPartitionWriter: every coordinator write and marker, and the wake and
    HW wait of Produce's appends; made before the first answer (Produce is answered at once)."""
    from tidelog.broker.coordinator.partition_writer import PartitionWriter, WriterHost

    broker.partition_writer = PartitionWriter(
        WriterHost(
            get_log=broker.topics.get_log,
            after_append=broker.log_flusher.after_append,
            notify=broker.partitions.notify,
            wait_until=broker.partitions.wait_until,
            clock=broker.clock,
        )
    )


def install(broker: CoordinatorHost) -> None:
    """The classic and consumer group coordinators, the transaction coordinator, the share
    coordinator: in that order in ``broker.services``, as they start (the partition writer and
    the producer-id service are up before the first answer, ``install_partition_writer``)."""
    from tidelog.broker.group.consumer import install as install_consumer_groups
    from tidelog.broker.group.service import GROUP_KEY_TYPE, group_coordinator
    from tidelog.broker.group.streams import install as install_streams_groups
    from tidelog.broker.share.service import share_coordinator
    from tidelog.broker.txn.service import TRANSACTION_KEY_TYPE, TransactionService

    config, topics, clock = broker.config, broker.topics, broker.clock
    writer = broker.partition_writer
    groups, offsets_topic = group_coordinator(config, topics, writer, broker.run_blocking, clock)
    broker.groups = groups
    broker.services.append(groups)
    broker.coordinator_topics[GROUP_KEY_TYPE] = offsets_topic.create_topic
    # KIP-848 consumer groups and KIP-1071 streams groups beside the classic ones
    install_consumer_groups(groups, topics, config, broker.dynamic_configs)
    broker.streams_groups = install_streams_groups(groups, topics, config, broker.run_blocking)
    transactions = TransactionService(
        config,
        topics,
        writer,
        broker.run_blocking,
        clock,
        new_producer_id=broker.producer_ids.generate_producer_id,
        complete_offsets_transaction=groups.complete_transaction,
    )
    broker.transactions = transactions.coordinator
    broker.services.append(transactions)
    broker.coordinator_topics[TRANSACTION_KEY_TYPE] = transactions.create_topic
    # share groups (KIP-932)
    share = share_coordinator(broker, groups, writer)
    broker.share_groups = share.coordinator
    broker.metrics.extra_families.append(share.families)
    broker.services.append(share)
    if config.get("schema.registry.listeners"):
        from tidelog.broker.schema_registry.service import install as install_schema_registry

        # last: it may create _schemas, as a client could
        broker.services.append(install_schema_registry(broker, broker.security.listeners))
