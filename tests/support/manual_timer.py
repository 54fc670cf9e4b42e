"""A deterministic ``Timer`` (``broker/group/timer.py``) for the coordinator tests: time moves
only when ``advance`` is called, firing what falls due in order."""

from __future__ import annotations

import heapq
import itertools

from tidelog.broker.group.timer import Callback

__all__ = ("ManualTimer",)


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
