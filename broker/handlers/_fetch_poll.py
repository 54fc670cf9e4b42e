"""Fetch of one partition without a coroutine: the answer at once, or a long poll run by callbacks.

What consumers send most is one partition of one topic, and a consumer at the tail of its log
has that fetch wait for the next append (long poll). Through ``handle`` each such fetch costs a
coroutine chain, a task and a second pass through the handler; here the router calls
``answer_at_once`` with the lean-parsed request instead:

- data (or an error, or an expired wait) is there: the framed answer, built at once;
- else a future the connection answers from when it resolves: a ``_LongPoll`` registers a wake
  future with the partition's HW waiters (``broker.partitions``) and a timer for ``max_wait``;
  every wake re-scans, as ``handle`` does, until ``min_bytes`` are there, the wait expired, the
  broker is stopping or the partition failed, then sets the answer.

The answer is the same bytes ``handle`` gives (``protocol.lean.encode_fetch_one``). Anything else
(a session id, several partitions, an unknown topic id, a read big enough for a worker thread
when answering at once) returns None: the router then runs ``handle``. When the connection
goes, the server cancels the answer future and the poll forgets its wake future and timer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from tidelog.broker.handlers._fetch_scan import (
    Wanted,
    answer_max_bytes,
    answer_now,
    answer_one,
    count_bytes_out,
    scan,
)
from tidelog.broker.handlers.base import RequestContext

__all__ = ["answer_at_once"]

API_KEY = 1
log = logging.getLogger("tidelog.fetch")


def answer_at_once(
    broker: Any, version: int, correlation_id: int, request: Any
) -> bytes | list[bytes | memoryview] | asyncio.Future[Any] | None:
    """The answer of a one-partition fetch, a future of it (long poll), or None (``handle``)."""
    if request.session_id != 0:
        return None
    topics = request.topics
    if len(topics) != 1:
        return None
    topic = topics[0]
    partitions = topic.partitions
    if len(partitions) != 1:
        return None
    p = partitions[0]
    if version >= 13:
        info = broker.topics.by_id(topic.topic_id)
        if info is None:
            return None
        name = info.name
    else:
        name = topic.topic
    wanted = Wanted(name, topic.topic_id, p.partition, p.fetch_offset, p.partition_max_bytes)
    max_bytes = answer_max_bytes(broker, request)
    min_bytes = request.min_bytes
    total, errors = scan(broker.topics, [wanted], max_bytes)
    wait_s = request.max_wait.total_seconds()
    if answer_now(errors, total, min_bytes, wait_s, broker.stopping):
        answer = answer_one(version, correlation_id, wanted, blocking_ok=False)
        if answer is not None:
            count_bytes_out(broker.metrics, [wanted])
        return answer
    poll = _LongPoll(broker, version, correlation_id, request, wanted, max_bytes, min_bytes)
    return poll.start(wait_s)


class _LongPoll:
    """One waiting fetch: re-scans at every wake of its partition until it can answer."""

    __slots__ = (
        "answer",
        "broker",
        "correlation_id",
        "deadline",
        "key",
        "loop",
        "max_bytes",
        "min_bytes",
        "ready_at",
        "request",
        "started",
        "timer",
        "version",
        "wake",
        "wanted",
    )

    def __init__(
        self,
        broker: Any,
        version: int,
        correlation_id: int,
        request: Any,
        wanted: Wanted,
        max_bytes: int,
        min_bytes: int,
    ) -> None:
        self.broker = broker
        self.version = version
        self.correlation_id = correlation_id
        self.request = request
        self.wanted = wanted
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self.key = (wanted.topic, wanted.partition)
        self.loop = asyncio.get_running_loop()
        self.answer: asyncio.Future[Any] = self.loop.create_future()
        self.started = time.perf_counter()
        self.ready_at = 0.0
        self.deadline = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.wake: asyncio.Future[bool] | None = None

    def start(self, wait_s: float) -> asyncio.Future[Any]:
        self.deadline = self.loop.time() + wait_s
        self.timer = self.loop.call_later(wait_s, self._expire)
        self.answer.add_done_callback(self._answered)
        self._arm()
        return self.answer

    def _arm(self) -> None:
        wake: asyncio.Future[bool] = self.loop.create_future()
        self.wake = wake
        self.broker.partitions.add(self.key, wake)
        wake.add_done_callback(self._woken)

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
            self.broker.partitions.discard(self.key, wake)
            wake.cancel()

    def _woken(self, wake: asyncio.Future[bool]) -> None:
        if wake is not self.wake or self.answer.done():
            return
        self.broker.partitions.discard(self.key, wake)  # after a timeout it is still listed
        self.wake = None
        broker = self.broker
        w = self.wanted
        try:
            total, errors = scan(broker.topics, [w], self.max_bytes)
            remaining = self.deadline - self.loop.time()
            if not answer_now(errors, total, self.min_bytes, remaining, broker.stopping):
                self._arm()
                return
            self.ready_at = time.perf_counter()
            out = answer_one(self.version, self.correlation_id, w, blocking_ok=False)
            if out is None:  # a big read: in a worker thread, then answer
                broker.spawn(self._answer_from_worker())
                return
        except Exception:
            out = self._failed()
        self._set(out)

    async def _answer_from_worker(self) -> None:
        try:
            version, correlation_id, wanted = self.version, self.correlation_id, self.wanted
            out = await self.broker.run_blocking(
                lambda: answer_one(version, correlation_id, wanted, blocking_ok=True)
            )
        except Exception:
            out = self._failed()
        self._set(out)

    def _set(self, out: Any) -> None:
        if not self.answer.done():
            now = time.perf_counter()
            # The long poll's wait (until the wake that answers) is kept out of the latency.
            waited = (self.ready_at or now) - self.started
            self.broker.router.observe(API_KEY, now - self.started, waited=waited)
            count_bytes_out(self.broker.metrics, [self.wanted])
            self.answer.set_result(out)

    def _failed(self) -> Any:
        ctx = RequestContext(API_KEY, self.version, self.correlation_id, None, "", -1, self.broker)
        return self.broker.router.failed(ctx, self.request)
