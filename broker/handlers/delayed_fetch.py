"""The one path of a Fetch: scan now, answer at once, or wait (Kafka's DelayedFetch) by callbacks.

``fetch`` is the core both callers use: ``answer_at_once`` (the router's coroutine-free path for
a lean-parsed sessionless fetch, what consumers send) and ``fetch.handle`` (everything else: a
request kio decoded, a session id, an authorizer). It scans the wanted partitions
(``fetch_plan.scan``) and

- data (or an error, or an expired wait) is there: returns the framed answer, built at once (a
  read big enough for a worker thread, or a first read of old bytes whose CRC check belongs in
  one: a future resolved from that thread);
- else returns a future: a ``_DelayedFetch`` registers one wake future with the HW waiters
  (``broker.partitions``, ``broker/purgatory.py``) of every fetched partition and a timer for
  ``max_wait``; every wake re-scans until ``min_bytes`` are there, the wait expired, the
  broker is stopping or a partition failed, then sets the answer.

One partition is answered by ``protocol.fast.answers.encode_fetch_one``, several by
``encode_fetch_body`` (the same bytes as kio's writer). When the connection goes, the server
cancels the answer future and the fetch forgets its wake future and timer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from tidelog.broker.handlers.base import Answer, BrokerView, RawBody, RequestContext
from tidelog.broker.handlers.fetch_plan import (
    BLOCKING_READ_BYTES,
    Wanted,
    answer_max_bytes,
    answer_now,
    answer_one,
    count_bytes_out,
    requested,
    scan,
)
from tidelog.broker.sendfile import FileAnswer
from tidelog.protocol.fast.answers import FetchPartitionAnswer, encode_fetch_body

if TYPE_CHECKING:
    from tidelog.broker.handlers.fetch_plan import FetchRequest
    from tidelog.protocol.fast.fetch import LeanFetchRequest

__all__ = ["answer_at_once", "fetch"]

API_KEY = 1
log = logging.getLogger("tidelog.fetch")

#: The framed answer, or a future of it.
FetchAnswer = bytes | list[bytes | memoryview] | FileAnswer | asyncio.Future[Any]


def answer_at_once(
    broker: BrokerView, version: int, correlation_id: int, request: LeanFetchRequest
) -> FetchAnswer | None:
    """The answer of a sessionless fetch or a future of it; None (``handle``: the
    FETCH_SESSION_ID_NOT_FOUND answer) for one naming a session. The router calls this only
    when no authorizer is set (``handle`` marks the partitions a principal may not read)."""
    if request.session_id != 0:
        return None
    topics = request.topics
    if len(topics) == 1 and len(topics[0].partitions) == 1:
        topic = topics[0]
        p = topic.partitions[0]
        name: str | None
        if version >= 13:
            info = broker.topics.by_id(topic.topic_id)
            if info is None:
                return None
            name = info.name
        else:
            name = topic.topic
        wanted = [
            Wanted(
                name,
                topic.topic_id,
                p.partition,
                p.fetch_offset,
                p.partition_max_bytes,
                read_committed=request.isolation_level == 1,
            )
        ]
    else:
        # Several partitions (librdkafka fetches every assigned partition in one request):
        # the same answer as ``handle``'s without a coroutine, a task and a request context
        # per fetch (issue 33's soak: ~1/5 of the loop's time went to that frame).
        wanted = requested(broker.topics, version, request)
    return fetch(broker, version, correlation_id, request, wanted, observe=True)


def fetch(
    broker: BrokerView,
    version: int,
    correlation_id: int,
    request: FetchRequest,
    wanted: list[Wanted],
    *,
    observe: bool = False,
    waited: list[float] | None = None,
) -> FetchAnswer:
    """Scan ``wanted`` and answer now, or return a future of the answer (long poll, big read).

    ``observe``: count the request in the metrics when the future resolves (the router counts
    what it awaits itself); else the seconds the long poll waited are appended to ``waited``
    (the router keeps them out of the request latency).
    """
    max_bytes = answer_max_bytes(broker, request)
    min_bytes = request.min_bytes
    total, errors, deferred = scan(broker.topics, wanted, max_bytes)
    if deferred:  # old bytes read for the first time: CRC-checked in a worker thread
        delayed = _DelayedFetch(
            broker, version, correlation_id, request, wanted, max_bytes, min_bytes, observe, waited
        )
        delayed.ready_at = delayed.started
        broker.spawn(delayed.scan_in_worker())
        return delayed.answer
    wait_s = request.max_wait.total_seconds()
    # partitions of unknown (or unauthorized) topics are answered at once with their error:
    # never waited on
    waits = any(w.topic is not None and not w.denied for w in wanted)
    if not waits or answer_now(errors, total, min_bytes, wait_s, broker.stopping):
        out = build_answer(broker, version, correlation_id, wanted, blocking_ok=False)
        if out is not None:
            count_bytes_out(broker.metrics, wanted)
            return out
    delayed = _DelayedFetch(
        broker, version, correlation_id, request, wanted, max_bytes, min_bytes, observe, waited
    )
    if not waits or answer_now(errors, total, min_bytes, wait_s, broker.stopping):
        delayed.ready_at = delayed.started  # no wait, only a big read: in a worker thread
        broker.spawn(delayed.answer_from_worker())
        return delayed.answer
    return delayed.start(wait_s)


def build_answer(
    broker: BrokerView,
    version: int,
    correlation_id: int,
    wanted: list[Wanted],
    *,
    blocking_ok: bool,
) -> bytes | list[bytes | memoryview] | FileAnswer | None:
    """The framed answer of ``wanted`` as scanned; None when a read belongs in a worker thread
    and ``blocking_ok`` is false (one partition with much data: a ``FileAnswer``)."""
    if len(wanted) == 1:  # what consumers of one partition send: no grouping, one encode
        return answer_one(version, correlation_id, wanted[0], blocking_ok=blocking_ok)
    payloads: list[bytes] = []
    for w in wanted:
        info = w.read
        if info is None or info.size_in_bytes == 0:
            payloads.append(b"")
        elif info.size_in_bytes >= BLOCKING_READ_BYTES and not blocking_ok:
            return None
        else:
            payloads.append(info.read_bytes())
    by_id = version >= 13
    grouped: dict[Any, list[FetchPartitionAnswer]] = {}
    for w, records in zip(wanted, payloads, strict=True):
        grouped.setdefault(w.topic_id if by_id else w.topic, []).append(
            FetchPartitionAnswer(
                partition=w.partition,
                error_code=int(w.error),
                high_watermark=w.high_watermark,
                last_stable_offset=(
                    w.last_stable_offset if w.last_stable_offset >= 0 else w.high_watermark
                ),
                log_start_offset=w.log_start_offset,
                records=records,
                aborted_transactions=w.aborted,
            )
        )
    ctx = RequestContext(API_KEY, version, correlation_id, None, "", -1, broker)
    body = RawBody(tuple(encode_fetch_body(version, list(grouped.items()))))
    return broker.router.encode(ctx, body)


class _DelayedFetch:
    """One fetch that waits: re-scans at every wake of its partitions until it can answer."""

    __slots__ = (
        "answer",
        "broker",
        "correlation_id",
        "deadline",
        "keys",
        "loop",
        "max_bytes",
        "min_bytes",
        "observe",
        "ready_at",
        "request",
        "started",
        "timer",
        "version",
        "waited",
        "wake",
        "wanted",
    )

    def __init__(
        self,
        broker: BrokerView,
        version: int,
        correlation_id: int,
        request: FetchRequest,
        wanted: list[Wanted],
        max_bytes: int,
        min_bytes: int,
        observe: bool,
        waited: list[float] | None = None,
    ) -> None:
        self.broker = broker
        self.version = version
        self.correlation_id = correlation_id
        self.request = request
        self.wanted = wanted
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self.observe = observe
        self.waited = waited
        keys = [(w.topic, w.partition) for w in wanted if w.topic is not None]
        self.keys: list[tuple[str, int]] = list(dict.fromkeys(keys)) if len(keys) > 1 else keys
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

    def build(self, *, blocking_ok: bool) -> bytes | list[bytes | memoryview] | FileAnswer | None:
        return build_answer(
            self.broker, self.version, self.correlation_id, self.wanted, blocking_ok=blocking_ok
        )

    def _arm(self) -> None:
        wake: asyncio.Future[bool] = self.loop.create_future()
        self.wake = wake
        partitions = self.broker.partitions
        for key in self.keys:
            partitions.add(key, wake)
        wake.add_done_callback(self._woken)

    def _disarm(self, wake: asyncio.Future[bool]) -> None:
        partitions = self.broker.partitions
        for key in self.keys:
            partitions.discard(key, wake)

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
        broker = self.broker
        out: Answer
        try:
            total, errors, deferred = scan(broker.topics, self.wanted, self.max_bytes)
            if deferred:
                self.ready_at = time.perf_counter()
                broker.spawn(self.scan_in_worker())
                return
            # Expired once the timer ran (it may fire a little before ``deadline``: uvloop's
            # timers have millisecond resolution); re-arming then would wait with no timer.
            remaining = self.deadline - self.loop.time() if self.timer is not None else 0.0
            if not answer_now(errors, total, self.min_bytes, remaining, broker.stopping):
                self._arm()
                return
            self.ready_at = time.perf_counter()
            out = self.build(blocking_ok=False)
            if out is None:  # a big read: in a worker thread, then answer
                broker.spawn(self.answer_from_worker())
                return
        except Exception:
            out = self._failed()
        self._set(out)

    async def scan_in_worker(self) -> None:
        """Scan (CRC-checking old bytes read for the first time) and answer in a worker thread.

        Kafka divergence: the answer carries what the scan found even when that is less than
        ``min_bytes`` (there is data: the scan found unchecked batches below the HW); the next
        fetch finds the bytes checked and waits as usual.
        """

        def work() -> Any:
            scan(self.broker.topics, self.wanted, self.max_bytes, on_loop=False)
            return self.build(blocking_ok=True)

        out: Answer
        try:
            out = await self.broker.run_blocking(work)
        except Exception:
            out = self._failed()
        self._set(out)

    async def answer_from_worker(self) -> None:
        out: Answer
        try:
            out = await self.broker.run_blocking(lambda: self.build(blocking_ok=True))
        except Exception:
            out = self._failed()
        self._set(out)

    def _set(self, out: Any) -> None:
        if not self.answer.done():
            now = time.perf_counter()
            # The long poll's wait (until the wake that answers) is kept out of the latency.
            waited = (self.ready_at or now) - self.started
            if self.observe:
                self.broker.router.observe(API_KEY, now - self.started, waited=waited)
            elif self.waited is not None:
                self.waited.append(waited)
            count_bytes_out(self.broker.metrics, self.wanted)
            self.answer.set_result(out)

    def _context(self) -> RequestContext:
        return RequestContext(API_KEY, self.version, self.correlation_id, None, "", -1, self.broker)

    def _failed(self) -> Answer:
        return self.broker.router.failed(self._context(), self.request)
