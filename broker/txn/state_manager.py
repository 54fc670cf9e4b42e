"""The transactional ids' metadata and their log: Kafka's TransactionStateManager on one node.

Every transactional id has a ``TransactionMetadata`` (``broker/txn/metadata.py``) kept in
memory and made durable in ``__transaction_state``
(``protocol/internal_topics/transaction_state.py``) before a transition counts
(``persist``): the new state's record is appended, the high watermark must cover it, and only
then does memory change (meanwhile ``pending`` makes other requests for the id answer
CONCURRENT_TRANSACTIONS). Start-up replays every partition (``load``: the last value of a key
wins, a tombstone deletes); until ``status`` is "active" every API answers
COORDINATOR_LOAD_IN_PROGRESS. Idle ids expire here too (Kafka's
removeExpiredTransactionalIds: a tombstone each).

The writing itself is the broker's (``WriteRecord``, ``broker/txn/service.py``); this module
never touches storage.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from tidelog.broker.txn.metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TxnState,
    TxnTransit,
)
from tidelog.config.definitions import int_default
from tidelog.protocol.internal_topics.transaction_state import TxnLogValue

__all__ = ["TransactionStateManager", "TxnConfig", "WriteRecord"]

log = logging.getLogger("tidelog.txn")


class WriteRecord(Protocol):
    """Appends one record (value None = tombstone) for a transactional id at once (raising
    when that fails) and returns an awaitable that resolves once the HW covers it (or raises).
    ``lazy``: nobody waits for this record, so it needs no fsync of its own and the awaitable
    returned is already resolved; the next record of its partition (whose wait covers this
    one: one partition, in order) or the broker's periodic flush makes it durable.
    ``defer_flush``: its fsync starts in the loop's next turn (``PartitionWriter``)."""

    def __call__(
        self,
        transactional_id: str,
        value: TxnLogValue | None,
        *,
        lazy: bool = False,
        defer_flush: bool = False,
    ) -> Awaitable[None]: ...


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = int_default("transaction.max.timeout.ms")
    id_expiration_ms: int = int_default("transactional.id.expiration.ms")
    abort_interval_ms: int = int_default(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms"
    )
    expiration_interval_ms: int = int_default(
        "transaction.remove.expired.transaction.cleanup.interval.ms"
    )


class TransactionStateManager:
    """The metadata of every transactional id, loaded from and written to the log."""

    def __init__(
        self, config: TxnConfig, *, write_record: WriteRecord, clock: Callable[[], int]
    ) -> None:
        self.config = config
        self.write_record = write_record
        self._clock = clock
        self.status = "loading"
        self.transactions: dict[str, TransactionMetadata] = {}
        self._by_producer: dict[int, TransactionMetadata] = {}

    # -- loading -------------------------------------------------------------------------------
    def load(self, records: Iterable[tuple[str, TxnLogValue | None]]) -> None:
        """Replay ``__transaction_state`` records in log order: ``replay`` for each, the same
        function a live transition ends with."""
        for transactional_id, value in records:
            self.replay(transactional_id, value)

    def replay(
        self,
        transactional_id: str,
        value: TxnLogValue | None,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> TransactionMetadata | None:
        """Make memory what one durable record says: a tombstone (or Dead) removes the id,
        anything else sets its metadata (``TransactionMetadata.apply``)."""
        if value is None or value.state_id == TxnState.DEAD or not 0 <= value.state_id <= 7:
            removed = self.transactions.pop(transactional_id, None)
            if removed is not None:
                removed.remove()
            return None
        md = self.transactions.get(transactional_id)
        if md is None:
            md = self.transactions[transactional_id] = TransactionMetadata.from_record(
                transactional_id, value
            )
        md.apply(value, last_producer_epoch)
        return md

    def inactive_error(self) -> ErrorCode | None:
        if self.status == "loading":
            return ErrorCode.coordinator_load_in_progress
        if self.status != "active":
            return ErrorCode.not_coordinator
        return None

    def by_producer_id(self, producer_id: int) -> TransactionMetadata | None:
        """The transactional id holding ``producer_id`` (an index rebuilt when stale)."""
        md = self._by_producer.get(producer_id)
        if md is not None and md.producer_id == producer_id and md.state is not TxnState.DEAD:
            return md
        self._by_producer = {m.producer_id: m for m in self.transactions.values()}
        return self._by_producer.get(producer_id)

    # -- persistence ---------------------------------------------------------------------------
    async def persist(self, md: TransactionMetadata, transit: TxnTransit) -> ErrorCode:
        """Write the record of a prepared transition (``TransactionMetadata.prepare_transition``)
        and, once the HW covers it, replay it into memory; until then the id is ``pending``
        (other requests answer CONCURRENT_TRANSACTIONS). A failed write changes nothing."""
        durable = self.append(md, transit)
        if isinstance(durable, ErrorCode):
            return durable
        return await self.await_durable(md, transit, durable)

    def append(
        self, md: TransactionMetadata, transit: TxnTransit, *, defer_flush: bool = False
    ) -> Awaitable[None] | ErrorCode:
        """The first half of ``persist``: append the record now; the awaitable (for
        ``await_durable``) resolves once it is durable. A failed append abandons the
        transition and returns COORDINATOR_NOT_AVAILABLE."""
        try:
            return self.write_record(md.transactional_id, transit.value, defer_flush=defer_flush)
        except Exception as exc:  # append errors: the client retries
            self._failed(md, transit, exc)
            return ErrorCode.coordinator_not_available

    async def await_durable(
        self, md: TransactionMetadata, transit: TxnTransit, durable: Awaitable[None]
    ) -> ErrorCode:
        """The second half of ``persist``: once the record is durable, replay it."""
        try:
            await durable
        except asyncio.CancelledError:
            md.abandon_transition()
            raise
        except Exception as exc:  # a failed flush, a timeout: the client retries
            self._failed(md, transit, exc)
            return ErrorCode.coordinator_not_available
        self._complete(md, transit)
        return ErrorCode.none

    def _failed(self, md: TransactionMetadata, transit: TxnTransit, exc: Exception) -> None:
        log.warning(
            "writing %s of %r failed: %s", transit.state.kafka_name, md.transactional_id, exc
        )
        md.abandon_transition()

    def write_lazily(self, md: TransactionMetadata, transit: TxnTransit) -> None:
        """Append the record of ``transit`` without waiting for it (``WriteRecord``'s ``lazy``)
        and replay it at once; raises when the append fails (memory unchanged)."""
        try:
            self.write_record(md.transactional_id, transit.value, lazy=True)
        except Exception:
            md.abandon_transition()
            raise
        self._complete(md, transit)

    def _complete(self, md: TransactionMetadata, transit: TxnTransit) -> None:
        md.complete_transition(transit)

    # -- periodic work -------------------------------------------------------------------------
    def timed_out(self) -> list[TransactionMetadata]:
        """Every Ongoing transaction older than its timeout (Kafka's timedOutTransactions)."""
        now = self._clock()
        return [
            md
            for md in self.transactions.values()
            if md.state is TxnState.ONGOING
            and md.pending is None
            and md.txn_start_ms + md.txn_timeout_ms < now
        ]

    async def expire_transactional_ids(self) -> int:
        """Remove ids idle for ``transactional.id.expiration.ms`` (a tombstone each)."""
        if self.status != "active":
            return 0
        now = self._clock()
        idle = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        expired = [
            md
            for md in self.transactions.values()
            if md.state in idle
            and md.pending is None
            and md.txn_last_update_ms + self.config.id_expiration_ms <= now
        ]
        for md in expired:
            try:
                md.prepare_transition(TxnState.DEAD, now)
                await self.write_record(md.transactional_id, None)
            except Exception as exc:
                log.warning("expiring %r failed: %s", md.transactional_id, exc)
                md.abandon_transition()
                continue
            self.replay(md.transactional_id, None)
        return len(expired)
