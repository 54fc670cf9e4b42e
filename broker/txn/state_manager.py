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

from tidelog.broker.txn.metadata import TransactionMetadata, TxnState
from tidelog.protocol.internal_topics.transaction_state import TxnLogValue

__all__ = ["TransactionStateManager", "TxnConfig", "WriteRecord"]

log = logging.getLogger("tidelog.txn")


class WriteRecord(Protocol):
    """Appends one record (value None = tombstone) for a transactional id at once (raising
    when that fails) and returns an awaitable that resolves once the HW covers it (or raises).
    ``lazy``: nobody waits for this record, so it needs no fsync of its own and the awaitable
    returned is already resolved; the next record of its partition (whose wait covers this
    one: one partition, in order) or the broker's periodic flush makes it durable."""

    def __call__(
        self, transactional_id: str, value: TxnLogValue | None, *, lazy: bool = False
    ) -> Awaitable[None]: ...


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 7 * 24 * 3600 * 1000
    abort_interval_ms: int = 10_000
    expiration_interval_ms: int = 3_600_000


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
        """Replay ``__transaction_state`` records in log order."""
        for transactional_id, value in records:
            if value is None:
                self.transactions.pop(transactional_id, None)
                continue
            state = TxnState(value.state_id) if 0 <= value.state_id <= 7 else TxnState.DEAD
            if state is TxnState.DEAD:
                self.transactions.pop(transactional_id, None)
                continue
            partitions = {(t, p) for t, ps in (value.partitions or {}).items() for p in ps}
            self.transactions[transactional_id] = TransactionMetadata(
                transactional_id,
                value.producer_id,
                value.producer_epoch,
                value.transaction_timeout_ms,
                state,
                partitions if state is not TxnState.EMPTY else set(),
                value.start_ms,
                value.last_update_ms,
                value.previous_producer_id,
                client_txn_version=value.client_transaction_version,
                next_producer_id=value.next_producer_id,
            )

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
    def value(
        self,
        md: TransactionMetadata,
        state: TxnState,
        now: int,
        partitions: set[tuple[str, int]] | None = None,
        start_ms: int | None = None,
    ) -> TxnLogValue:
        """The record of ``md`` in ``state`` (``partitions``/``start_ms`` instead of its own)."""
        chosen = md.partitions if partitions is None else partitions
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(chosen):
            by_topic.setdefault(topic, []).append(partition)
        return TxnLogValue(
            md.producer_id,
            md.producer_epoch,
            md.txn_timeout_ms,
            int(state),
            None if state is TxnState.EMPTY else by_topic,
            now,
            md.txn_start_ms if start_ms is None else start_ms,
            md.previous_producer_id,
            md.next_producer_id,
            md.client_txn_version,
        )

    async def persist(
        self,
        md: TransactionMetadata,
        state: TxnState,
        partitions: set[tuple[str, int]] | None = None,
        start_ms: int | None = None,
    ) -> ErrorCode:
        """Write ``md`` in ``state`` (with ``partitions``/``start_ms`` when given); memory
        changes (state, and those) only once the record is covered by the HW."""
        now = self._clock()
        md.pending = state
        value = self.value(md, state, now, partitions, start_ms)
        try:
            await self.write_record(md.transactional_id, value)
        except asyncio.CancelledError:
            md.pending = None
            raise
        except Exception as exc:  # append errors: the client retries
            log.warning("writing %s of %r failed: %s", state.kafka_name, md.transactional_id, exc)
            md.pending = None
            return ErrorCode.coordinator_not_available
        md.pending = None
        md.state = state
        md.txn_last_update_ms = now
        if partitions is not None:
            md.partitions = partitions
        if start_ms is not None:
            md.txn_start_ms = start_ms
        return ErrorCode.none

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
            md.pending = TxnState.DEAD
            try:
                await self.write_record(md.transactional_id, None)
            except Exception as exc:
                log.warning("expiring %r failed: %s", md.transactional_id, exc)
                md.pending = None
                continue
            md.state = TxnState.DEAD
            md.pending = None
            if self.transactions.get(md.transactional_id) is md:
                del self.transactions[md.transactional_id]
        return len(expired)
