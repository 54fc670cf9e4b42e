"""Which bytes of a segment file nobody has CRC-checked yet, and checking them on first read.

Recovery scans (and CRC-checks) only the segments above the recovery point; every other segment
is trusted at start-up. ``UncheckedBytes`` keeps, per segment, the range of bytes that were on
disk when the segment was opened and that no scan has checked: ``[low, high)`` plus one more
checked run, so that a sequential reader starting anywhere checks each byte once. Reads call
``verify_from`` for a batch in that range; damage found there is never served (the read stops
before it, see ``storage.reading``). Bytes appended since the open were checked on the way in.

A reader on the broker's event loop passes a budget (``PartitionLog.read(verify_limit=...)``):
when the batches it would return hold more unchecked bytes than that, the read raises
``CheckDeferred`` before checking anything, and the broker repeats it in a worker thread, where
the check (a pread of up to the fetch size and its CRC) may take its time.

Threading: reader threads race only to check the same bytes twice; a range is marked checked
only by the thread that checked it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .batch import BATCH_HEADER_SIZE, parse_batch_header, verify_crc
from .errors import CorruptRecordError
from .fileio import pread_all

__all__ = ["CheckDeferred", "UncheckedBytes"]

logger = logging.getLogger("tidelog.storage")

_CHUNK = 64 * 1024


class CheckDeferred(Exception):
    """A read would CRC-check more unchecked bytes than its ``verify_limit``: repeat it in a
    worker thread (without a limit)."""


class UncheckedBytes:
    """The unchecked bytes of one segment file (see the module docstring)."""

    __slots__ = ("high", "logged_at", "low", "run_end", "run_start")

    def __init__(self, size: int) -> None:
        self.low = 0
        self.high = size
        self.run_start = self.run_end = 0
        self.logged_at = -1

    def reset(self, low: int, high: int) -> None:
        """Recovery checked everything below ``low``."""
        self.low, self.high = low, high

    def needs_check(self, position: int, end: int) -> bool:
        """Whether bytes ``[position, end)`` of a batch may hold bytes no scan checked yet."""
        return (
            position < self.high
            and end > self.low
            and not (self.run_start <= position and end <= self.run_end)
        )

    def truncate(self, size: int) -> None:
        self.low, self.high = min(self.low, size), min(self.high, size)

    def verify_from(self, fd: int, path: Path, position: int, file_size: int) -> int:
        """CRC-check the unchecked batches from ``position`` (a batch start), 64 KiB at a time;
        returns where the good batches end (``position`` when the batch there is damaged)."""
        low, high = self.low, self.high
        run_start, run_end = self.run_start, self.run_end
        if run_start <= position < run_end:
            return run_end
        if position >= high:
            return file_size
        data = os.pread(fd, max(min(_CHUNK, high - position), BATCH_HEADER_SIZE), position)
        good = 0
        while good + BATCH_HEADER_SIZE <= len(data):
            try:
                header = parse_batch_header(data, good, available=file_size - position - good)
            except CorruptRecordError:
                break
            if good + header.size_in_bytes > len(data):
                if good:
                    break
                data = pread_all(fd, position, header.size_in_bytes)  # one batch over 64 KiB
            try:
                verify_crc(data, good, header)
            except CorruptRecordError as exc:
                if self.logged_at != position + good:  # once, not at every retry of a reader
                    self.logged_at = position + good
                    logger.error("%s: %s; reads stop before it", path, exc)
                break
            good += header.size_in_bytes
        end = position + good
        if position <= low:
            self.low = max(low, end)
        elif good:
            self.run_start, self.run_end = (
                (run_start, end) if position == run_end else (position, end)
            )
        return end
