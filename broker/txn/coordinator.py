"""The transaction coordinator: Kafka's TransactionCoordinator on one node.

The request side of transactions: InitProducerId, AddPartitionsToTxn/AddOffsetsToTxn,
EndTxn, the produce path's checks, the timeout abort. It composes the two other parts Kafka
has: ``TransactionStateManager`` (``broker/txn/state_manager.py``: every id's metadata, its
records in ``__transaction_state``, the replay at start, id expiration) and
``TransactionMarkerChannelManager`` (``broker/txn/marker_channel.py``: the markers of a
decided transaction, then its Complete record).

Ending a transaction (EndTxn, a timeout, or fencing by a newer producer instance):
PrepareCommit/PrepareAbort is written and awaited (the HW covers it), then every marker is
appended in the same turn of the loop and EndTxn is answered, as Kafka does, once the Prepare
record is durable (the markers are in the logs, not yet durable, before the answer leaves).
Meanwhile the last stable offset of each partition keeps read_committed readers before the
transaction, and a crash leaves Prepare*, which the next start completes.

Kafka divergence: while the markers of an id are in flight Kafka answers its next
AddPartitionsToTxn (or EndTxn, InitProducerId) with CONCURRENT_TRANSACTIONS and the client
retries after a backoff; here the request waits for the completion (at most
``COMPLETION_WAIT_S``) and is then answered from the completed state.

Transaction version 2 (KIP-890 part 2; ``TransactionMetadata.client_txn_version`` 2): partitions
are added implicitly (Produce v12, TxnOffsetCommit v5 call ``add_partitions``), EndTxn v5 bumps
the epoch in the Prepare record (``_end``), what it answers in each state for each epoch is the
table ``END_TXN`` of ``broker/txn/metadata.py`` (``END_TXN_TV1`` for older clients), and an
exhausted epoch moves the id to a new producer id at completion (Kafka's nextProducerId).

Every change of an id is prepared (``TransactionMetadata.prepare_transition``, Kafka's
validPreviousStates checked), written to ``__transaction_state`` and then replayed into memory by
the function that loads the log at start (``TransactionStateManager.replay``).

Coordinator epoch: a single node never changes leadership of ``__transaction_state``; markers
carry coordinator epoch 0.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from kio.schema.errors import ErrorCode

from tidelog.broker.txn.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from tidelog.broker.txn.marker_channel import (
    COMPLETION_WAIT_S,
    TransactionMarkerChannelManager,
    WriteMarkers,
)
from tidelog.broker.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TRANSACTION_VERSION,
    EndTxnAction,
    IllegalTransition,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    end_txn_outcome,
    is_epoch_exhausted,
)
from tidelog.broker.txn.state_manager import TransactionStateManager, TxnConfig, WriteRecord
from tidelog.protocol.internal_topics.transaction_state import TxnLogValue

__all__ = ["COORDINATOR_EPOCH", "AbortMarkers", "TransactionCoordinator"]

log = logging.getLogger("tidelog.txn")

COORDINATOR_EPOCH = 0

TopicPartition = tuple[str, int]
#: Appends an ABORT marker of ``(producer id, epoch)`` to each partition now (a hanging
#: transaction's abort; ``broker/txn/service.py``); the marker's durability is not awaited.
AbortMarkers = Callable[[int, int, Iterable[TopicPartition]], None]
_PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


class TransactionCoordinator:
    def __init__(
        self,
        config: TxnConfig,
        *,
        write_record: WriteRecord,
        write_markers: WriteMarkers,
        new_producer_id: Callable[[], Awaitable[int]],
        clock: Callable[[], int],
        abort_markers: AbortMarkers | None = None,
    ) -> None:
        self.config = config
        self._new_producer_id = new_producer_id
        self._abort_markers = abort_markers
        self._clock = clock
        self.state = TransactionStateManager(config, write_record=write_record, clock=clock)
        self.markers = TransactionMarkerChannelManager(
            self.state, write_markers=write_markers, clock=clock
        )
        self._add_locks: dict[str, asyncio.Lock] = {}
        #: Per transactional id, a write its next request waits for (``settled``): an
        #: Ongoing record appended ahead of the records it covers (``add_partitions`` with
        #: ``early``), or the fence after a hanging transaction's abort (``abort_hanging``).
        self._writes: dict[str, asyncio.Task[object]] = {}
        #: Per transactional id whose early Ongoing record is not durable yet: the producer
        #: id, epoch and partitions it holds (the produce path may append to them meanwhile).
        self._early: dict[str, tuple[int, int, frozenset[TopicPartition]]] = {}
        #: What Produce asks: transaction verification and implicit adds (v12+).
        self.add_partitions_manager = AddPartitionsToTxnManager(self)

    # -- the state manager's, for the callers ---------------------------------------------------
    @property
    def status(self) -> str:
        return self.state.status

    @property
    def transactions(self) -> dict[str, TransactionMetadata]:
        return self.state.transactions

    def inactive_error(self) -> ErrorCode | None:
        return self.state.inactive_error()

    def by_producer_id(self, producer_id: int) -> TransactionMetadata | None:
        """The transactional id holding ``producer_id``."""
        return self.state.by_producer_id(producer_id)

    def load(self, records: Iterable[tuple[str, TxnLogValue | None]]) -> None:
        """Replay ``__transaction_state`` records in log order."""
        self.state.load(records)

    async def expire_transactional_ids(self) -> int:
        """Remove ids idle for ``transactional.id.expiration.ms`` (a tombstone each)."""
        return await self.state.expire_transactional_ids()

    def activate(self) -> None:
        """Start answering; complete transactions a crash left prepared."""
        self.state.status = "active"
        for md in list(self.transactions.values()):
            if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                log.info(
                    "completing %s of transactional id %r left by the last shutdown",
                    md.state.kafka_name,
                    md.transactional_id,
                )
                self.markers.start_completion(md, md.state is TxnState.PREPARE_COMMIT)

    async def stop(self) -> None:
        self.state.status = "stopped"
        await self.markers.stop()

    # -- InitProducerId ------------------------------------------------------------------------
    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected_producer_id: int,
        expected_epoch: int,
    ) -> tuple[ErrorCode, int, int]:
        """Kafka's handleInitProducerId for a transactional id (``expected_*`` -1: none given).

        Empty/Complete*: the epoch bumped (a new producer id once it is exhausted); with the
        producer's id and epoch given (KIP-360), its current epoch gets the next one and the
        epoch before (the retry of a bump whose answer was lost) the same one again.
        Ongoing: an older instance's transaction is aborted with its epoch fenced, and the
        caller told CONCURRENT_TRANSACTIONS (it retries). Prepare*: CONCURRENT_TRANSACTIONS."""
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        error = self.inactive_error()
        if error is not None:
            return (error, *fail)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return (ErrorCode.invalid_transaction_timeout, *fail)
        expected = expected_producer_id >= 0 or expected_epoch >= 0
        await self.settled(transactional_id)
        md = self.transactions.get(transactional_id)
        if md is None:
            producer_id = await self._new_producer_id()
            md = self.transactions.setdefault(
                transactional_id,
                TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms),
            )
        if md.pending is not None:
            return (ErrorCode.concurrent_transactions, *fail)
        if expected and not (
            md.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_id == md.producer_id
            or (
                expected_producer_id == md.previous_producer_id
                and is_epoch_exhausted(expected_epoch)
            )
        ):
            return (ErrorCode.producer_fenced, *fail)
        state = md.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return (ErrorCode.concurrent_transactions, *fail)
        if state is TxnState.ONGOING:
            # A newer instance: fence the old epoch and abort its transaction; the client
            # retries on CONCURRENT_TRANSACTIONS and then gets the epoch after the abort.
            error = await self._fence_and_abort(md, "a new producer instance called InitProducerId")
            return (
                error if error is not ErrorCode.none else ErrorCode.concurrent_transactions,
                *fail,
            )
        if state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            # Dead / PrepareEpochFence are never a stored state a request sees (Kafka fails).
            return (ErrorCode.invalid_txn_state, *fail)
        now = self._clock()

        def empty(**changes: int) -> TxnTransit:
            """Empty with a fresh transaction (Kafka's prepareIncrementProducerEpoch and
            prepareProducerIdRotation)."""
            assert md is not None
            return md.prepare_transition(
                TxnState.EMPTY,
                now,
                txn_timeout_ms=timeout_ms,
                partitions=set(),
                start_ms=-1,
                **changes,
            )

        try:
            if is_epoch_exhausted(md.producer_epoch) and (
                not expected or expected_epoch == md.producer_epoch
            ):
                transit = empty(
                    producer_id=await self._new_producer_id(),
                    producer_epoch=0,
                    last_producer_epoch=md.producer_epoch if expected else NO_PRODUCER_EPOCH,
                )
            elif not expected or md.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
                if is_epoch_exhausted(md.producer_epoch):
                    # Kafka divergence: Kafka fails with an unexpected error here (an exhausted
                    # epoch, an expected epoch that is not it); an older epoch is fenced here.
                    return (ErrorCode.producer_fenced, *fail)
                transit = empty(
                    producer_epoch=md.producer_epoch + 1,
                    last_producer_epoch=md.producer_epoch if expected else NO_PRODUCER_EPOCH,
                )
            elif expected_epoch == md.last_producer_epoch:
                # the retry of a bump whose answer was lost: the same epoch again
                transit = empty()
            else:
                return (ErrorCode.producer_fenced, *fail)
        except IllegalTransition:  # a write of the id began meanwhile
            return (ErrorCode.concurrent_transactions, *fail)
        error = await self.state.persist(md, transit)
        if error is not ErrorCode.none:
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
        *,
        early: bool = False,
    ) -> ErrorCode:
        """Kafka's handleAddPartitionsToTransaction (also AddOffsetsToTxn's partition, and the
        implicit add of transaction version 2: Produce v12, TxnOffsetCommit v5).

        ``early`` (Produce v12's implicit add): answer once the Ongoing record is appended,
        not once it is durable; the produce path appends the records meanwhile, and both
        fsyncs run side by side (see ``_early_durable`` for what a crash leaves).

        Kafka divergence: adds for one id run one after another (a lock per id), so pipelined
        implicit adds wait for each other instead of answering CONCURRENT_TRANSACTIONS (which
        Kafka answers while a write of the id is pending, costing the producer a retry)."""
        await self.settled(transactional_id)
        lock = self._add_locks.get(transactional_id)
        if lock is None:
            lock = self._add_locks[transactional_id] = asyncio.Lock()
        try:
            async with lock:
                await self.settled(transactional_id)  # an early write started meanwhile
                return await self._add_partitions(
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    partitions,
                    client_txn_version,
                    early,
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
        early: bool,
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
        # Kafka's prepareAddPartitions: a new transaction starts now; the client's version is
        # the transaction's. The produce path sees a partition once the record naming it is
        # durable.
        now = self._clock()
        try:
            transit = md.prepare_transition(
                TxnState.ONGOING,
                now,
                partitions=md.partitions | wanted,
                start_ms=md.txn_start_ms if md.state is TxnState.ONGOING else now,
                client_txn_version=client_txn_version,
            )
        except IllegalTransition:
            return ErrorCode.concurrent_transactions
        if not early:
            return await self.state.persist(md, transit)
        # Its fsync starts after the records' (appended by the caller in this turn of the
        # loop): the Produce answer waits for theirs, EndTxn for this one.
        durable = self.state.append(md, transit, defer_flush=True)
        if isinstance(durable, ErrorCode):
            return durable
        held = frozenset(md.partitions | wanted)
        self._early[transactional_id] = (md.producer_id, md.producer_epoch, held)
        self._track(
            transactional_id,
            self._early_durable(md, transit, durable, wanted - md.partitions),
        )
        return ErrorCode.none

    def _track(self, transactional_id: str, coro: Awaitable[object]) -> None:
        """A write the id's next request waits for (``settled``)."""
        task = self.markers.spawn(coro)
        self._writes[transactional_id] = task

        def forget(done: asyncio.Task[object]) -> None:
            if self._writes.get(transactional_id) is done:
                del self._writes[transactional_id]

        task.add_done_callback(forget)

    async def settled(self, transactional_id: str) -> None:
        """Wait (bounded) for the id's markers in flight, then for its tracked write."""
        await self.markers.settled(transactional_id)
        task = self._writes.get(transactional_id)
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=COMPLETION_WAIT_S)  # never cancels the task

    async def _early_durable(
        self,
        md: TransactionMetadata,
        transit: TxnTransit,
        durable: Awaitable[None],
        added: set[TopicPartition],
    ) -> None:
        """Wait for an early Ongoing record; replay it once durable.

        Until then the id is pending (EndTxn, InitProducerId and further adds wait for this:
        no transaction commits before its Ongoing record is durable), while Produce may
        append to its partitions and be answered once its records are durable. If the record
        fails, or a crash loses it (a power cut may keep the records, written back by the
        kernel, and lose it), the records are a hanging transaction: here, and at the next
        start (``is_hanging``, asked by ``TransactionService.start``), they are aborted and
        the producer's epoch fenced (``abort_hanging``)."""
        transactional_id = md.transactional_id
        try:
            error = await self.state.await_durable(md, transit, durable)
        finally:
            self._early.pop(transactional_id, None)
        if error is not ErrorCode.none and added:
            self.abort_hanging(
                md.producer_id, md.producer_epoch, added, "its Ongoing record was not written"
            )

    # -- hanging transactions (KIP-664's abort, done by the coordinator) -------------------
    def holds_open_transaction(
        self, producer_id: int, producer_epoch: int, partition: TopicPartition
    ) -> bool:
        """Whether an open transaction of ``(producer_id, producer_epoch)`` found in a
        partition's producer state is one the coordinator knows: an Ongoing transaction
        holding the partition at that epoch, or a prepared one (its markers still to come)
        whose records have that epoch. Anything else hangs: nothing would ever end it."""
        md = self.by_producer_id(producer_id)
        if md is None or partition not in md.partitions:
            return False
        epoch = md.producer_epoch
        if md.state is TxnState.ONGOING:
            return producer_epoch == epoch
        if md.state in _PREPARED:
            # Transaction version 2: the Prepare record carries the bumped epoch, the
            # records the one before (an open transaction at the bumped epoch began after
            # the markers); no bump at Short.MAX_VALUE.
            return producer_epoch < epoch or (
                producer_epoch == epoch and (not md.bumps_epoch or epoch >= MAX_EPOCH)
            )
        return False

    def _holder(self, producer_id: int) -> TransactionMetadata | None:
        """The id holding ``producer_id``, or moving to it (``next_producer_id``: transaction
        version 2 ran out of epochs and the completion has not replaced the id yet)."""
        md = self.by_producer_id(producer_id)
        if md is not None:
            return md
        return next(
            (m for m in self.transactions.values() if m.next_producer_id == producer_id), None
        )

    def is_hanging(self, producer_id: int, producer_epoch: int, partition: TopicPartition) -> bool:
        """Whether the start must abort an open transaction found in a partition: its producer
        id belongs to a transactional id here, which does not hold it
        (``holds_open_transaction``). A producer id no transactional id knows (its records
        outlived their ``__transaction_state`` records) is left to an operator, as in Kafka
        (``tidelog transactions find-hanging`` / ``abort``)."""
        return self._holder(producer_id) is not None and not self.holds_open_transaction(
            producer_id, producer_epoch, partition
        )

    def abort_hanging(
        self, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition], why: str
    ) -> None:
        """Abort a transaction open in ``partitions`` that the coordinator does not hold (an
        ABORT marker each, so the last stable offset moves), then fence the producer's epoch
        so that a retry of its records cannot be taken for a duplicate of the aborted ones
        (its next request at that epoch is refused, and it must abort)."""
        partitions = sorted(partitions)
        for topic, partition in partitions:
            log.warning(
                "aborting the hanging transaction of producer id %d (epoch %d) in %s-%d: %s",
                producer_id,
                producer_epoch,
                topic,
                partition,
                why,
            )
        if self._abort_markers is not None:
            self._abort_markers(producer_id, producer_epoch, partitions)
        md = self._holder(producer_id)
        if md is not None:
            self._track(md.transactional_id, self._fence(md, producer_id, producer_epoch))

    async def _fence(self, md: TransactionMetadata, producer_id: int, epoch: int) -> None:
        """Move ``md`` past ``(producer_id, epoch)`` with the ordinary transitions: an open
        transaction is aborted (the epoch bumped), an idle id gets Empty at the next epoch (a
        new producer id once the epoch is exhausted); a prepared one is completed first (which
        may move it to ``producer_id``)."""
        await self.markers.settled(md.transactional_id)
        if md.producer_id != producer_id or md.producer_epoch != epoch or md.pending is not None:
            return
        if md.state is TxnState.ONGOING:
            await self._fence_and_abort(md, "its producer's hanging transaction was aborted")
            return
        if md.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            return
        exhausted = is_epoch_exhausted(epoch)
        new_id = await self._new_producer_id() if exhausted else md.producer_id
        try:
            transit = md.prepare_transition(
                TxnState.EMPTY,
                self._clock(),
                producer_id=new_id,
                producer_epoch=0 if exhausted else epoch + 1,
                partitions=set(),
                start_ms=-1,
            )
        except IllegalTransition:
            return
        if await self.state.persist(md, transit) is ErrorCode.none:
            log.warning(
                "fenced producer id %d epoch %d of transactional id %r",
                producer_id,
                epoch,
                md.transactional_id,
            )

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

    def partition_in_transaction(
        self, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> bool:
        """The produce path's check (Kafka's transaction verification): the open
        transaction holds the partition, or an early Ongoing record in flight does."""
        md = self.by_producer_id(producer_id)
        if md is None or md.producer_epoch != producer_epoch:
            return False
        if md.state is TxnState.ONGOING and (topic, partition) in md.partitions:
            return True
        early = self._early.get(md.transactional_id)
        return (
            early is not None
            and early[0] == producer_id
            and early[1] == producer_epoch
            and (topic, partition) in early[2]
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

        What each (state, commit/abort, epoch) gets is the table of ``broker/txn/metadata.py``
        (``END_TXN`` for transaction version 2, EndTxn v5+; ``END_TXN_TV1`` before): the
        producer id is checked first (INVALID_PRODUCER_ID_MAPPING), then the epoch
        (PRODUCER_FENCED), then a pending write (CONCURRENT_TRANSACTIONS), then the state."""
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        await self.settled(transactional_id)
        error = self.inactive_error()
        if error is not None:
            return (error, *fail)
        if not transactional_id:
            return (ErrorCode.invalid_request, *fail)
        md = self.transactions.get(transactional_id)
        if md is None:
            return (ErrorCode.invalid_producer_id_mapping, *fail)
        tv2 = client_txn_version >= 2
        if md.producer_id != producer_id and not (
            tv2 and md.retry_on_overflow(producer_id, producer_epoch)
        ):
            return (ErrorCode.invalid_producer_id_mapping, *fail)
        outcome = end_txn_outcome(
            md.state, commit, md.epoch_match(producer_id, producer_epoch), bumps_epoch=tv2
        )
        if outcome is ErrorCode.producer_fenced:
            return (outcome, *fail)
        if md.pending is not None:
            return (ErrorCode.concurrent_transactions, *fail)
        if outcome is EndTxnAction.DONE:
            return ErrorCode.none, md.producer_id, md.producer_epoch
        if isinstance(outcome, ErrorCode):
            return (outcome, *fail)
        error = await self._end(md, commit, client_txn_version=2 if tv2 else 0, from_client=True)
        if error is not ErrorCode.none:
            return (error, *fail)
        if md.next_producer_id >= 0:
            # Kafka divergence: the epoch ran out; Kafka answers the old producer id with the
            # epoch Short.MAX_VALUE, tidelog the producer id and epoch the producer goes on
            # with once the transaction completes (the new producer id, epoch 0).
            return ErrorCode.none, md.next_producer_id, 0
        return ErrorCode.none, md.producer_id, md.producer_epoch

    async def _end(
        self,
        md: TransactionMetadata,
        commit: bool,
        *,
        client_txn_version: int,
        from_client: bool,
    ) -> ErrorCode:
        """Write PrepareCommit/PrepareAbort (Kafka's prepareAbortOrCommit; transaction version
        2 bumps the epoch by one) and start the markers. Only a client's EndTxn moves an
        exhausted epoch to a new producer id (``from_client``)."""
        prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        base_epoch, last_epoch = md.producer_epoch, md.last_producer_epoch
        next_producer_id = NO_PRODUCER_ID
        if client_txn_version >= 2:
            if from_client and is_epoch_exhausted(md.producer_epoch):
                next_producer_id = await self._new_producer_id()
            epoch = base_epoch if base_epoch >= MAX_EPOCH and not commit else base_epoch + 1
            last_epoch = base_epoch
        else:
            epoch = base_epoch
        now = self._clock()
        # With transaction version 2 a transaction may be aborted with nothing added: it starts
        # (and ends) now.
        nothing_added = md.state is not TxnState.ONGOING
        try:
            transit = md.prepare_transition(
                prepare,
                now,
                producer_epoch=epoch,
                last_producer_epoch=last_epoch,
                next_producer_id=next_producer_id,
                start_ms=now if nothing_added else md.txn_start_ms,
                client_txn_version=client_txn_version,
            )
        except IllegalTransition:
            return ErrorCode.concurrent_transactions
        error = await self.state.persist(md, transit)
        if error is not ErrorCode.none:
            return error
        # The outcome is decided and durable: answer now, write the markers in the background.
        # Every marker is appended now, in this turn of the loop: the answer leaves right
        # after, with the markers already in the logs.
        self.markers.start_completion(md, commit)
        return ErrorCode.none

    async def _fence_and_abort(self, md: TransactionMetadata, why: str) -> ErrorCode:
        """Abort an open transaction that is not the client's to end (a newer instance called
        InitProducerId, or it timed out): Kafka's PrepareEpochFence then PrepareAbort, with
        the broker's transaction version. The epoch is bumped by one (Kafka 4.4 answers so):
        the producer is fenced, and its own abort at the old epoch reads as a retry."""
        if md.pending is not None:
            return ErrorCode.concurrent_transactions
        if md.state is not TxnState.ONGOING:
            return ErrorCode.none
        if md.producer_epoch >= MAX_EPOCH:
            log.error(
                "epoch of %r is Short.MAX_VALUE; aborting without a bump", md.transactional_id
            )
        log.info("aborting the transaction of %r: %s", md.transactional_id, why)
        return await self._end(md, False, client_txn_version=TRANSACTION_VERSION, from_client=False)

    # -- periodic work -------------------------------------------------------------------------
    def abort_timed_out(self) -> int:
        """Abort every Ongoing transaction older than its timeout; returns how many."""
        if self.status != "active":
            return 0
        timed_out = self.state.timed_out()
        for md in timed_out:
            self.markers.spawn(self._fence_and_abort(md, "the transaction timed out"))
        return len(timed_out)
