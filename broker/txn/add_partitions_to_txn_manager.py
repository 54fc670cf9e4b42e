"""What Produce asks the transaction coordinator: Kafka's ``AddPartitionsToTxnManager`` role.

Transaction verification (``verify``): a transactional batch (attribute bit 4 of its header) is
appended only when its partition was added to the producer's open transaction (else
INVALID_TXN_STATE) by the producer's current epoch (else INVALID_PRODUCER_EPOCH). The check is
synchronous, so a transactional batch takes Produce's at-once path like any other. Idempotence
(sequence and epoch checks, duplicates) is storage's (``storage/producer_state.py``).

Implicit add (``add_implicitly``; Produce v12+, transaction version 2, KIP-890 part 2): a
transactional batch whose partition its transaction does not hold yet adds it itself (the
coordinator's ``add_partitions``, which Kafka's partition leader sends to the coordinator as
AddPartitionsToTxn), then is appended: once the Ongoing record naming the partition is appended,
not once it is durable (``early``; both fsyncs then run side by side, and the transaction
cannot end before that record is durable). Coordinator errors become what Kafka answers a producer:
PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH, the retriable ones (CONCURRENT_TRANSACTIONS,
COORDINATOR_*, NOT_COORDINATOR) -> NOT_ENOUGH_REPLICAS. The caller (``broker/handlers/produce.py``)
chooses the partitions: ones that exist, are not internal and may be written, and answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED itself.

Order: per producer id, the gate of the last request adding partitions implicitly. A later
request of that producer id waits for it (``needs_add`` sends it the slow way while a gate is
open), so pipelined batches are appended in the order they were sent; the caller releases its
gate (``release``) once its appends are done or queued.

Threading: event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.storage.batch import (
    ATTRIBUTES_LOW_OFFSET,
    BATCH_HEADER_SIZE,
    PRODUCER_ID_OFFSET,
    PRODUCER_STRUCT,
    TRANSACTIONAL_MASK,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tidelog.broker.txn.metadata import TransactionMetadata

__all__ = [
    "NOTHING_ADDED",
    "AddPartitionsToTxnManager",
    "ImplicitAdd",
    "TransactionPartitions",
    "transactional_producer",
]

TopicPartition = tuple[str, int]
#: An error to answer a partition with, and its message.
Refusal = tuple[ErrorCode, str]

#: Coordinator errors a producer retries on: answered NOT_ENOUGH_REPLICAS (as Kafka does).
_RETRIABLE_ADD_ERRORS = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)


def transactional_producer(records: bytes | memoryview | None) -> tuple[int, int] | None:
    """``(producer id, epoch)`` of a transactional batch (its first header), else None."""
    if (
        records is None
        or len(records) < BATCH_HEADER_SIZE
        or not records[ATTRIBUTES_LOW_OFFSET] & TRANSACTIONAL_MASK
    ):
        return None
    producer_id, epoch = PRODUCER_STRUCT.unpack_from(records, PRODUCER_ID_OFFSET)
    return int(producer_id), int(epoch)


@dataclass(frozen=True, slots=True)
class ImplicitAdd:
    """The outcome of ``add_implicitly``: the partitions refused (with what to answer) and the
    gate the request holds until ``release``."""

    refused: Mapping[TopicPartition, Refusal]
    gate: asyncio.Future[None] | None = None
    producer_ids: tuple[int, ...] = ()


NOTHING_ADDED = ImplicitAdd({})


class TransactionPartitions(Protocol):
    """What the manager asks the transaction coordinator (``broker/txn/coordinator.py``): who
    holds a producer id, whether a partition is in its transaction, and to add partitions."""

    def by_producer_id(self, producer_id: int) -> TransactionMetadata | None: ...

    def partition_in_transaction(
        self, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> bool: ...

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        client_txn_version: int = 0,
        *,
        early: bool = False,
    ) -> ErrorCode: ...


class AddPartitionsToTxnManager:
    """Transaction verification and implicit adds for Produce (see the module)."""

    def __init__(self, coordinator: TransactionPartitions) -> None:
        self._coordinator = coordinator
        #: Per producer id, the gate of the last request adding partitions implicitly.
        self._gates: dict[int, asyncio.Future[None]] = {}

    def verify(self, producer_id: int, epoch: int, topic: str, partition: int) -> Refusal | None:
        """Whether a transactional batch of ``producer_id`` may be appended: None, or the error."""
        coordinator = self._coordinator
        md = coordinator.by_producer_id(producer_id)
        if md is not None and epoch < md.producer_epoch:
            return (
                ErrorCode.invalid_producer_epoch,
                f"producer {producer_id} epoch {epoch} is fenced by epoch {md.producer_epoch}",
            )
        if not coordinator.partition_in_transaction(producer_id, epoch, topic, partition):
            return (
                ErrorCode.invalid_txn_state,
                f"{topic}-{partition} was not added to the open transaction of producer "
                f"{producer_id} (AddPartitionsToTxn first)",
            )
        return None

    def needs_add(self, producer_id: int, epoch: int, topic: str, partition: int) -> bool:
        """v12+: whether the partition is not in the transaction yet, or the producer has an
        implicit add in flight (its requests keep their order)."""
        return producer_id in self._gates or not self._coordinator.partition_in_transaction(
            producer_id, epoch, topic, partition
        )

    async def add_implicitly(
        self,
        transactional_id: str | None,
        wanted: Mapping[tuple[int, int], Sequence[TopicPartition]],
    ) -> ImplicitAdd:
        """Add ``wanted`` (per ``(producer id, epoch)``, its partitions) to their transactions,
        after the earlier such requests of the same producer ids. The caller must ``release``
        the outcome once its appends are done."""
        if not wanted:
            return NOTHING_ADDED
        coordinator = self._coordinator
        gates = self._gates
        producer_ids = tuple(sorted({pid for pid, _ in wanted}))
        earlier = [gates[pid] for pid in producer_ids if pid in gates]
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for pid in producer_ids:
            gates[pid] = gate
        outcome = ImplicitAdd({}, gate, producer_ids)
        refused: dict[TopicPartition, Refusal] = {}
        try:
            for previous in earlier:
                await asyncio.wait({previous})  # never cancels ``previous``
            for (producer_id, epoch), partitions in wanted.items():
                if all(
                    coordinator.partition_in_transaction(producer_id, epoch, t, p)
                    for t, p in partitions
                ):
                    continue
                if transactional_id is None:
                    continue  # the append's verification answers INVALID_TXN_STATE
                error = await coordinator.add_partitions(
                    transactional_id,
                    producer_id,
                    epoch,
                    partitions,
                    client_txn_version=2,
                    early=True,
                )
                if error is ErrorCode.none:
                    continue
                if error is ErrorCode.producer_fenced:
                    error = ErrorCode.invalid_producer_epoch
                elif error in _RETRIABLE_ADD_ERRORS:
                    error = ErrorCode.not_enough_replicas
                message = f"the partition could not be added to the transaction: {error.name}"
                for tp in partitions:
                    refused[tp] = (error, message)
        except BaseException:
            self.release(outcome)
            raise
        return ImplicitAdd(refused, gate, producer_ids)

    def release(self, outcome: ImplicitAdd) -> None:
        """Open the gate of ``outcome``: the producer's next request may go on."""
        gate = outcome.gate
        if gate is None:
            return
        if not gate.done():
            gate.set_result(None)
        for pid in outcome.producer_ids:
            if self._gates.get(pid) is gate:
                del self._gates[pid]
