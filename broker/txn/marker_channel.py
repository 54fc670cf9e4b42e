"""Completing decided transactions: Kafka's TransactionMarkerChannelManager on one node.

Once PrepareCommit/PrepareAbort is durable (``TransactionCoordinator._end``, or the replay of
a transaction a crash left prepared), ``start_completion`` appends a COMMIT/ABORT marker to
every partition of the transaction at once, in the caller's turn of the loop
(``WriteMarkers``: ``PartitionLog.append_end_txn_marker`` for each, all appended before the
first wait, so one group-commit fsync per partition covers them, side by side). EndTxn's answer
therefore leaves after the markers are in the logs (not yet durable), with no loop turn between
the Prepare record's fsync and the answer. A task then waits until the markers are durable and
writes CompleteCommit/CompleteAbort (``lazy``: no fsync of its own, see ``_complete``).

Requests for an id whose markers are in flight wait for them (``settled``, at most
``COMPLETION_WAIT_S``). Kafka divergence: Kafka answers them CONCURRENT_TRANSACTIONS and the
client retries after a backoff; waiting saves the client that retry round and its backoff.
The next transaction's Ongoing record is appended only after the markers are durable, so a
crash can never leave a later state on disk above lost markers.

A failure (a marker refused, a flush failing) leaves the Prepare state, which is durable: the
completion is tried again after ``RETRY_S`` (and by the next start).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kio.schema.errors import ErrorCode

from tidelog.broker.txn.metadata import TransactionMetadata, TxnState
from tidelog.broker.txn.state_manager import TransactionStateManager

__all__ = ["COMPLETION_WAIT_S", "TransactionMarkerChannelManager", "WriteMarkers"]

log = logging.getLogger("tidelog.txn")

#: How long a request for an id waits for that id's markers before it is answered anyway
#: (then from the Prepare* state: CONCURRENT_TRANSACTIONS, as Kafka, and the client retries).
COMPLETION_WAIT_S = 10.0
#: How long a failed completion waits before it is tried again.
RETRY_S = 1.0

#: Appends the markers of a decided transaction to its partitions at once (raising when that
#: fails) and returns an awaitable that resolves once every one of them is durable.
WriteMarkers = Callable[[TransactionMetadata, bool], Awaitable[None]]


class TransactionMarkerChannelManager:
    """Markers, then the Complete record, for each decided transaction."""

    def __init__(
        self,
        state: TransactionStateManager,
        *,
        write_markers: WriteMarkers,
        clock: Callable[[], int],
    ) -> None:
        self._state = state
        self._write_markers = write_markers
        self._clock = clock
        self._tasks: set[asyncio.Task[object]] = set()
        #: The marker writing of each id whose EndTxn was answered before its markers.
        self._completions: dict[str, asyncio.Task[object]] = {}

    def spawn(self, coro: Awaitable[object]) -> asyncio.Task[object]:
        """A task the manager cancels at ``stop``."""
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def settled(self, transactional_id: str) -> None:
        """Wait (bounded) for the markers of ``transactional_id`` still being written."""
        task = self._completions.get(transactional_id)
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=COMPLETION_WAIT_S)  # never cancels the task

    def start_completion(self, md: TransactionMetadata, commit: bool) -> None:
        """Append every marker now; a task waits for them and writes the Complete record.
        Later requests for the id wait for that task (``settled``); meanwhile the state is
        Prepare*, which answers them as Kafka does (nothing is pending: Kafka marks the Complete
        transition pending only while its record is written)."""
        try:
            durable = self._write_markers(md, commit)
        except Exception as exc:
            self._failed(md, commit, exc)
            return
        task = self.spawn(self._complete(md, commit, durable))
        transactional_id = md.transactional_id
        self._completions[transactional_id] = task

        def forget(done: asyncio.Task[object]) -> None:
            if self._completions.get(transactional_id) is done:
                del self._completions[transactional_id]

        task.add_done_callback(forget)

    def _failed(self, md: TransactionMetadata, commit: bool, exc: Exception) -> None:
        # The Prepare state is durable: a retry (or the next start) completes it.
        log.warning("markers of %r not written: %s", md.transactional_id, exc)
        self.spawn(self._retry_complete(md, commit))

    async def _complete(
        self, md: TransactionMetadata, commit: bool, durable: Awaitable[None]
    ) -> ErrorCode:
        """Wait for the markers, then CompleteCommit/CompleteAbort."""
        try:
            await durable
        except Exception as exc:
            self._failed(md, commit, exc)
            return ErrorCode.none
        final = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        # Transaction version 2 ran out of epochs: the markers carried the old producer id;
        # the producer goes on with the new one, epoch 0 (Kafka's prepareComplete).
        rotate = md.bumps_epoch and md.next_producer_id >= 0
        transit = md.prepare_transition(
            final,
            self._clock(),
            producer_id=md.next_producer_id if rotate else None,
            producer_epoch=0 if rotate else None,
            next_producer_id=-1,
            partitions=set(),
        )
        try:
            self._state.write_lazily(md, transit)
        except Exception as exc:
            log.warning("writing %s of %r failed: %s", final.kafka_name, md.transactional_id, exc)
            self.spawn(self._retry_complete(md, commit))
            return ErrorCode.none
        # The Complete record need not be durable before the next transition: the markers are,
        # and any later record of this id is appended after it (one partition, in order), so
        # its HW wait covers this one too. So it gets no fsync of its own (``lazy``) and
        # nobody waits for it: the next record of the partition (typically the producer's
        # next Ongoing) or the periodic flush covers it, which keeps one fsync off the next
        # AddPartitionsToTxn (a failed flush is logged by the broker's flusher). A crash
        # before it is durable leaves Prepare*, which the next start completes again (markers
        # written twice are harmless).
        return ErrorCode.none

    async def _retry_complete(self, md: TransactionMetadata, commit: bool) -> None:
        await asyncio.sleep(RETRY_S)
        if self._state.status == "active" and md.state in (
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
        ):
            self.start_completion(md, commit)
