"""Keyed timers and a clock for the group coordinator.

The coordinators schedule one timer per key: the classic groups' "hb:<group>:<member>",
"join:<group>" and "sync:<group>" (``rebalance.py``), the offsets' expiry
(``offset_metadata_manager.py``), the consumer and streams groups' member session and
rebalance timers (``modern.MemberTimers``) and the share groups' heartbeats; scheduling a key
again replaces its previous timer, as Kafka's coordinator timer does. Callbacks run on the
event loop thread and must not block.

``LoopTimer`` uses ``loop.call_later`` and the wall clock (commit timestamps are wall-clock
milliseconds). The tests' timer, whose time moves only when told, is
``tests/support/manual_timer.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ("Callback", "LoopTimer", "Timer")

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
