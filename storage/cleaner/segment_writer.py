"""Writing a cleaned segment: ``.cleaned`` files, then ``.swap`` files, ready to go live.

For a group of segments whose first base offset is ``N`` (20 digits) the cleaner writes::

    N.log.cleaned         the kept batches, back to back (same format as any ``.log``)
    N.index.cleaned       offset index built as the batches are written
    N.timeindex.cleaned   time index, with the final (max timestamp) entry of an inactive segment

The index entries follow the rule ``storage.segment`` uses on append and recovery uses on
rebuild (an entry before a batch once more than ``index.interval.bytes`` were written since the
last one), so the indexes are the ones a rebuild would produce. ``finish`` fsyncs the three
files, gives the log file the modification time of the last segment it replaces (as Kafka, so
time-based retention does not restart), then renames ``N.index.cleaned`` and
``N.timeindex.cleaned`` to ``.swap`` and ``N.log.cleaned`` to ``N.log.swap`` last, and fsyncs the
directory. From then on the swap is committed: a crash before the live rename is completed by
recovery (``storage.recovery``: live segments inside the swap's offset range are removed, the
swap renamed, its indexes rebuilt). A crash before ``N.log.swap`` exists leaves ``.cleaned``
files (and maybe index ``.swap`` files), which recovery deletes: the old segments stay.

``abort`` closes and removes whatever the writer created.

Threading: one cleaner thread owns a writer; nothing else sees its files until the swap.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..batch import HEADER_STRUCT
from ..errors import KafkaStorageError
from ..fileio import fsync_dir, write_all
from ..index import OffsetIndex, TimeIndex
from ..segment import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, segment_file_name

__all__ = ["CLEANED_SUFFIX", "SWAP_SUFFIX", "CleanedSegmentWriter"]

logger = logging.getLogger("tidelog.storage.cleaner")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


class CleanedSegmentWriter:
    """Accumulates cleaned batches into ``N.log.cleaned`` and its two indexes."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        segment_index_bytes: int,
        buffer_size: int,
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        name = segment_file_name(base_offset)
        self.live_paths = tuple(
            directory / f"{name}{s}" for s in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)
        )
        self._interval = index_interval_bytes
        self._buffer_size = buffer_size
        for live in self.live_paths:
            for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
                _unlink(live.with_name(live.name + suffix))
        self.log_path = self._cleaned(self.live_paths[0])
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.offset_index = OffsetIndex(
            self._cleaned(self.live_paths[1]), base_offset, segment_index_bytes
        )
        self.time_index = TimeIndex(
            self._cleaned(self.live_paths[2]), base_offset, segment_index_bytes
        )
        self.size = 0
        self.batches = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_max_timestamp: int | None = None
        self.bytes_since_last_index_entry = 0
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._written = 0
        self.state = "cleaned"

    @staticmethod
    def _cleaned(live: Path) -> Path:
        return live.with_name(live.name + CLEANED_SUFFIX)

    def append(self, batch: bytes) -> None:
        """Add one whole batch (its offsets above every earlier one's)."""
        fields = HEADER_STRUCT.unpack_from(batch, 0)
        base, last_offset, max_ts = fields[0], fields[0] + fields[6], fields[8]
        if self.first_batch_max_timestamp is None:
            self.first_batch_max_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index_entry > self._interval:
            self.offset_index.append(last_offset, self.size)
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += len(batch)
        if base < self.next_offset:
            raise ValueError(f"batch at offset {base} is below {self.next_offset}")
        self.next_offset = last_offset + 1
        self.size += len(batch)
        self.batches += 1
        self._pending.append(batch)
        self._pending_bytes += len(batch)
        if self._pending_bytes >= self._buffer_size:
            self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        try:
            write_all(self._fd, list(self._pending), self._written, self._pending_bytes)
        except OSError as exc:
            raise KafkaStorageError(f"write to {self.log_path} failed: {exc}") from exc
        self._written += self._pending_bytes
        self._pending = []
        self._pending_bytes = 0

    def finish(self, mtime_s: float | None) -> None:
        """Write out, fsync, rename ``.cleaned`` -> ``.swap`` (log last), fsync the dir."""
        self._write_pending()
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )
        try:
            # index entries reach their files here (and the files are cut to their entries)
            self.offset_index.trim_to_valid_size()
            self.time_index.trim_to_valid_size()
            if mtime_s is not None:
                os.utime(self._fd, (mtime_s, mtime_s))
            os.fsync(self._fd)
            self.offset_index.flush()
            self.time_index.flush()
            self.offset_index.rename(
                self.live_paths[1].with_name(self.live_paths[1].name + SWAP_SUFFIX)
            )
            self.time_index.rename(
                self.live_paths[2].with_name(self.live_paths[2].name + SWAP_SUFFIX)
            )
            swap = self.live_paths[0].with_name(self.live_paths[0].name + SWAP_SUFFIX)
            os.rename(self.log_path, swap)
            self.log_path = swap
            self.state = "swap"
            fsync_dir(self.dir)
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot finish cleaned segment {self.log_path}: {exc}"
            ) from exc

    def go_live(self) -> None:
        """Rename the ``.swap`` files to their live names (indexes first, the log last).

        Called under the partition lock once the replaced segments were renamed ``.deleted``.
        """
        self.offset_index.rename(self.live_paths[1])
        self.time_index.rename(self.live_paths[2])
        os.rename(self.log_path, self.live_paths[0])
        self.log_path = self.live_paths[0]
        self.state = "live"

    def close_log_file(self) -> None:
        """Close the writer's log fd (the live segment opens its own)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def abort(self) -> None:
        """Close and remove the writer's files (any state but live)."""
        self.close_log_file()
        self.offset_index.close()
        self.time_index.close()
        if self.state == "live":
            return
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            _unlink(path)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
