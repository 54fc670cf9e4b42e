"""The group, consumer-group, transaction and share coordinators, wired in as a broker starts.

A broker answers ApiVersions before it needs them (``Broker._start_services``): ``MODULES`` are
imported in a worker thread while the loop answers, then ``install`` wires the coordinators
in (each ``install`` joins ``broker.services``, started right after).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidelog.broker.app import Broker

__all__ = ("MODULES", "import_modules", "install")

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


def modules_for(broker: Broker) -> tuple[str, ...]:
    """``MODULES``, and the Schema Registry's when it is configured."""
    if broker.config.get("schema.registry.listeners"):
        return (*MODULES, SCHEMA_REGISTRY_MODULE)
    return MODULES


def import_modules(names: Iterable[str]) -> None:
    """Import ``names`` (in a worker thread: the loop goes on answering meanwhile)."""
    for name in names:
        importlib.import_module(name)


def install(broker: Broker) -> None:
    """The classic and consumer group coordinators, the producer-id service, the transaction
    coordinator, the share coordinator: in that order in ``broker.services``, as they start."""
    from tidelog.broker.coordinator.partition_writer import PartitionWriter, WriterHost
    from tidelog.broker.group.consumer import install as install_consumer_groups
    from tidelog.broker.group.service import install as install_group_coordinator
    from tidelog.broker.group.streams import install as install_streams_groups
    from tidelog.broker.share.service import install as install_share_coordinator
    from tidelog.broker.txn.service import install as install_transaction_coordinator

    # Kafka's CoordinatorPartitionWriter: every coordinator write and marker, and the wake and
    # HW wait of Produce's appends (the handlers are loaded after this).
    broker.partition_writer = PartitionWriter(
        WriterHost(
            get_log=broker.topics.get_log,
            after_append=broker.log_flusher.after_append,
            notify=broker.partitions.notify,
            wait_until=broker.partitions.wait_until,
            clock=broker.clock,
        )
    )
    install_group_coordinator(broker)  # sets broker.groups, joins broker.services
    install_consumer_groups(broker)  # KIP-848 consumer groups beside the classic ones
    install_streams_groups(broker)  # KIP-1071 streams groups beside them
    broker.services.append(broker.producer_ids)
    install_transaction_coordinator(broker)  # sets broker.transactions
    install_share_coordinator(broker)  # share groups (KIP-932): sets broker.share_groups
    if broker.config.get("schema.registry.listeners"):
        from tidelog.broker.schema_registry.service import install as install_schema_registry

        install_schema_registry(broker)  # last: it may create _schemas, as a client could
