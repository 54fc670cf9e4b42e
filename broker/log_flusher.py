"""The acknowledgement policy: when an append is flushed, and which held answers that releases.

Kafka splits this between ``LogManager``'s scheduled flush (the ``kafka-log-flusher`` task:
``flushDirtyLogs`` by ``flush.ms``, and ``UnifiedLog.append`` flushing by ``flush.messages``)
and the produce purgatory (``DelayedProduce``, completed when the HW covers the batch). Here
both sit in one object beside what they drive:

- ``after_append(log, hw_before)``: every append calls it (Produce through
  ``PartitionWriter.appended``, the coordinators through ``PartitionWriter.append``). It wakes
  the partition's HW waiters when the append moved the HW (a topic without ``flush.messages=1``)
  and starts a group-commit fsync when the topic's flush policy asks for one;
- the fsync runs on a flush thread (``Flusher``, below: one hand-off there, one back); at
  most one per partition is in flight, and appends made meanwhile make it go round once more
  (group commit: one fsync, every answer it covers);
- when it returns, on the loop: the answers it covers are released (``HeldAnswers`` in
  ``broker/purgatory.py``: Produce answers encoded at append time) and the HW waiters woken
  (``HighWatermarkWaiters.notify``: coordinator writes, acks=-1 produce of the slow path, long
  polls); a failed fsync answers the held answers KAFKA_STORAGE_ERROR, as Kafka's log dir
  failure does;
- ``policy_changed`` (AlterConfigs) and ``partition_removed`` (DeleteTopics): the HW moved
  or the partition went, outside an append;
- ``flush_due()``, every ``FLUSH_TICK_S``: answers REQUEST_TIMED_OUT to the held answers past
  their request timeout, and flushes the logs whose ``flush.ms`` / ``flush.messages`` is due.

Every acknowledgement of a ``flush.messages=1`` topic (the default) follows the fsync that
covers it: the HW moves only in ``PartitionLog.flush``, and answers are released only from its
outcome. Threading: the event loop, except the fsync itself.

``Flusher``, the flush threads (issue 33): a flush through ``loop.run_in_executor`` cost a
durable acknowledgement, between the append and the answer, the executor's work item and
``concurrent.futures.Future`` (a condition variable notified under its lock), ``wrap_future``'s
copy into an asyncio future (one loop turn after the thread's wake-up) and that future's done
callback (one more loop turn); measured with ``strace -f`` on a sync produce, 18 ``futex`` calls
per request and three loop iterations between the fsync's return and the answer's ``write``.
Here a flush is a tuple put on a ``queue.SimpleQueue`` (C; a put wakes one waiting thread), and
the thread hands the outcome back with one ``call_soon_threadsafe(done, result, error)``:
``done`` runs in the loop's next iteration and releases the held answers there.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from tidelog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from tidelog.broker.purgatory import HeldAnswers
    from tidelog.storage import PartitionLog

__all__ = ("FLUSH_TICK_S", "Flusher", "LogFlusher")

log = logging.getLogger("tidelog.broker")

#: How often ``flush_due`` looks for logs whose flush.ms / flush.messages policy is due.
FLUSH_TICK_S = 0.1

TopicPartition = tuple[str, int]


class LogFlusher:
    """Group-commit fsyncs and the release of the answers they cover; see the module."""

    def __init__(
        self,
        flusher: Flusher,
        held_answers: HeldAnswers,
        notify: Callable[[str, int], None],
        clock: Callable[[], int],
        *,
        logs: Callable[[], Iterable[PartitionLog]],
        run_blocking: Callable[..., Awaitable[Any]],
    ) -> None:
        self._flusher = flusher
        self._held_answers = held_answers
        #: ``HighWatermarkWaiters.notify``: the HW of a partition moved.
        self._notify = notify
        self._clock = clock
        #: Every partition log (the tick's look for due flushes), and the worker pool to run
        #: that look in.
        self._logs = logs
        self._run_blocking = run_blocking
        #: Partitions with a flush in flight -> whether to go round once more after it.
        self._flushing: dict[TopicPartition, bool] = {}
        #: Set while no flush is in flight (``drain`` waits for it).
        self._idle: asyncio.Event | None = None
        #: The loop of the flushes, kept from the first one: ``get_running_loop`` costs a
        #: ``getpid`` system call, once per durable acknowledgement otherwise.
        self._loop: asyncio.AbstractEventLoop | None = None

    def after_append(self, partition_log: PartitionLog, hw_before: int) -> None:
        """Wake HW waiters if the append moved the HW; start a flush if the policy asks."""
        if partition_log.high_watermark != hw_before:
            self._notify(partition_log.topic, partition_log.partition)
        if partition_log.config.has_flush_policy and partition_log.needs_flush(self._clock()):
            self.schedule_flush(partition_log)

    def schedule_flush(self, partition_log: PartitionLog) -> None:
        """Group commit: at most one flush per partition in flight; appends during it make
        the flusher go round once more.

        Callbacks rather than a task per flush: the fsync starts in a flush thread at once
        (not one loop turn later), and its answers are released from the thread's completion
        callback: a task per round would cost a creation and two more loop turns per fsync,
        which every durable acknowledgement would wait for."""
        key = (partition_log.topic, partition_log.partition)
        if key in self._flushing:
            self._flushing[key] = True
            return
        self._start_flush(partition_log, key)

    def in_flight(self) -> int:
        """How many partitions have a flush in flight (for tests and metrics)."""
        return len(self._flushing)

    def _start_flush(self, partition_log: PartitionLog, key: TopicPartition) -> None:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        self._flushing[key] = False
        if self._idle is not None:
            self._idle.clear()
        try:
            self._flusher.submit(
                functools.partial(partition_log.flush, self._clock()),
                functools.partial(self._flushed, partition_log, key, partition_log.high_watermark),
                loop,
            )
        except RuntimeError:  # the flusher is shut down: the broker is stopping
            self._done(key)

    def _flushed(
        self,
        partition_log: PartitionLog,
        key: TopicPartition,
        hw_before: int,
        hw: int,
        exc: BaseException | None,
    ) -> None:
        """On the loop, one turn after the flush thread returned (``Flusher``)."""
        if exc is not None:
            log.error("flush of %s-%d failed", *key, exc_info=exc)
            # Kafka answers KAFKA_STORAGE_ERROR when its log dir fails.
            self._held_answers.fail(key, ErrorCode.kafka_storage_error, f"fsync failed: {exc}")
            self._done(key)
            return
        self._held_answers.release(key, hw)
        if hw != hw_before:
            self._notify(*key)
        if self._flushing.get(key) or partition_log.needs_flush(self._clock()):
            self._start_flush(partition_log, key)
        else:
            self._done(key)

    def _done(self, key: TopicPartition) -> None:
        self._flushing.pop(key, None)
        if not self._flushing and self._idle is not None:
            self._idle.set()

    def policy_changed(self, partition_log: PartitionLog) -> None:
        """The partition's flush policy changed (AlterConfigs): its HW may have caught up with
        the LEO, so wake its waiters and answer what the HW now covers."""
        key = (partition_log.topic, partition_log.partition)
        self._notify(*key)
        self._held_answers.release(key, partition_log.high_watermark)

    def partition_removed(self, topic: str, partition: int) -> None:
        """The partition was deleted: wake its waiters and answer its held answers
        UNKNOWN_TOPIC_OR_PARTITION (their batches will never be fsynced)."""
        self._notify(topic, partition)
        self._held_answers.fail(
            (topic, partition),
            ErrorCode.unknown_topic_or_partition,
            f"topic {topic} was deleted before the batch was fsynced",
        )

    async def flush_due(self) -> None:
        """The tick: answer the held answers past their timeout, flush the logs that are due."""
        self._held_answers.expire(
            asyncio.get_running_loop().time(),
            ErrorCode.request_timed_out,
            "the fsync covering the batch did not return before the request timeout",
        )
        # The look over every log runs in a worker: with 20,000 partitions it takes 10-30 ms,
        # which would stall the loop ten times a second.
        due = await self._run_blocking(self._logs_needing_flush, self._clock())
        for partition_log in due:
            self.schedule_flush(partition_log)

    def _logs_needing_flush(self, now: int) -> list[PartitionLog]:
        return [pl for pl in self._logs() if pl.needs_flush(now)]

    async def drain(self) -> None:
        """Wait until no flush is in flight (a finished flush may start one more round)."""
        while self._flushing:
            if self._idle is None:
                self._idle = asyncio.Event()
            self._idle.clear()
            await self._idle.wait()


#: ``done(result, error)``: exactly one of them is None (error is the exception fn raised).
Done = Callable[[Any, BaseException | None], None]


class Flusher:
    """``threads`` daemon threads running ``fn()`` jobs; outcomes go back to the job's loop."""

    def __init__(self, threads: int, name: str = "tidelog-flush") -> None:
        self._size = max(1, threads)
        self._name = name
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], Any], Done, asyncio.AbstractEventLoop] | None
        ] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        #: Threads waiting for a job (read and written under the GIL; a stale value only
        #: starts a thread early or one job late).
        self._idle = 0
        self._closed = False

    def submit(
        self, fn: Callable[[], Any], done: Done, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        """Run ``fn()`` in a flush thread; ``done(result, error)`` then runs on ``loop`` (the
        running loop when None: ``get_running_loop`` costs a ``getpid`` system call).

        Raises RuntimeError once ``shutdown`` was called (as an executor does)."""
        if self._closed:
            raise RuntimeError("the flusher is shut down")
        if self._idle == 0 and len(self._threads) < self._size:
            self._start()
        self._jobs.put((fn, done, loop or asyncio.get_running_loop()))

    def _start(self) -> None:
        """One more thread. Threads start only when every one is busy: each idle thread is
        one more waiter the GIL hand-offs of a flush can wake (measured: with 8 threads
        started up front, a sync produce cost as many ``futex`` calls as with the executor)."""
        name = f"{self._name}-{len(self._threads)}"
        thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._idle += 1
        thread.start()
        self._threads.append(thread)

    def _run(self) -> None:
        get = self._jobs.get
        while True:
            job = get()
            self._idle -= 1
            if job is None:
                return
            fn, done, loop = job
            result: Any = None
            error: BaseException | None = None
            try:
                result = fn()
            except BaseException as exc:  # handed to the loop, as an executor's future does
                error = exc
            self._idle += 1  # before the hand-back: the loop's next submit sees this thread
            try:
                loop.call_soon_threadsafe(done, result, error)
            except RuntimeError:  # the loop is closed: nobody waits for this flush any more
                pass

    def shutdown(self) -> None:
        """Stop the threads once the queued jobs are done (blocks until they are)."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        self._threads.clear()
