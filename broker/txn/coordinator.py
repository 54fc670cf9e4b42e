"""The transaction coordinator: Kafka's TransactionCoordinator on one node.

Every transactional id has a ``TransactionMetadata`` (``broker/txn/metadata.py``) kept in
memory and made durable in ``__transaction_state``
(``protocol/internal_topics/transaction_state.py``) before a
transition counts: the new state's record is appended, the high watermark must cover it, and
only then does memory change (meanwhile ``pending`` makes other requests for the id answer
CONCURRENT_TRANSACTIONS). Start-up replays every partition (the last value of a key wins, a
tombstone deletes); until then every API answers COORDINATOR_LOAD_IN_PROGRESS. A transaction
left in PrepareCommit or PrepareAbort by a crash is completed after the replay.

Ending a transaction (EndTxn, a timeout, or fencing by a newer producer instance):
PrepareCommit/PrepareAbort is written and awaited (the HW covers it), then a background task
appends a COMMIT/ABORT marker to every partition of the transaction
(``PartitionLog.append_end_txn_marker``: all appended first, so one group-commit fsync per
partition covers them, the waits run side by side), waits for the HW to cover each, then writes
CompleteCommit/CompleteAbort (no fsync of its own, see ``_complete``). EndTxn is answered, as
Kafka does, once the Prepare record is durable; the markers are appended (not yet durable)
before the answer leaves. Meanwhile the
last stable offset of each partition keeps read_committed readers before the transaction, and
a crash leaves Prepare*, which the next start completes.

Kafka divergence: while the markers of an id are in flight Kafka answers its next
AddPartitionsToTxn (or EndTxn, InitProducerId) with CONCURRENT_TRANSACTIONS and the client
retries after a backoff; here the request waits for the completion (at most
``COMPLETION_WAIT_S``) and is then answered from the completed state, which saves the client
a retry round and its backoff. The next transaction's Ongoing record is appended only after
the markers are durable: a crash can never leave a later state on disk above lost markers.

Transaction version 2 (KIP-890 part 2; ``TransactionMetadata.client_txn_version`` 2): partitions
are added implicitly (Produce v12, TxnOffsetCommit v5 call ``add_partitions``), EndTxn v5 bumps
the epoch in the Prepare record (``_end``), its retries are told apart from fenced producers by
``TransactionMetadata.end_txn_producer_error``, and an exhausted epoch moves the id to a new
producer id at completion (Kafka's nextProducerId).

Coordinator epoch: a single node never changes leadership of ``__transaction_state``; markers
carry coordinator epoch 0.
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
    is_epoch_exhausted,
)
from tidelog.protocol.internal_topics.transaction_state import TxnLogValue

__all__ = ["COORDINATOR_EPOCH", "TransactionCoordinator", "TxnConfig"]

log = logging.getLogger("tidelog.txn")

COORDINATOR_EPOCH = 0
NO_PRODUCER_ID = -1
#: How long a request for an id waits for that id's markers before it is answered anyway
#: (then from the Prepare* state: CONCURRENT_TRANSACTIONS, as Kafka, and the client retries).
COMPLETION_WAIT_S = 10.0


class WriteRecord(Protocol):
    """Appends one record (value None = tombstone) for a transactional id at once (raising
    when that fails) and returns an awaitable that resolves once the HW covers it (or raises).
    ``lazy``: nobody waits for this record, so it needs no fsync of its own; the next record
    of its partition (or the broker's periodic flush) makes it durable."""

    def __call__(
        self, transactional_id: str, value: TxnLogValue | None, *, lazy: bool = False
    ) -> Awaitable[None]: ...


#: Writes the markers of a finished transaction to its partitions (and waits for them).
WriteMarkers = Callable[[TransactionMetadata, bool], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 7 * 24 * 3600 * 1000
    abort_interval_ms: int = 10_000
    expiration_interval_ms: int = 3_600_000


class TxnWriteError(Exception):
    """The transaction log could not take a record."""


class TransactionCoordinator:
    def __init__(
        self,
        config: TxnConfig,
        *,
        write_record: WriteRecord,
        write_markers: WriteMarkers,
        new_producer_id: Callable[[], Awaitable[int]],
        clock: Callable[[], int],
    ) -> None:
        self.config = config
        self._write_record = write_record
        self._write_markers = write_markers
        self._new_producer_id = new_producer_id
        self._clock = clock
        self.status = "loading"
        self.transactions: dict[str, TransactionMetadata] = {}
        self._by_producer: dict[int, TransactionMetadata] = {}
        self._tasks: set[asyncio.Task[object]] = set()
        #: The marker writing of each id whose EndTxn was answered before its markers.
        self._completions: dict[str, asyncio.Task[object]] = {}
        self._add_locks: dict[str, asyncio.Lock] = {}
        #: Produce v12+ (``broker/handlers/produce.py``): per producer id, the future of the
        #: last request adding partitions implicitly; later requests of the id wait for it.
        self.produce_gates: dict[int, asyncio.Future[None]] = {}

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

    def activate(self) -> None:
        """Start answering; complete transactions a crash left prepared."""
        self.status = "active"
        for md in list(self.transactions.values()):
            if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                log.info(
                    "completing %s of transactional id %r left by the last shutdown",
                    md.state.kafka_name,
                    md.transactional_id,
                )
                self._start_completion(md, md.state is TxnState.PREPARE_COMMIT)

    async def stop(self) -> None:
        self.status = "stopped"
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, coro: Awaitable[object]) -> asyncio.Task[object]:
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _settled(self, transactional_id: str) -> None:
        """Wait (bounded) for the markers of ``transactional_id`` still being written."""
        task = self._completions.get(transactional_id)
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=COMPLETION_WAIT_S)  # never cancels the task

    def inactive_error(self) -> ErrorCode | None:
        if self.status == "loading":
            return ErrorCode.coordinator_load_in_progress
        if self.status != "active":
            return ErrorCode.not_coordinator
        return None

    # -- persistence ---------------------------------------------------------------------------
    def _value(
        self,
        md: TransactionMetadata,
        state: TxnState,
        now: int,
        partitions: set[tuple[str, int]] | None = None,
        start_ms: int | None = None,
    ) -> TxnLogValue:
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

    async def _persist(
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
        value = self._value(md, state, now, partitions, start_ms)
        try:
            await self._write_record(md.transactional_id, value)
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

    # -- InitProducerId ------------------------------------------------------------------------
    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected_producer_id: int,
        expected_epoch: int,
    ) -> tuple[ErrorCode, int, int]:
        """Kafka's handleInitProducerId for a transactional id."""
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        error = self.inactive_error()
        if error is not None:
            return (error, *fail)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return (ErrorCode.invalid_transaction_timeout, *fail)
        expected = expected_producer_id >= 0 or expected_epoch >= 0
        await self._settled(transactional_id)
        md = self.transactions.get(transactional_id)
        if md is None:
            producer_id = await self._new_producer_id()
            md = self.transactions.setdefault(
                transactional_id,
                TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms),
            )
        if expected and not (
            md.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_id == md.producer_id
            or (
                expected_producer_id == md.previous_producer_id
                and is_epoch_exhausted(expected_epoch)
            )
        ):
            return (ErrorCode.producer_fenced, *fail)
        if md.pending is not None:
            return (ErrorCode.concurrent_transactions, *fail)
        state = md.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.DEAD):
            return (ErrorCode.concurrent_transactions, *fail)
        if state is TxnState.ONGOING:
            # A newer instance: fence the old epoch and abort its transaction; the client
            # retries on CONCURRENT_TRANSACTIONS and then gets the epoch after the abort.
            self._spawn(self._fence_and_abort(md, "a new producer instance called InitProducerId"))
            return (ErrorCode.concurrent_transactions, *fail)
        previous = (md.producer_id, md.producer_epoch, md.last_producer_epoch, md.txn_timeout_ms)
        if is_epoch_exhausted(md.producer_epoch) and (
            not expected or expected_epoch == md.producer_epoch
        ):
            md.previous_producer_id = md.producer_id if expected else -1
            md.producer_id = await self._new_producer_id()
            md.producer_epoch, md.last_producer_epoch = 0, NO_PRODUCER_EPOCH
        elif not expected or md.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
            md.last_producer_epoch = md.producer_epoch if expected else NO_PRODUCER_EPOCH
            md.producer_epoch += 1
        elif expected_epoch == md.last_producer_epoch:
            pass  # a retry of a bump whose answer was lost: the same epoch again
        else:
            return (ErrorCode.producer_fenced, *fail)
        md.txn_timeout_ms = timeout_ms
        md.partitions = set()
        md.txn_start_ms = -1
        error = await self._persist(md, TxnState.EMPTY)
        if error is not ErrorCode.none:
            md.producer_id, md.producer_epoch, md.last_producer_epoch, md.txn_timeout_ms = previous
            return (error, *fail)
        return ErrorCode.none, md.producer_id, md.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------
    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        error = self.inactive_error()
        if error is not None:
            return error, None
        if not transactional_id:
            return ErrorCode.invalid_request, None
        md = self.transactions.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if producer_epoch != md.producer_epoch:
            return ErrorCode.producer_fenced, None
        if md.pending is not None:
            return ErrorCode.concurrent_transactions, None
        return ErrorCode.none, md

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        client_txn_version: int = 0,
    ) -> ErrorCode:
        """Kafka's handleAddPartitionsToTransaction (also AddOffsetsToTxn's partition, and the
        implicit add of transaction version 2: Produce v12, TxnOffsetCommit v5).

        Kafka divergence: adds for one id run one after another (a lock per id), so pipelined
        implicit adds wait for each other instead of answering CONCURRENT_TRANSACTIONS (which
        Kafka answers while a write of the id is pending, costing the producer a retry)."""
        await self._settled(transactional_id)
        lock = self._add_locks.get(transactional_id)
        if lock is None:
            lock = self._add_locks[transactional_id] = asyncio.Lock()
        try:
            async with lock:
                return await self._add_partitions(
                    transactional_id, producer_id, producer_epoch, partitions, client_txn_version
                )
        finally:
            if not lock.locked() and self._add_locks.get(transactional_id) is lock:
                del self._add_locks[transactional_id]

    async def _add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        client_txn_version: int,
    ) -> ErrorCode:
        error, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return error
        if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        if md.state in (TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            return ErrorCode.invalid_txn_state
        wanted = set(partitions)
        if md.state is TxnState.ONGOING and wanted <= md.partitions:
            return ErrorCode.none
        previous_version = md.client_txn_version
        md.client_txn_version = client_txn_version
        # The produce path sees a partition only once the record naming it is durable.
        if md.state is TxnState.ONGOING:
            error = await self._persist(md, TxnState.ONGOING, md.partitions | wanted)
        else:
            error = await self._persist(md, TxnState.ONGOING, wanted, self._clock())
        if error is not ErrorCode.none:
            md.client_txn_version = previous_version
        return error

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """Kafka's handleVerifyPartitionsInTransaction (AddPartitionsToTxn v4+ ``verify_only``):
        per partition NONE when the open transaction holds it, else INVALID_TXN_STATE;
        a producer check failure applies to every partition. Nothing is written."""
        wanted = list(partitions)
        error, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is not None and md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            error, md = ErrorCode.concurrent_transactions, None
        if md is None:
            return dict.fromkeys(wanted, error)
        return {
            tp: ErrorCode.none
            if md.state is TxnState.ONGOING and tp in md.partitions
            else ErrorCode.invalid_txn_state
            for tp in wanted
        }

    def by_producer_id(self, producer_id: int) -> TransactionMetadata | None:
        """The transactional id holding ``producer_id`` (an index rebuilt when stale)."""
        md = self._by_producer.get(producer_id)
        if md is not None and md.producer_id == producer_id and md.state is not TxnState.DEAD:
            return md
        self._by_producer = {m.producer_id: m for m in self.transactions.values()}
        return self._by_producer.get(producer_id)

    def partition_in_transaction(
        self, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> bool:
        """The produce path's check (Kafka's transaction verification)."""
        md = self.by_producer_id(producer_id)
        return (
            md is not None
            and md.producer_epoch == producer_epoch
            and md.state is TxnState.ONGOING
            and (topic, partition) in md.partitions
        )

    def check_txn_offset_commit(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets_partition: tuple[str, int] | None = None,
    ) -> ErrorCode:
        """TxnOffsetCommit's producer check: a fenced or unknown producer is refused, and so is
        one whose transaction does not hold the group's ``__consumer_offsets`` partition
        (AddOffsetsToTxn first: the commit marker must reach it)."""
        error = self.inactive_error()
        if error is not None:
            return error
        md = self.transactions.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if producer_epoch < md.producer_epoch:
            return ErrorCode.producer_fenced
        if md.state is not TxnState.ONGOING:
            return ErrorCode.invalid_txn_state
        if offsets_partition is not None and offsets_partition not in md.partitions:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    # -- EndTxn --------------------------------------------------------------------------------
    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_txn_version: int = 0,
    ) -> tuple[ErrorCode, int, int]:
        """Kafka's handleEndTransaction for a client's EndTxn: the error, and the producer id
        and epoch the producer goes on with (EndTxn v5 answers them; -1, -1 on an error).

        Transaction version 2 (EndTxn v5): the commit/abort bumps the epoch; a retry of an
        EndTxn whose answer was lost comes with the epoch before the bump and gets the same
        answer (Kafka's retryOnEpochBump / retryOnOverflow)."""
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        await self._settled(transactional_id)
        error = self.inactive_error()
        if error is not None:
            return (error, *fail)
        if not transactional_id:
            return (ErrorCode.invalid_request, *fail)
        md = self.transactions.get(transactional_id)
        if md is None:
            return (ErrorCode.invalid_producer_id_mapping, *fail)
        state = md.state
        refused = md.end_txn_producer_error(producer_id, producer_epoch)
        if refused is not None:
            return (refused, *fail)
        if md.pending is not None:
            return (ErrorCode.concurrent_transactions, *fail)
        if state is TxnState.ONGOING:
            error = await self._end(md, commit, bump=client_txn_version >= 2)
            if error is not ErrorCode.none:
                return (error, *fail)
            return self._answer(md)
        if state is TxnState.COMPLETE_COMMIT:
            return self._answer(md) if commit else (ErrorCode.invalid_txn_state, *fail)
        if state is TxnState.COMPLETE_ABORT:
            return (ErrorCode.invalid_txn_state, *fail) if commit else self._answer(md)
        if state is TxnState.PREPARE_COMMIT:
            error = ErrorCode.concurrent_transactions if commit else ErrorCode.invalid_txn_state
        elif state is TxnState.PREPARE_ABORT:
            error = ErrorCode.invalid_txn_state if commit else ErrorCode.concurrent_transactions
        else:
            error = ErrorCode.invalid_txn_state  # Empty, Dead, PrepareEpochFence
        return (error, *fail)

    @staticmethod
    def _answer(md: TransactionMetadata) -> tuple[ErrorCode, int, int]:
        """The producer id and epoch the producer continues with after its EndTxn."""
        if md.next_producer_id >= 0:  # the epoch ran out: a new producer id, epoch 0
            return ErrorCode.none, md.next_producer_id, 0
        return ErrorCode.none, md.producer_id, md.producer_epoch

    async def _end(self, md: TransactionMetadata, commit: bool, bump: bool = False) -> ErrorCode:
        """Write PrepareCommit/PrepareAbort (with the epoch bumped by one for transaction
        version 2) and start the markers."""
        prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        previous = (md.producer_epoch, md.last_producer_epoch, md.client_txn_version)
        if bump:
            md.client_txn_version = 2
            if is_epoch_exhausted(md.producer_epoch):
                md.next_producer_id = await self._new_producer_id()
            md.last_producer_epoch = md.producer_epoch
            md.producer_epoch += 1
        error = await self._persist(md, prepare)
        if error is not ErrorCode.none:
            md.producer_epoch, md.last_producer_epoch, md.client_txn_version = previous
            md.next_producer_id = -1
            return error
        # The outcome is decided and durable: answer now, write the markers in the background.
        self._start_completion(md, commit)
        # One turn of the loop: the task's first step appends every marker (and sets
        # ``pending``) before this answer leaves.
        await asyncio.sleep(0)
        return ErrorCode.none

    def _start_completion(self, md: TransactionMetadata, commit: bool) -> None:
        """``_complete`` as a task that later requests for the id wait for (``_settled``)."""
        task = self._spawn(self._complete(md, commit))
        transactional_id = md.transactional_id
        self._completions[transactional_id] = task

        def forget(done: asyncio.Task[object]) -> None:
            if self._completions.get(transactional_id) is done:
                del self._completions[transactional_id]

        task.add_done_callback(forget)

    async def _complete(self, md: TransactionMetadata, commit: bool) -> ErrorCode:
        """Markers to every partition, then CompleteCommit/CompleteAbort."""
        md.pending = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        try:
            await self._write_markers(md, commit)
        except Exception as exc:
            # The Prepare state is durable: a retry (or the next start) completes it.
            log.warning("markers of %r not written: %s", md.transactional_id, exc)
            md.pending = None
            self._spawn(self._retry_complete(md, commit))
            return ErrorCode.none
        md.pending = None
        final = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        partitions = md.partitions
        md.partitions = set()
        identity = (md.producer_id, md.producer_epoch, md.last_producer_epoch)
        previous_id, next_id = md.previous_producer_id, md.next_producer_id
        if md.next_producer_id >= 0:
            # Transaction version 2 ran out of epochs: the markers carried the old producer id;
            # the producer goes on with the new one (Kafka's prepareComplete).
            md.previous_producer_id, md.producer_id = md.producer_id, md.next_producer_id
            md.producer_epoch, md.last_producer_epoch, md.next_producer_id = (
                0,
                NO_PRODUCER_EPOCH,
                -1,
            )
        now = self._clock()
        try:
            waiter = self._write_record(md.transactional_id, self._value(md, final, now), lazy=True)
        except Exception as exc:
            log.warning("writing %s of %r failed: %s", final.kafka_name, md.transactional_id, exc)
            md.partitions = partitions
            md.producer_id, md.producer_epoch, md.last_producer_epoch = identity
            md.previous_producer_id, md.next_producer_id = previous_id, next_id
            self._spawn(self._retry_complete(md, commit))
            return ErrorCode.none
        # The Complete record need not be durable before the next transition: the markers are,
        # and any later record of this id is appended after it (one partition, in order), so
        # its HW wait covers this one too. So it gets no fsync of its own (``lazy``): the next
        # record of the partition (typically the producer's next Ongoing) or the periodic
        # flush covers it, which keeps one fsync off the next AddPartitionsToTxn. A crash
        # before it is durable leaves Prepare*, which the next start completes again (markers
        # written twice are harmless).
        md.state = final
        md.txn_last_update_ms = now
        self._spawn(self._log_failure(waiter, md.transactional_id))
        return ErrorCode.none

    @staticmethod
    async def _log_failure(waiter: Awaitable[None], transactional_id: str) -> None:
        try:
            await waiter
        except Exception as exc:
            log.warning("a record of %r did not become durable: %s", transactional_id, exc)

    async def _retry_complete(self, md: TransactionMetadata, commit: bool) -> None:
        await asyncio.sleep(1.0)
        if self.status == "active" and md.state in (
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
        ):
            await self._complete(md, commit)

    async def _fence_and_abort(self, md: TransactionMetadata, why: str) -> None:
        """Bump the epoch (fencing the producer) and abort its open transaction."""
        if md.pending is not None or md.state is not TxnState.ONGOING:
            return
        if is_epoch_exhausted(md.producer_epoch):
            log.warning("epoch of %r is exhausted; aborting without a bump", md.transactional_id)
        else:
            md.producer_epoch += 1
        log.info("aborting the transaction of %r: %s", md.transactional_id, why)
        await self._end(md, False)

    # -- periodic work -------------------------------------------------------------------------
    def abort_timed_out(self) -> int:
        """Abort every Ongoing transaction older than its timeout; returns how many."""
        if self.status != "active":
            return 0
        now = self._clock()
        count = 0
        for md in list(self.transactions.values()):
            if (
                md.state is TxnState.ONGOING
                and md.pending is None
                and md.txn_start_ms + md.txn_timeout_ms < now
            ):
                count += 1
                self._spawn(self._fence_and_abort(md, "transaction timed out"))
        return count

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
                await self._write_record(md.transactional_id, None)
            except Exception as exc:
                log.warning("expiring %r failed: %s", md.transactional_id, exc)
                md.pending = None
                continue
            md.state = TxnState.DEAD
            md.pending = None
            if self.transactions.get(md.transactional_id) is md:
                del self.transactions[md.transactional_id]
        return len(expired)
