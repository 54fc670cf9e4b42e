"""High-watermark waiters: futures woken when a partition's HW moves.

Used by acks=-1 produce (wait until the HW covers the batch) and by long-poll fetch (wait until
any fetched partition has new data). Everything here runs on the event loop thread.

Whoever moves a HW calls ``notify(topic, partition)``: ``LogFlusher`` (``broker/log_flusher.py``,
the acknowledgement policy) right after an append when no flush policy holds the HW back, and
after the group-commit fsync when one does.

``HeldAnswers`` is the lean form for the produce answers that wait for an fsync (the durable
default, ``flush.messages=1``): the answer is encoded at append time and parked with the offset
the HW must reach; ``LogFlusher`` releases every answer its fsync covered (one fsync, many
answers: group commit), and a periodic tick answers the ones past their request timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import NamedTuple

__all__ = ("HeldAnswer", "HeldAnswers", "HighWatermarkWaiters", "TopicPartition")

TopicPartition = tuple[str, int]


class HighWatermarkWaiters:
    """Per-partition sets of futures; ``notify`` wakes (and forgets) all of a partition's."""

    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, set[asyncio.Future[bool]]] = {}

    def notify(self, topic: str, partition: int) -> None:
        """The HW of (topic, partition) moved (or the partition went away): wake its waiters."""
        waiters = self._waiters.pop((topic, partition), None)
        if not waiters:
            return
        for future in waiters:
            if not future.done():
                future.set_result(True)

    def add(self, key: TopicPartition, future: asyncio.Future[bool]) -> None:
        """Resolve ``future`` (True) at the next notify of ``key``; see ``discard``."""
        self._waiters.setdefault(key, set()).add(future)

    def discard(self, key: TopicPartition, future: asyncio.Future[bool]) -> None:
        """Forget ``future`` (after a timeout, or when its waiter went away)."""
        waiters = self._waiters.get(key)
        if waiters is not None:
            waiters.discard(future)
            if not waiters:
                del self._waiters[key]

    def notify_all(self) -> None:
        """Wake every waiter (shutdown, topic deletion)."""
        for key in list(self._waiters):
            self.notify(*key)

    def waiting(self) -> int:
        """How many (partition, future) registrations are outstanding (for metrics/tests)."""
        return sum(len(s) for s in self._waiters.values())

    async def wait_any(self, partitions: Iterable[TopicPartition], timeout_s: float) -> bool:
        """Wait until any of ``partitions`` is notified, or ``timeout_s`` passes.

        Returns True when woken by a notify, False on timeout. The caller re-checks its
        condition either way (a notify means "something changed", not "enough changed").
        """
        if timeout_s <= 0:
            return False
        return await self._wait_any(asyncio.get_running_loop(), partitions, timeout_s)

    async def _wait_any(
        self,
        loop: asyncio.AbstractEventLoop,
        partitions: Iterable[TopicPartition],
        timeout_s: float,
    ) -> bool:
        future: asyncio.Future[bool] = loop.create_future()
        keys = list(dict.fromkeys(partitions))
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        handle = loop.call_later(timeout_s, _resolve, future)
        try:
            return await future
        finally:
            handle.cancel()
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[key]

    async def wait_until(
        self,
        partition: TopicPartition,
        condition: Callable[[], bool],
        timeout_s: float,
    ) -> bool:
        """Wait until ``condition()`` holds, re-checked at every notify of ``partition``.

        Returns whether it holds (False when ``timeout_s`` passed first).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not condition():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            # the loop passed on: ``get_running_loop`` costs a ``getpid`` system call
            await self._wait_any(loop, (partition,), remaining)
        return True


class HeldAnswer(NamedTuple):
    """A framed answer waiting until the partition's HW reaches ``target``."""

    target: int
    deadline: float  # loop time
    started: float  # time.perf_counter() when held (for the request metrics)
    future: asyncio.Future[bytes]
    answer: bytes
    #: The framed answer carrying an error instead: ``error_answer(code, message)``.
    error_answer: Callable[[int, str], bytes]


class HeldAnswers:
    """Per-partition queues of answers released when the HW covers them (in append order)."""

    def __init__(self, observe: Callable[[float, bool], None] | None = None) -> None:
        self._held: dict[TopicPartition, deque[HeldAnswer]] = {}
        #: ``observe(seconds, failed)`` for every answer released (request metrics).
        self._observe = observe or _ignore

    def hold(
        self,
        key: TopicPartition,
        target: int,
        deadline: float,
        answer: bytes,
        error_answer: Callable[[int, str], bytes],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> asyncio.Future[bytes]:
        """A future resolved with ``answer`` once ``release(key, hw)`` sees ``hw >= target``
        (``loop``: the running loop, when the caller has it: ``get_running_loop`` costs a
        ``getpid`` system call)."""
        future: asyncio.Future[bytes] = (loop or asyncio.get_running_loop()).create_future()
        queue = self._held.get(key)
        if queue is None:
            queue = self._held[key] = deque()
        queue.append(
            HeldAnswer(target, deadline, time.perf_counter(), future, answer, error_answer)
        )
        return future

    def release(self, key: TopicPartition, high_watermark: int) -> None:
        """The HW of ``key`` is now ``high_watermark``: answer everything it covers.

        Targets only grow along a queue (appends are ordered), except a retried idempotent
        batch's, which is lower and therefore released no later than the entry before it.
        """
        queue = self._held.get(key)
        if not queue:
            return
        now = time.perf_counter()
        while queue and queue[0].target <= high_watermark:
            held = queue.popleft()
            if not held.future.done():  # cancelled when its connection closed
                held.future.set_result(held.answer)
                self._observe(now - held.started, False)
        if not queue:
            del self._held[key]

    def fail(self, key: TopicPartition, error_code: int, message: str) -> None:
        """Answer every held answer of ``key`` with an error (the fsync failed)."""
        queue = self._held.pop(key, None)
        for held in queue or ():
            if not held.future.done():
                held.future.set_result(held.error_answer(error_code, message))
                self._observe(time.perf_counter() - held.started, True)

    def expire(self, now: float, error_code: int, message: str) -> int:
        """Answer the ones whose deadline passed with ``error_code``; returns how many."""
        expired = 0
        for key in list(self._held):
            queue = self._held[key]
            if all(h.deadline > now for h in queue):
                continue
            kept: deque[HeldAnswer] = deque()
            for held in queue:
                if held.deadline > now:
                    kept.append(held)
                elif not held.future.done():
                    held.future.set_result(held.error_answer(error_code, message))
                    self._observe(time.perf_counter() - held.started, True)
                    expired += 1
            if kept:
                self._held[key] = kept
            else:
                del self._held[key]
        return expired

    def held(self) -> int:
        """How many answers are held (for metrics and tests)."""
        return sum(len(q) for q in self._held.values())


def _ignore(_seconds: float, _failed: bool) -> None:
    pass


def _resolve(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)
