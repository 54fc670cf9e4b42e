"""Loading a partition directory at start-up: stray files, swaps, index checks, recovery.

A partition directory ``<topic>-<partition>`` holds segments (``NNNNNNNNNNNNNNNNNNNN.log`` +
``.index`` + ``.timeindex``), ``partition.metadata`` and possibly left-overs of operations a
crash interrupted. Loading, in order (as Kafka's LogLoader):

1. ``*.deleted`` files (segments retention had scheduled for deletion) are removed;
   ``*.cleaned`` files (an unfinished compaction's output) are removed.
2. ``*.swap`` files: an index swap is removed (indexes are rebuilt); a log swap whose base
   offset is at or above the smallest ``.cleaned`` base offset is incomplete and removed;
   otherwise the swap is completed as Kafka does: live segments inside its offset range are
   removed and the swap is renamed to its live name, its indexes rebuilt.
3. Index files without a ``.log`` file are removed.
4. Each segment is opened. Without a clean-shutdown marker, every segment that ends above the
   recovery point is *recovered*: scanned batch by batch (size, magic, CRC, offset order), cut
   at the first invalid byte, its indexes rebuilt; once a segment had to be cut, every later
   segment is deleted. One warning line names each repaired segment and the bytes cut.
   Other segments (and all of them after a clean shutdown) load their indexes with a sanity
   check (size a multiple of the entry size, monotonic entries, last entry inside the file,
   tail parseable); a missing or failing index is rebuilt from the log without cutting it, except
   for the last segment, whose damaged tail is cut as in recovery.
5. An empty directory gets a first segment at the log start offset. The last segment becomes
   active (its index files are left as found, not preallocated: see
   ``LogSegment.make_active``); the others have trimmed index files.

Progress: a partition with unflushed bytes to check logs, as Kafka's log loader does, where
its recovery stands at most every ``PROGRESS_INTERVAL_S`` (``Recovering segment 2 of 3 of t-0
(base offset 1042): 1408 of 3072 MB checked (45%), 1.9 s``, also from inside a long segment) and
a summary line when it took that long or checked ``PROGRESS_SUMMARY_BYTES`` or more; the
per-segment start line is DEBUG (20,000 partitions after a crash would print 20,000 of them).

Damage in a segment below the recovery point is not scanned for at start-up; reads validate
batch headers and raise ``CorruptRecordError`` (CORRUPT_MESSAGE) when they meet it.

Threading: runs before the partition is shared; no locking needed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import segment_recovery
from .batch import BATCH_HEADER_SIZE, parse_batch_header
from .config import LogConfig
from .errors import CorruptRecordError
from .file_handles import UNBOUNDED, FileHandleCache
from .index import IndexCorruptError
from .segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIMEINDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from .transaction_index import TXNINDEX_SUFFIX

__all__ = ["LoadedLog", "RecoveryProgress", "load_segments"]

logger = logging.getLogger("tidelog.storage")

#: A long recovery logs where it stands at most this often (seconds).
PROGRESS_INTERVAL_S = 3.0
#: A recovery that checked at least this many bytes logs a summary line at INFO.
PROGRESS_SUMMARY_BYTES = 256 * 1024 * 1024
_MB = 1024 * 1024

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


@dataclass(frozen=True, slots=True)
class LoadedLog:
    segments: list[LogSegment]
    recovered_segments: int
    truncated_bytes: int
    #: Base offset of the first segment recovered (its ``.txnindex`` and those after it are
    #: rebuilt by the producer-state replay); None when none was.
    first_recovered_base: int | None = None
    #: The directory's file names after the stray files went (the producer-state loader
    #: finds its snapshots among them instead of listing the directory again).
    names: frozenset[str] = frozenset()


def _base_offset_of(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    if len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _clean_stray_files(directory: Path) -> set[str]:
    """Remove the left-overs of interrupted operations; returns the names in the directory
    afterwards (one listing when there was nothing to clean, the usual case)."""
    names = os.listdir(directory)
    changed = False
    min_cleaned: int | None = None
    swaps: list[Path] = []
    for name in sorted(names):
        if name.endswith(DELETED_SUFFIX):
            changed = True
            logger.info("removing %s left by an interrupted deletion", directory / name)
            _unlink(directory / name)
        elif name.endswith(CLEANED_SUFFIX):
            changed = True
            base = _base_offset_of(name)
            if base is not None:
                min_cleaned = base if min_cleaned is None else min(min_cleaned, base)
            logger.info("removing %s left by an interrupted compaction", directory / name)
            _unlink(directory / name)
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(directory / name)
    if swaps:
        changed = True
    for swap in swaps:
        live_name = swap.name[: -len(SWAP_SUFFIX)]
        base = _base_offset_of(live_name)
        if not live_name.endswith(LOG_SUFFIX) or base is None:
            _unlink(swap)  # index swaps: rebuilt from the log
            continue
        if min_cleaned is not None and base >= min_cleaned:
            logger.info("removing incomplete swap %s", swap)
            _unlink(swap)
            continue
        _complete_swap(directory, swap, base)
    present = set(os.listdir(directory)) if changed else set(names)
    # Index files whose log is gone.
    for name in list(present):
        if name.endswith((INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX)):
            base = _base_offset_of(name)
            if base is not None and f"{segment_file_name(base)}{LOG_SUFFIX}" not in present:
                logger.info("removing orphan index %s", directory / name)
                _unlink(directory / name)
                present.discard(name)
    return present


def _swap_next_offset(swap: Path, base: int) -> int:
    next_offset = base
    size = swap.stat().st_size
    with open(swap, "rb") as f:
        position = 0
        while position < size:
            head = os.pread(f.fileno(), BATCH_HEADER_SIZE, position)
            try:
                header = parse_batch_header(head, 0, available=size - position)
            except CorruptRecordError:
                break
            next_offset = header.next_offset
            position += header.size_in_bytes
    return next_offset


def _complete_swap(directory: Path, swap: Path, base: int) -> None:
    next_offset = _swap_next_offset(swap, base)
    for path in list(directory.iterdir()):
        other = _base_offset_of(path.name)
        if other is None or not path.name.endswith(
            (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX)
        ):
            continue
        if base <= other < max(next_offset, base + 1):
            logger.info("removing %s replaced by swap %s", path, swap)
            _unlink(path)
    for suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX):
        _unlink(directory / f"{segment_file_name(base)}{suffix}")
    live = swap.with_name(swap.name[: -len(SWAP_SUFFIX)])
    os.replace(swap, live)
    logger.info("completed swap %s -> %s", swap.name, live.name)


class RecoveryProgress:
    """The progress lines of one partition's recovery (see the module docstring)."""

    def __init__(
        self,
        name: str,
        segment_sizes: list[int],
        recovery_point: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = PROGRESS_INTERVAL_S,
    ) -> None:
        self.name = name
        self.recovery_point = recovery_point
        self.total_bytes = sum(segment_sizes)
        self.total = len(segment_sizes)
        self._clock = clock
        self._interval_s = interval_s
        self.started = self._logged = clock()
        self.number = 0  #: the segment being recovered, from 1
        self.base_offset = 0
        self.done_bytes = 0  #: bytes of the segments recovered before the current one
        self._current_size = 0
        self.lines = 0  #: progress lines logged (tests read it)

    def start_segment(self, base_offset: int, size: int) -> None:
        if self.number:
            self.done_bytes += self._current_size
        self.number += 1
        self.base_offset = base_offset
        self._current_size = size
        logger.debug(
            "Recovering unflushed segment %d (%d of %d) of %s from recovery point %d",
            base_offset,
            self.number,
            self.total,
            self.name,
            self.recovery_point,
        )
        self.scanned(0)

    def scanned(self, position: int) -> None:
        """The current segment's scan reached ``position``: log if the interval passed."""
        now = self._clock()
        if now - self._logged < self._interval_s:
            return
        self._logged = now
        self.lines += 1
        checked = self.done_bytes + position
        logger.info(
            "Recovering segment %d of %d of %s (base offset %d): %.1f of %.1f MB checked "
            "(%d%%), %.1f s",
            self.number,
            self.total,
            self.name,
            self.base_offset,
            checked / _MB,
            self.total_bytes / _MB,
            100 * checked // max(self.total_bytes, 1),
            now - self.started,
        )

    def finish(self, truncated_bytes: int) -> None:
        elapsed = self._clock() - self.started
        long_one = elapsed >= self._interval_s or self.total_bytes >= PROGRESS_SUMMARY_BYTES
        logger.log(
            logging.INFO if long_one else logging.DEBUG,
            "Recovered %s from recovery point %d: %d segment(s), %.1f MB checked, %d bytes cut, "
            "in %.2f s",
            self.name,
            self.recovery_point,
            self.number,
            self.total_bytes / _MB,
            truncated_bytes,
            elapsed,
        )


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    now_ms: int,
    recovery_point: int,
    log_start_offset: int,
    clean_shutdown: bool,
    handles: FileHandleCache = UNBOUNDED,
    new: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> LoadedLog:
    """Open (and recover as needed) every segment of a partition directory.

    ``new``: the directory was just created (nothing to look for): one empty segment.
    ``clock`` times the progress lines (monotonic seconds).
    """
    if new:
        segment = LogSegment(
            directory, max(log_start_offset, 0), config, now_ms=now_ms, handles=handles
        )
        segment.make_active(config)
        return LoadedLog([segment], 0, 0, None, frozenset())
    present = _clean_stray_files(directory)
    bases = sorted(
        base
        for name in present
        if name.endswith(LOG_SUFFIX) and (base := _base_offset_of(name)) is not None
    )
    progress: RecoveryProgress | None = None
    if not clean_shutdown:
        unflushed_sizes = [
            (directory / f"{segment_file_name(base)}{LOG_SUFFIX}").stat().st_size
            for i, base in enumerate(bases)
            if i == len(bases) - 1 or bases[i + 1] > recovery_point
        ]
        if unflushed_sizes:
            progress = RecoveryProgress(
                directory.name, unflushed_sizes, recovery_point, clock=clock
            )
    segments: list[LogSegment] = []
    recovered = 0
    truncated_total = 0
    first_recovered: int | None = None
    for i, base in enumerate(bases):
        name = segment_file_name(base)
        indexes_present = (
            f"{name}{INDEX_SUFFIX}" in present and f"{name}{TIMEINDEX_SUFFIX}" in present
        )
        segment = LogSegment(directory, base, config, now_ms=now_ms, handles=handles, names=present)
        is_last = i == len(bases) - 1
        next_base = bases[i + 1] if not is_last else None
        prev_last = segments[-1].next_offset - 1 if segments else None
        unflushed = next_base is None or next_base > recovery_point
        cut = 0
        if not clean_shutdown and unflushed:
            assert progress is not None  # counted above: the same rule
            progress.start_segment(base, segment.size)
            cut = segment_recovery.recover(
                segment,
                config.index_interval_bytes,
                prev_last_offset=prev_last,
                progress=progress.scanned,
            )
            segment.txn_index.reset()  # rebuilt from the log by the producer-state replay
            recovered += 1
            if first_recovered is None:
                first_recovered = base
        else:
            try:
                if not indexes_present:
                    raise IndexCorruptError("index files missing")
                segment_recovery.load_indexes(segment)
            except IndexCorruptError as exc:
                logger.warning("rebuilding indexes of %s: %s", segment.log_path, exc)
                if is_last:
                    cut = segment_recovery.recover(
                        segment, config.index_interval_bytes, prev_last_offset=prev_last
                    )
                    segment.txn_index.reset()
                    if first_recovered is None:
                        first_recovered = base
                else:
                    # Kafka divergence: Kafka's recoverSegment would also cut this file; the
                    # bytes are kept (reads raise CORRUPT_MESSAGE there) and so are later
                    # segments, which hold data the recovery point says was flushed.
                    _rebuild_without_cut(segment, config, next_base)
        segments.append(segment)
        truncated_total += cut
        if cut > 0 and not is_last:
            for later in bases[i + 1 :]:
                later_name = segment_file_name(later)
                logger.warning(
                    "deleting segment %s after the damaged segment %s",
                    directory / f"{later_name}{LOG_SUFFIX}",
                    segment.log_path,
                )
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX):
                    _unlink(directory / f"{later_name}{suffix}")
            break
    if progress is not None:
        progress.finish(truncated_total)
    if not segments:
        # As Kafka: an empty log starts at its log start offset.
        segments.append(
            LogSegment(directory, max(log_start_offset, 0), config, now_ms=now_ms, handles=handles)
        )
    for segment in segments[:-1]:
        segment.seal()
        segment.release_index_files()  # no-op while a rebuilt index awaits its fsync
    # A segment found on disk keeps its index files as they are; a first one made here gets
    # them preallocated, as a roll does.
    segments[-1].make_active(config, preallocate=not bases)
    return LoadedLog(segments, recovered, truncated_total, first_recovered, frozenset(present))


def _rebuild_without_cut(segment: LogSegment, config: LogConfig, next_base: int | None) -> None:
    """Rebuild a non-last segment's indexes from its valid prefix; the file stays as is.

    Reads of the damaged part will raise CORRUPT_MESSAGE; later segments are kept.
    """
    segment_recovery.recover_indexes_only(segment, config.index_interval_bytes)
    if next_base is not None and segment.next_offset < next_base and segment.size > 0:
        logger.warning(
            "segment %s is damaged below the recovery point (valid up to offset %d)",
            segment.log_path,
            segment.next_offset,
        )
