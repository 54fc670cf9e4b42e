"""Keyed timers and a clock for the group coordinator.

The coordinator schedules one timer per key ("heartbeat:<group>:<member>", "join:<group>",
"sync:<group>", "expire-offsets"); scheduling a key again replaces its previous timer, as
Kafka's coordinator timer does. Callbacks run on the event loop thread and must not block.

``LoopTimer`` uses ``loop.call_later`` and the wall clock (commit timestamps are wall-clock
milliseconds). ``ManualTimer`` is for tests: time moves only when ``advance`` is called.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ("LoopTimer", "ManualTimer", "Timer")

Callback = Callable[[], None]


class Timer(Protocol):
    def now_ms(self) -> int:
        """Wall-clock time in milliseconds."""
        ...

    def schedule(self, key: str, delay_ms: int, callback: Callback) -> None:
        """Run ``callback`` after ``delay_ms``, replacing any timer under ``key``."""
        ...

    def cancel(self, key: str) -> None:
        """Forget the timer under ``key`` (no-op when there is none)."""
        ...

    def cancel_all(self) -> None: ...


class LoopTimer:
    """Timers on an asyncio event loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self._loop = loop
        self._clock = clock
        self._handles: dict[str, asyncio.TimerHandle] = {}

    def now_ms(self) -> int:
        return self._clock() if self._clock is not None else time.time_ns() // 1_000_000

    def schedule(self, key: str, delay_ms: int, callback: Callback) -> None:
        self.cancel(key)
        loop = self._loop or asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000.0, self._fire, key, callback)

    def _fire(self, key: str, callback: Callback) -> None:
        self._handles.pop(key, None)
        callback()

    def cancel(self, key: str) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def pending(self) -> list[str]:
        return sorted(self._handles)


class ManualTimer:
    """A deterministic timer for tests: ``advance(ms)`` fires what falls due, in order."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._seq = itertools.count()
        self._heap: list[tuple[int, int, str]] = []
        self._live: dict[str, tuple[int, Callback]] = {}

    def now_ms(self) -> int:
        return self._now

    def schedule(self, key: str, delay_ms: int, callback: Callback) -> None:
        seq = next(self._seq)
        self._live[key] = (seq, callback)
        heapq.heappush(self._heap, (self._now + max(delay_ms, 0), seq, key))

    def cancel(self, key: str) -> None:
        self._live.pop(key, None)

    def cancel_all(self) -> None:
        self._live.clear()
        self._heap.clear()

    def pending(self) -> list[str]:
        return sorted(self._live)

    def deadline(self, key: str) -> int | None:
        live = self._live.get(key)
        if live is None:
            return None
        return next((due for due, seq, k in self._heap if k == key and seq == live[0]), None)

    def advance(self, ms: int) -> None:
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            due, seq, key = heapq.heappop(self._heap)
            live = self._live.get(key)
            if live is None or live[0] != seq:
                continue
            del self._live[key]
            self._now = max(self._now, due)
            live[1]()
        self._now = target
