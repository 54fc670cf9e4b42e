"""A fetch that waits: Kafka's ``DelayedFetch``, run by callbacks.

``fetch_messages`` (``broker/fetch_messages.py``) gives one back when the answer cannot be built
on the event loop now:

- the long poll (``wait``): ``min_bytes`` are not there yet. ``start`` registers one wake
  future with the HW waiters (``broker.partitions``, ``broker/purgatory.py``) of every fetched
  partition and a timer for ``max_wait``; every wake reads the logs again until ``min_bytes``
  are there, the wait expired, the broker is stopping or a partition failed;
- a read of old bytes whose CRC check belongs in a worker thread (``reread``), or record data
  too large to read on the loop: in a worker thread.

Either way it completes with the partitions' data (what to send), handed to the handler's
``respond`` (Kafka's responseCallback), whose answer resolves the future ``start`` returned.
An unexpected failure is logged and answered UNKNOWN_SERVER_ERROR on every partition (as
Kafka's readFromLog answers a partition whose read threw). When the connection goes, the server
cancels the future and the fetch forgets its wake future and timer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidelog.broker.fetch_messages import (
    FetchParams,
    FetchPartitionData,
    ReplicaView,
    answer_now,
    read_from_log,
    read_records,
)
from tidelog.broker.loop_lag import running_loop
from tidelog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from tidelog.broker.purgatory import TopicPartition

__all__ = ["DelayedFetch", "Respond"]

log = logging.getLogger("tidelog.fetch")

#: The handler's callback (Kafka's responseCallback): the partitions' data and the seconds the
#: long poll waited (kept out of the request latency) -> the framed answer.
Respond = Callable[[list[FetchPartitionData], float], Any]


class DelayedFetch:
    """One fetch that waits: reads the logs again at every wake of its partitions until it can
    answer, or reads in a worker thread."""

    __slots__ = (
        "answer",
        "deadline",
        "keys",
        "loop",
        "params",
        "partitions",
        "ready_at",
        "replica",
        "reread",
        "respond",
        "started",
        "timer",
        "wait",
        "wake",
    )

    def __init__(
        self,
        replica: ReplicaView,
        params: FetchParams,
        partitions: list[FetchPartitionData],
        *,
        reread: bool,
        wait: bool = False,
    ) -> None:
        self.replica = replica
        self.params = params
        self.partitions = partitions
        #: read the logs again in a worker thread (a first read of old bytes: CRC checks)
        self.reread = reread
        #: wait for data (long poll) before answering
        self.wait = wait
        self.started = time.perf_counter()
        self.ready_at = 0.0
        self.deadline = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.wake: asyncio.Future[bool] | None = None
        self.keys: list[TopicPartition] = []
        self.respond: Respond | None = None
        self.loop = running_loop()  # no getpid per fetch
        self.answer: asyncio.Future[Any] = self.loop.create_future()

    def start(self, respond: Respond) -> asyncio.Future[Any]:
        """Wait (or read in a worker thread); the future resolves to ``respond``'s answer."""
        self.respond = respond
        if not self.wait:
            self.ready_at = self.started  # no wait, only a read in a worker thread
            self.replica.spawn(self._in_worker(self.reread))
            return self.answer
        keys = [(w.topic, w.partition) for w in self.partitions if w.topic is not None]
        self.keys = list(dict.fromkeys(keys)) if len(keys) > 1 else keys
        wait_s = self.params.max_wait_s
        self.deadline = self.loop.time() + wait_s
        self.timer = self.loop.call_later(wait_s, self._expire)
        self.answer.add_done_callback(self._answered)
        self._arm()
        return self.answer

    def _arm(self) -> None:
        wake: asyncio.Future[bool] = self.loop.create_future()
        self.wake = wake
        waiters = self.replica.partitions
        for key in self.keys:
            waiters.add(key, wake)
        wake.add_done_callback(self._woken)

    def _disarm(self, wake: asyncio.Future[bool]) -> None:
        waiters = self.replica.partitions
        for key in self.keys:
            waiters.discard(key, wake)

    def _expire(self) -> None:
        self.timer = None
        wake = self.wake
        if wake is not None and not wake.done():
            wake.set_result(False)

    def _answered(self, answer: asyncio.Future[Any]) -> None:
        """Answered or cancelled (the connection went): drop the timer and the wake."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        wake = self.wake
        if wake is not None:
            self.wake = None
            self._disarm(wake)
            wake.cancel()

    def _woken(self, wake: asyncio.Future[bool]) -> None:
        if wake is not self.wake or self.answer.done():
            return
        self._disarm(wake)  # after a timeout or another partition's wake it is still listed
        self.wake = None
        replica = self.replica
        params = self.params
        try:
            # notified (True): only the partitions whose HW moved are read again; the
            # timer's wake (False) reads them all
            total, errors, deferred = read_from_log(
                replica.topics, self.partitions, params.max_bytes, moved_only=wake.result()
            )
            if deferred:
                self.ready_at = time.perf_counter()
                replica.spawn(self._in_worker(True))
                return
            # Expired once the timer ran (it may fire a little before ``deadline``: uvloop's
            # timers have millisecond resolution); re-arming then would wait with no timer.
            remaining = self.deadline - self.loop.time() if self.timer is not None else 0.0
            if not answer_now(errors, total, params.min_bytes, remaining, replica.stopping):
                self._arm()
                return
            self.ready_at = time.perf_counter()
            if not read_records(self.partitions, blocking_ok=False):
                replica.spawn(self._in_worker(False))  # a big read: in a worker thread
                return
        except Exception:
            self._failed()
        self._complete()

    async def _in_worker(self, reread: bool) -> None:
        """Read (``reread``: the logs again, CRC-checking old bytes read for the first time)
        and the record data in a worker thread, then answer.

        Kafka divergence: after a ``reread`` the answer carries what the read found even when
        that is less than ``min_bytes`` (there is data: the read found unchecked batches below
        the HW); the next fetch finds the bytes checked and waits as usual.
        """

        def work() -> None:
            if reread:
                read_from_log(
                    self.replica.topics, self.partitions, self.params.max_bytes, on_loop=False
                )
            read_records(self.partitions, blocking_ok=True)

        try:
            await self.replica.run_blocking(work)
        except Exception:
            self._failed()
        self._complete()

    def _failed(self) -> None:
        """Log the unexpected failure (call from ``except``); every partition answers
        UNKNOWN_SERVER_ERROR."""
        log.exception("a fetch of %d partitions failed", len(self.partitions))
        for w in self.partitions:
            w.error = ErrorCode.unknown_server_error
            w.read = None
            w.records, w.file_regions, w.aborted = b"", (), ()
            w.high_watermark = w.log_start_offset = w.last_stable_offset = -1

    def _complete(self) -> None:
        if self.answer.done():
            return
        # The long poll's wait (until the wake that answers) is kept out of the latency.
        waited = (self.ready_at or time.perf_counter()) - self.started
        respond = self.respond
        assert respond is not None
        try:
            out = respond(self.partitions, waited)
        except Exception as exc:
            log.exception("encoding a fetch answer failed")
            self.answer.set_exception(exc)  # the connection closes
            return
        self.answer.set_result(out)
