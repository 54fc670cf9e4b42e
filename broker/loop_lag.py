"""A watchdog of the event loop: how late a timer fires tells how long the loop was blocked.

Every ``INTERVAL_S`` a timer measures how late it runs; the lateness is the longest time some
callback (or the GIL held by another thread, or a CPU taken by another process) kept the loop
from running. ``LoopLag`` keeps the largest lateness since it was last read (``take_max_s``), the
largest ever and a count of stalls of at least ``stall_ms`` (default ``STALL_MS``), and logs a
warning for such a stall at most once every ``LOG_EVERY_S`` seconds (with how many there were
meanwhile). The cost is one timer callback every ``INTERVAL_S`` (about 2 us, 100 times a second).

It is a debugging aid: a lag under a millisecond is normal, tens of milliseconds mean something
ran on the loop that belongs in a worker thread (or the machine is overloaded: compare with the
load average). ``tidelog_event_loop_lag_seconds`` and ``tidelog_event_loop_stalls_total``
expose it (``broker/metrics.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import Metric

__all__ = ["INTERVAL_S", "STALL_MS", "LoopLag", "running_loop"]

log = logging.getLogger("tidelog.loop")

INTERVAL_S = 0.01
STALL_MS = 100.0
LOG_EVERY_S = 10.0


class LoopLag:
    """The watchdog (a broker service: ``start``/``stop``)."""

    def __init__(self, stall_ms: float = STALL_MS) -> None:
        self.stall_s = stall_ms / 1000
        self.max_s = 0.0  #: the largest lateness since ``take_max_s``
        self.worst_s = 0.0  #: the largest lateness since start
        self.stalls = 0  #: timers at least ``stall_ms`` late
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._logged_at = 0.0
        self._unlogged = 0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._due = time.perf_counter() + INTERVAL_S
        self._handle = loop.call_later(INTERVAL_S, self._tick, loop)

    async def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def take_max_s(self) -> float:
        """The largest lateness since the last call (a scrape), then start over."""
        value, self.max_s = self.max_s, 0.0
        return value

    def families(self) -> Iterator[Metric]:
        """The Prometheus families (``Metrics.extra_families``; at scrape time)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        yield GaugeMetricFamily(
            "tidelog_event_loop_lag_seconds",
            "The longest the event loop was late running a timer since the last scrape "
            "(how long it was blocked).",
            value=self.take_max_s(),
        )
        yield CounterMetricFamily(
            "tidelog_event_loop_stalls",
            f"Times the event loop was blocked for {self.stall_s * 1000:.0f} ms or more.",
            value=self.stalls,
        )

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        now = time.perf_counter()
        late = now - self._due
        if late > self.max_s:
            self.max_s = late
            if late > self.worst_s:
                self.worst_s = late
        if late >= self.stall_s:
            self.stalls += 1
            self._unlogged += 1
            if now - self._logged_at >= LOG_EVERY_S:
                log.warning(
                    "the event loop was blocked for %.0f ms (%d stall(s) of %.0f ms or more "
                    "since the last warning; load average %.1f)",
                    late * 1000,
                    self._unlogged,
                    self.stall_s * 1000,
                    _load(),
                )
                self._logged_at = now
                self._unlogged = 0
        self._due = now + INTERVAL_S
        self._handle = loop.call_later(INTERVAL_S, self._tick, loop)


class _LastLoop(threading.local):
    loop: asyncio.AbstractEventLoop | None = None


#: per thread, the loop ``running_loop`` last found running in it
_last = _LastLoop()


def running_loop() -> asyncio.AbstractEventLoop:
    """The running loop, as ``asyncio.get_running_loop()``, without its ``getpid`` system call
    on each call: the loop found is kept per thread while it runs. Call it on the loop (a
    callback, a handler; outside one it raises RuntimeError as ``get_running_loop`` does unless
    this thread's last loop now runs in another thread). The hot paths (a delayed fetch, a held
    Produce answer) call it once per request."""
    loop = _last.loop
    if loop is not None and loop.is_running():
        return loop
    loop = _last.loop = asyncio.get_running_loop()
    return loop


def _forget() -> None:
    """In a forked child the parent's loop is not running, whatever its state says."""
    _last.loop = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return -1.0
