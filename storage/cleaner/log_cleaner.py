"""The background log cleaner: ``log.cleaner.threads`` threads compacting logs (Kafka's LogCleaner).

Each thread loops: ask the ``LogCleanerManager`` for the filthiest compacted log, clean it
(``Cleaner``, one pass), record the new first dirty offset in ``cleaner-offset-checkpoint``;
when no log needs cleaning, sleep ``log.cleaner.backoff.ms`` (``wake`` cuts the sleep short).
The offset map budget (``log.cleaner.dedupe.buffer.size``) and the I/O buffer are split between
the threads; one throttle (``log.cleaner.io.max.bytes.per.second``) covers them all.

Never blocking produce or fetch: a pass reads sealed segments through its own file descriptors
and writes ``.cleaned`` files without any partition lock; the lock is held only for the renames
and list update of each swap (``swap``). Readers that looked segments up before a swap keep the
old files (renamed ``.deleted``, removed after ``file.delete.delay.ms``).

``shutdown`` sets the stop flag (passes abort at the next batch, leaving no half swap) and joins
the threads. ``clean_log`` runs one pass on a given log in the caller's thread (tests, tools);
``run_once`` does one scheduling round in the caller's thread.

Threading: threads are daemons named ``tidelog-cleaner-N``; all shared state lives in the
manager (its lock) and the logs (their locks).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .cleaner import Cleaner, CleaningAbortedError, CleanResult, LogToClean
from .config import CleanerConfig, CompactionConfig
from .manager import LogCleanerManager
from .throttler import Throttler

if TYPE_CHECKING:
    from ..log import PartitionLog
    from ..manager import LogManager

__all__ = ["LogCleaner"]

logger = logging.getLogger("tidelog.storage.cleaner")


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogCleaner:
    """Owns the cleaner threads, the shared throttle and the ``LogCleanerManager``."""

    def __init__(
        self,
        log_manager: LogManager,
        config: CleanerConfig | None = None,
        *,
        compaction_config: Callable[[PartitionLog], CompactionConfig] | None = None,
        clock: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        self.config = config or CleanerConfig()
        self.log_manager = log_manager
        self.clock = clock
        default = CompactionConfig()
        self.manager = LogCleanerManager(log_manager, compaction_config or (lambda _log: default))
        log_manager.add_before_delete_hook(self.manager.abort_cleaning)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.throttler = Throttler(self.config.io_max_bytes_per_second, stop=self._stop)
        self._threads: list[threading.Thread] = []
        self.passes = 0
        self.last_result: CleanResult | None = None

    def _new_cleaner(self, share: int) -> Cleaner:
        return Cleaner(
            dedupe_buffer_size=max(self.config.dedupe_buffer_size // share, 1024),
            io_buffer_size=max(self.config.io_buffer_size // share, 64 * 1024),
            throttler=self.throttler,
            clock=self.clock,
            check_done=self._check_done,
        )

    def _check_done(self, log: PartitionLog) -> None:
        if self._stop.is_set():
            raise CleaningAbortedError("the cleaner is shutting down")
        if log.closed or self.manager.is_aborted(log):
            raise CleaningAbortedError(f"cleaning of {log.topic}-{log.partition} was aborted")

    # -- life cycle ----------------------------------------------------------------------------
    def startup(self) -> None:
        """Start the threads (none when ``log.cleaner.enable`` is false or threads is 0)."""
        if not self.config.enable or self.config.threads <= 0 or self._threads:
            return
        self._stop.clear()
        for i in range(self.config.threads):
            cleaner = self._new_cleaner(self.config.threads)
            thread = threading.Thread(
                target=self._run, args=(cleaner,), name=f"tidelog-cleaner-{i}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        logger.info("started %d log cleaner thread(s)", len(self._threads))

    def shutdown(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout_s)
            if thread.is_alive():
                logger.warning("log cleaner thread %s did not stop in time", thread.name)
        self._threads = []

    def wake(self) -> None:
        """Cut the current back-off sleep short (e.g. after a topic became compacted)."""
        self._wake.set()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    # -- work ----------------------------------------------------------------------------------
    def _run(self, cleaner: Cleaner) -> None:
        while not self._stop.is_set():
            try:
                worked = self._clean_filthiest(cleaner)
            except Exception:  # never let a thread die
                logger.exception("log cleaner round failed")
                worked = False
            if not worked and not self._stop.is_set():
                self._wake.wait(self.config.backoff_ms / 1000)
                self._wake.clear()

    def _clean_filthiest(self, cleaner: Cleaner) -> bool:
        now = self.clock()
        to_clean = self.manager.grab_filthiest_compacted_log(now)
        if to_clean is None:
            return False
        self._clean(cleaner, to_clean.log, to_clean, now)
        return True

    def _clean(
        self, cleaner: Cleaner, log: PartitionLog, to_clean: LogToClean, now: int
    ) -> CleanResult | None:
        try:
            result = cleaner.clean(to_clean, now)
        except CleaningAbortedError as exc:
            logger.info("%s", exc)
            self.manager.done_aborted(log)
            return None
        except Exception:
            if log.closed or self.manager.is_aborted(log):
                # The log was deleted or closed under the pass (its files may be gone).
                logger.info(
                    "cleaning of %s-%d stopped: the log was closed", log.topic, log.partition
                )
                self.manager.done_aborted(log)
                return None
            logger.exception(
                "cleaning %s-%d failed; it is marked uncleanable until restart",
                log.topic,
                log.partition,
            )
            self.manager.mark_uncleanable(log)
            return None
        self.manager.done_cleaning(log, result.end_offset, result.earliest_delete_horizon)
        self.passes += 1
        self.last_result = result
        return result

    def run_once(self, now_ms: int | None = None) -> CleanResult | None:
        """One scheduling round in the caller's thread; the pass's result, or None."""
        now = self.clock() if now_ms is None else now_ms
        to_clean = self.manager.grab_filthiest_compacted_log(now)
        if to_clean is None:
            return None
        return self._clean(self._new_cleaner(1), to_clean.log, to_clean, now)

    def clean_log(self, log: PartitionLog, now_ms: int | None = None) -> CleanResult | None:
        """One pass over ``log`` now, whatever its dirty ratio (None if it is busy/aborted)."""
        now = self.clock() if now_ms is None else now_ms
        to_clean = self.manager.begin_cleaning(log, now)
        if to_clean is None:
            return None
        return self._clean(self._new_cleaner(1), log, to_clean, now)
