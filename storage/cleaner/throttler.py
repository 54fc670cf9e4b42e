"""The cleaner's I/O throttle (Kafka's Throttler for ``log.cleaner.io.max.bytes.per.second``).

Every byte the cleaners read or write is reported with ``maybe_throttle``. Every
``check_interval_ms`` the observed rate is compared with the desired one; when it is higher the
caller sleeps long enough to bring it back down. One throttler is shared by all cleaner threads,
so the limit is for the cleaner as a whole (as in Kafka).

Threading: ``maybe_throttle`` may be called from several threads; a lock guards the counters,
the sleep happens outside it. The sleep is ``stop.wait`` so shutdown is not delayed by it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["Throttler"]


class Throttler:
    """Sleep to keep an observed byte rate at or below ``desired_rate_per_second``."""

    def __init__(
        self,
        desired_rate_per_second: float,
        *,
        check_interval_ms: int = 300,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
        stop: threading.Event | None = None,
    ) -> None:
        self.desired_rate_per_second = desired_rate_per_second
        self._check_interval_ns = check_interval_ms * 1_000_000
        self._now = monotonic_ns
        self._stop = stop or threading.Event()
        self._lock = threading.Lock()
        self._period_start = monotonic_ns()
        self._observed = 0.0

    @property
    def unlimited(self) -> bool:
        return math.isinf(self.desired_rate_per_second)

    def maybe_throttle(self, observed: float) -> None:
        if self.unlimited or observed <= 0:
            return
        sleep_s = 0.0
        with self._lock:
            self._observed += observed
            now = self._now()
            elapsed = now - self._period_start
            if elapsed <= self._check_interval_ns:
                return
            rate = self._observed / (elapsed / 1e9)
            if rate > self.desired_rate_per_second:
                wanted_s = self._observed / self.desired_rate_per_second
                sleep_s = wanted_s - elapsed / 1e9
            self._period_start = now + int(max(sleep_s, 0.0) * 1e9)
            self._observed = 0.0
        if sleep_s > 0:
            self._stop.wait(sleep_s)
