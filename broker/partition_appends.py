"""Produce appends that run in a worker thread, kept in arrival order per partition.

Some batches cost too much to append on the event loop: a compacted topic's key check of a
compressed batch (decompress up to 32 MiB, read every record's key) and any big batch (the CRC of
megabytes and the write itself). Produce hands those to ``PartitionAppends.submit``: the append
runs in the broker's append worker pool (``Broker.run_heavy``, a pool of its own, so fsyncs and
reads in the I/O pool never queue behind a decompression), and the event loop goes on serving
other connections meanwhile.

Order: appends of one partition keep the order they arrived in. While an append of a partition
is queued or running, every later append to that partition queues behind it (small ones too,
which run on the loop when their turn comes), as Kafka's partition lock serializes validation and
append; other partitions are not affected. A queued append is shielded from the cancellation of
the request that made it (a closed connection): once accepted it is appended and its
``finish`` step (HW waiters, flush scheduling) runs, as with an append done at once.

Threading: event loop only (the worker runs just ``work``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["PartitionAppends"]

T = TypeVar("T")
R = TypeVar("R")
Key = tuple[str, int]


class PartitionAppends:
    """The per-partition queues of appends handed to worker threads (see the module)."""

    def __init__(self, run_heavy: Callable[[Callable[[], Any]], Awaitable[Any]]) -> None:
        self._run_heavy = run_heavy
        self._tails: dict[Key, asyncio.Future[Any]] = {}

    def busy(self, key: Key) -> bool:
        """Whether an append of ``key`` is queued or running (later ones must queue too)."""
        return key in self._tails

    def submit(
        self,
        key: Key,
        work: Callable[[], T],
        finish: Callable[[T | BaseException], R],
        *,
        in_worker: bool,
    ) -> asyncio.Future[R]:
        """Queue ``work`` (in a worker thread when ``in_worker``, else on the loop) behind the
        appends of ``key`` already queued; ``finish`` gets its result or exception, on the loop,
        and gives the future's result."""
        previous = self._tails.get(key)
        future = asyncio.ensure_future(self._run(previous, work, finish, in_worker))
        self._tails[key] = future
        future.add_done_callback(functools.partial(self._done, key))
        return asyncio.shield(future)

    async def _run(
        self,
        previous: asyncio.Future[Any] | None,
        work: Callable[[], T],
        finish: Callable[[T | BaseException], R],
        in_worker: bool,
    ) -> R:
        if previous is not None:
            await asyncio.wait([previous])  # its outcome belongs to its own request
        outcome: T | BaseException
        try:
            outcome = await self._run_heavy(work) if in_worker else work()
        except Exception as exc:  # storage errors become the partition's error code
            outcome = exc
        return finish(outcome)

    def _done(self, key: Key, future: asyncio.Future[Any]) -> None:
        if self._tails.get(key) is future:
            del self._tails[key]
