"""High-watermark waiters: futures woken when a partition's HW moves.

Used by acks=-1 produce (wait until the HW covers the batch) and by long-poll fetch (wait until
any fetched partition has new data). Everything here runs on the event loop thread.

Whoever moves a HW calls ``notify(topic, partition)``: the produce path right after an append
when no flush policy holds the HW back, and the flusher after a group-commit fsync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

__all__ = ("HighWatermarkWaiters", "TopicPartition")

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
        loop = asyncio.get_running_loop()
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
            await self.wait_any((partition,), remaining)
        return True


def _resolve(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)
