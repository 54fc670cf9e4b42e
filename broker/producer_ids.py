"""Producer id allocation for InitProducerId: ids never repeat, across restarts and crashes.

The broker hands out ids from a block reserved on disk before any id of it is used. The file
``tidelog-producer-ids`` in the first log dir is a two-line text file::

    0                     format version
    <next_block_start>    every id below this may have been handed out; none ever will again

Reserving a block ``[start, start + 1000)`` writes ``start + 1000`` to ``tidelog-producer-ids.tmp``,
fsyncs it, renames it over the file and fsyncs the directory; only then are ids of the block
handed out. A crash at any point leaves either the old or the new file (never a mix), so after a
restart allocation resumes at or above every id handed out before; the unused rest of the block
is skipped (at most 999 ids lost per restart). A missing file means "start at 0", but the start
is also raised above the largest producer id any partition remembers (``seen_producer_ids``), so
deleting the file cannot make an id repeat for a producer a partition still knows. A file that
cannot be parsed stops the broker (a silent restart at 0 would break deduplication).

Kafka divergence: Kafka's controller persists the next block in the KRaft metadata log
(ProducerIdsRecord) and brokers ask for blocks with AllocateProducerIds; a single node keeps the
counter in this file instead. Block size 1000 as in Kafka.

Threading: ``generate_producer_id`` runs on the event loop; the file write (fsync) runs in a worker
thread through ``run_blocking``; an asyncio lock makes concurrent callers share one reservation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tidelog.storage.metadata import atomic_write

if TYPE_CHECKING:
    from tidelog.storage import LogManager

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "PRODUCER_IDS_FILE", "ProducerIdManager", "ProducerIdsError"]

log = logging.getLogger("tidelog.producer_ids")

PRODUCER_IDS_FILE = "tidelog-producer-ids"
PRODUCER_ID_BLOCK_SIZE = 1000
FORMAT_VERSION = 0
MAX_PRODUCER_ID = 2**63 - 1

T = TypeVar("T")
RunBlocking = Callable[..., Awaitable[Any]]


class ProducerIdsError(Exception):
    """The producer id file is unreadable, or the id space is exhausted."""


def read_next_block_start(path: Path) -> int:
    """The reserved end stored in ``path`` (0 if the file does not exist)."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise ProducerIdsError(f"cannot read {path}: {exc}") from exc
    lines = text.split()
    if len(lines) != 2 or lines[0] != str(FORMAT_VERSION) or not lines[1].isdigit():
        raise ProducerIdsError(
            f"{path} is not a tidelog producer id file (expected '{FORMAT_VERSION}' and a "
            f"number on two lines, got {text[:80]!r}); refusing to start, as reusing producer "
            "ids would break idempotent producers. If it was damaged by a crash, delete it: ids "
            "then continue above the largest one any partition remembers"
        )
    return int(lines[1])


def write_next_block_start(path: Path, value: int) -> None:
    """Persist ``value`` crash-safely: tmp + fsync + rename + directory fsync."""
    atomic_write(path, f"{FORMAT_VERSION}\n{value}\n".encode("ascii"))


async def _run_inline(fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)


class ProducerIdManager:
    """Hands out producer ids from blocks reserved in ``<log_dir>/tidelog-producer-ids``."""

    def __init__(
        self,
        log_dir: Path,
        *,
        run_blocking: RunBlocking = _run_inline,
        seen_producer_ids: Callable[[], Iterable[int]] | None = None,
        block_size: int = PRODUCER_ID_BLOCK_SIZE,
    ) -> None:
        if block_size < 1:
            raise ValueError("block_size must be >= 1")
        self.path = log_dir / PRODUCER_IDS_FILE
        self._run_blocking = run_blocking
        self._seen_producer_ids = seen_producer_ids
        self.block_size = block_size
        self._next_id = 0
        self._block_end = 0  # ids in [_next_id, _block_end) are reserved and unused
        self._lock = asyncio.Lock()
        self._started = False

    @classmethod
    def for_log_manager(
        cls, log_manager: LogManager, log_dir: Path, run_blocking: RunBlocking
    ) -> ProducerIdManager:
        """The broker's manager: file in ``log_dir`` (the first log dir), file writes through
        ``run_blocking`` (the worker pool), ids kept above every producer id a partition's
        producer state knows."""

        def seen() -> Iterable[int]:
            for partition_log in log_manager.logs():
                yield from partition_log.producer_state.producers

        return cls(log_dir, run_blocking=run_blocking, seen_producer_ids=seen)

    def load(self) -> None:
        """Read the file (blocking). Ids resume at the stored block start, or above the
        largest id a partition remembers, whichever is higher."""
        start = read_next_block_start(self.path)
        if self._seen_producer_ids is not None:
            seen = max(self._seen_producer_ids(), default=-1)
            if seen >= start:
                log.warning(
                    "%s says ids below %d were handed out, but a partition knows producer id "
                    "%d; continuing above it",
                    self.path,
                    start,
                    seen,
                )
                start = seen + 1
        self._next_id = start
        self._block_end = start
        self._started = True

    async def start(self) -> None:
        await self._run_blocking(self.load)

    async def stop(self) -> None:
        """Nothing to save: the reserved end is on disk before any id of a block is used."""

    @property
    def next_producer_id(self) -> int:
        return self._next_id

    def _reserve_block(self, start: int) -> int:
        end = start + self.block_size
        if end > MAX_PRODUCER_ID:
            raise ProducerIdsError("the producer id space is exhausted")
        write_next_block_start(self.path, end)
        log.info("reserved producer ids [%d, %d)", start, end)
        return end

    async def generate_producer_id(self) -> int:
        """The next unused producer id (reserving a new block on disk when needed)."""
        if not self._started:
            raise ProducerIdsError("ProducerIdManager.start() was not called")
        if self._next_id >= self._block_end:
            async with self._lock:
                if self._next_id >= self._block_end:
                    start = self._next_id
                    self._block_end = await self._run_blocking(self._reserve_block, start)
        producer_id = self._next_id
        self._next_id += 1
        return producer_id

    def generate_producer_id_blocking(self) -> int:
        """Synchronous variant for tools and tests (no event loop)."""
        if not self._started:
            self.load()
        if self._next_id >= self._block_end:
            self._block_end = self._reserve_block(self._next_id)
        producer_id = self._next_id
        self._next_id += 1
        return producer_id
