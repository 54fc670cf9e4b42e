"""One log segment: a ``.log`` file of record batches plus its offset and time indexes.

Files (``NNNNNNNNNNNNNNNNNNNN`` is the segment's base offset in 20 digits, as Kafka names them)::

    NNNNNNNNNNNNNNNNNNNN.log        batches back to back (see ``storage.batch``)
    NNNNNNNNNNNNNNNNNNNN.index      sparse offset -> position index (see ``storage.index``)
    NNNNNNNNNNNNNNNNNNNN.timeindex  sparse timestamp -> offset index
    NNNNNNNNNNNNNNNNNNNN.txnindex   aborted transactions, only once one exists
                                    (see ``storage.transaction_index``)

Invariants: every batch's offsets lie in ``[base_offset, base_offset + 2**31 - 1]`` and strictly
increase through the file; the file holds at most ``segment.bytes`` (< 2 GiB); the indexes
describe a prefix of the file. Index entries follow Kafka's LogSegment rule, applied per batch:
an offset-index entry ``(batch last offset, batch position)`` and a time-index entry (max
timestamp so far, its offset) are added before a batch is counted when more than
``index.interval.bytes`` were appended since the last entry. Appending and rebuilding (recovery)
therefore produce identical indexes. When the segment stops being active (roll, clean close,
end of recovery) the time index gets a final entry with the segment's max timestamp (as Kafka),
so that a reopened segment knows its largest timestamp from the last entry.

Descriptors: all three files are opened through the log manager's bounded cache
(``storage.file_handles``, ``log.open.files.max``): a ``.log`` descriptor is opened on first use
and closed again when the cache needs room (fsynced first if written since the last flush), then
reopened by path; every read and write pins it for its duration. Index files are opened only
while they are read or written. A segment scheduled for deletion (renamed ``.deleted``) holds
its ``.log`` descriptor until the segment object goes, so in-flight reads keep their bytes even
across retention, truncation or a cleaner swap.

A crash can leave: a partial or garbage tail on the ``.log`` file (cut by
``segment_recovery.recover``), index files that are untrimmed, torn or stale (detected by
``segment_recovery.load_indexes`` at load and rebuilt).
A write that fails (ENOSPC ...) is undone by truncating the file back to its previous size.

Threading: ``append``, ``truncate_to``, the recovery calls and index changes are called under the
partition lock by one writer; ``read_headers``/``iter_spans``/``translate_offset`` are called
from reader threads without it (they read only bytes below a size the caller snapshotted);
``flush`` (fsync) runs without the partition lock.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
from collections.abc import Collection, Iterator
from pathlib import Path

from .batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    PreparedAppend,
    RecordBatchHeader,
    parse_batch_header,
)
from .config import LogConfig
from .errors import CorruptRecordError, KafkaStorageError
from .file_handles import UNBOUNDED, FileHandle, FileHandleCache
from .fileio import pread_all, write_all
from .index import (
    OffsetIndex,
    TimeIndex,
)
from .lazy_crc import UncheckedBytes

__all__ = [
    "DELETED_SUFFIX",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIMEINDEX_SUFFIX",
    "LogSegment",
    "segment_file_name",
]

logger = logging.getLogger("tidelog.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"

_READ_CHUNK = 16 * 1024
_SPAN_CHUNK = 64 * 1024
#: ``iter_spans``' first window, and its window after a batch that ended beyond the last one
#: (large batches: a consumer's 1 MiB fetch of librdkafka's ~1 MB batches reads two headers,
#: 4 KiB each, not 64 KiB each; small batches grow the window back to ``_SPAN_CHUNK``).
_SPAN_FIRST_CHUNK = 4 * 1024
# base_offset, batch_length, (epoch), magic, (crc, attributes), last_offset_delta
SPAN_STRUCT = struct.Struct(">qi4xb6xi")


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class LogSegment:
    """A ``.log`` file with its two indexes. After the constructor: ``LogSegment.start_empty``
    or ``LogSegment.make_active`` (a new segment), ``segment_recovery.load_indexes`` or
    ``segment_recovery.recover`` (one on disk)."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        now_ms: int,
        handles: FileHandleCache = UNBOUNDED,
        names: Collection[str] | None = None,
    ) -> None:
        """``names``: the directory's file names, when the caller has just listed it (files
        not among them are not looked for)."""
        name = segment_file_name(base_offset)
        self.dir = directory
        self.base_offset = base_offset
        #: The ``.log`` file: pin it (``log_file.pinned()``) around every use of its descriptor.
        self.log_file: FileHandle = handles.handle(directory / f"{name}{LOG_SUFFIX}")
        with self.log_file.pinned() as fd:  # creates the file
            self._size = os.fstat(fd).st_size
        index_name = f"{name}{INDEX_SUFFIX}"
        timeindex_name = f"{name}{TIMEINDEX_SUFFIX}"
        # at first use: a new log dir answers its first requests before any segment exists
        from .transaction_index import TXNINDEX_SUFFIX, TransactionIndex

        txnindex_name = f"{name}{TXNINDEX_SUFFIX}"
        self.offset_index = OffsetIndex(
            directory / index_name,
            base_offset,
            config.segment_index_bytes,
            handles,
            exists=names is None or index_name in names,
        )
        self.time_index = TimeIndex(
            directory / timeindex_name,
            base_offset,
            config.segment_index_bytes,
            handles,
            exists=names is None or timeindex_name in names,
        )
        self.txn_index = TransactionIndex(
            directory / txnindex_name, exists=names is None or txnindex_name in names
        )
        self.next_offset = base_offset
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = base_offset
        self.bytes_since_last_index_entry = 0
        self.rolling_based_ms: int | None = None
        self.created_ms = now_ms
        self.roll_jitter_ms = 0
        if config.segment_jitter_ms > 0:
            import random  # segment.jitter.ms is 0 unless set

            self.roll_jitter_ms = random.randrange(min(config.segment_jitter_ms, config.segment_ms))
        self.dirty = False  # loaded files were fsynced (or are recovered, which marks them)
        self.deleted_at_ms: int | None = None
        self.unchecked = UncheckedBytes(self._size)  # CRCs of loaded bytes: checked on read
        # Where a reader can start looking for an offset without the index: ``(offset,
        # position)`` such that every batch before ``position`` ends below ``offset``. Set by
        # appends (the batch just written, under the partition lock) and by reads (where they
        # stopped), so a consumer at the tail or reading on from its last fetch finds its batch
        # with no index look-up and no scan. A read hint carries the ``truncations`` count its
        # reader saw before reading: truncation counts up after cutting the file, so a hint
        # made from bytes a truncation removed is never used.
        self.truncations = 0
        self.append_hint = (base_offset, 0)
        self.read_hint = (0, base_offset, 0)

    # -- properties ----------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self._size

    @property
    def log_path(self) -> Path:
        return self.log_file.path

    @property
    def index_path(self) -> Path:
        return self.offset_index.path

    @property
    def timeindex_path(self) -> Path:
        return self.time_index.path

    @property
    def largest_timestamp(self) -> int:
        """Max batch timestamp, or the file's mtime when no batch has a timestamp (as Kafka)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return self.created_ms

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, size={self._size}, "
            f"next_offset={self.next_offset})"
        )

    # -- loading (``storage.segment_recovery`` checks or rebuilds the indexes) ---------------
    def reload_tail(self) -> None:
        """Offsets and max timestamp after the last index entries: scan the short tail of the
        file from the offset index's last entry (raises ``CorruptRecordError``)."""
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = (
            self.time_index.last_entry()
        )
        _, position = self.offset_index.last_entry()
        next_offset = self.base_offset
        for _, header in self.read_headers(position, self._size):
            next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = header.max_timestamp
                self.offset_of_max_timestamp_so_far = header.last_offset
        self.next_offset = next_offset
        self.bytes_since_last_index_entry = self._size - position

    def load_rolling_base(self) -> None:
        """segment.ms counts from the first batch's timestamp after a load."""
        if self._size == 0:
            self.rolling_based_ms = None
            return
        try:
            first = next(self.read_headers(0, self._size))[1]
        except (StopIteration, CorruptRecordError):
            self.rolling_based_ms = None
            return
        self.rolling_based_ms = first.max_timestamp if first.max_timestamp >= 0 else None

    def recovered(
        self,
        *,
        size: int,
        valid_bytes: int,
        next_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        last_index_position: int,
    ) -> None:
        """The state after a recovery scan rebuilt the indexes (``segment_recovery.recover``):
        the file holds ``size`` bytes, the first ``valid_bytes`` of them checked."""
        self._size = size
        self.unchecked.reset(valid_bytes, size)  # the scan checked every CRC before
        self.append_hint = (self.base_offset, 0)
        self.truncations += 1
        self.next_offset = next_offset
        self.max_timestamp_so_far = max_timestamp
        self.offset_of_max_timestamp_so_far = offset_of_max_timestamp
        self.bytes_since_last_index_entry = valid_bytes - last_index_position
        self.time_index.maybe_append(max_timestamp, offset_of_max_timestamp, skip_full_check=True)
        self.dirty = True
        # After a SIGKILL the bytes just validated may sit unsynced in the page cache: the
        # flush that follows recovery must fsync them even if nothing is written now.
        self.log_file.mark_unsynced()
        self.load_rolling_base()

    def cut_file(self, position: int) -> None:
        """Cut the ``.log`` file at ``position`` (the indexes are the caller's)."""
        with self.log_file.pinned() as fd:
            os.ftruncate(fd, position)
        self.log_file.mark_unsynced()
        self._size = position
        self.dirty = True

    # -- appending -----------------------------------------------------------------------------
    def should_roll(
        self,
        config: LogConfig,
        *,
        messages_size: int,
        max_offset: int,
        now_ms: int,
    ) -> bool:
        """Kafka's LogSegment.shouldRoll, with the clock in place of message timestamps.

        Kafka divergence: Kafka measures segment.ms from the first batch's timestamp to the
        incoming batch's max timestamp; tidelog measures it with the broker clock from when the
        first batch was appended (after a restart: from the first batch's timestamp).
        """
        if self._size > config.segment_bytes - messages_size:
            return True
        if self._size > 0:
            start = self.rolling_based_ms if self.rolling_based_ms is not None else self.created_ms
            if now_ms - start > config.segment_ms - self.roll_jitter_ms:
                return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return not self.offset_index.can_append_offset(max_offset)

    def append(self, prepared: PreparedAppend, index_interval_bytes: int, now_ms: int) -> int:
        """Write prepared batches at the end of the file; returns their file position.

        On an OSError the file and indexes are cut back and ``KafkaStorageError`` is raised.
        """
        position = self._size
        saved = (
            self.max_timestamp_so_far,
            self.offset_of_max_timestamp_so_far,
            self.bytes_since_last_index_entry,
            self.next_offset,
            self.rolling_based_ms,
        )
        log_file = self.log_file
        try:
            fd = log_file.pin()
            try:
                write_all(fd, prepared.iov, position, prepared.size_in_bytes)
            finally:
                log_file.unpin()
            log_file.mark_unsynced()
            self._size = position + prepared.size_in_bytes
            self.dirty = True
            if position == 0:
                self.rolling_based_ms = now_ms
            max_ts = self.max_timestamp_so_far
            since = self.bytes_since_last_index_entry
            for header, rel_pos in zip(prepared.headers, prepared.positions, strict=True):
                last_offset = header[0] + header[6]
                if header[8] > max_ts:
                    max_ts = self.max_timestamp_so_far = header[8]
                    self.offset_of_max_timestamp_so_far = last_offset
                if since > index_interval_bytes:
                    self.offset_index.append(last_offset, position + rel_pos)
                    self.time_index.maybe_append(max_ts, self.offset_of_max_timestamp_so_far)
                    since = 0
                since += header[1] + LOG_OVERHEAD
            self.bytes_since_last_index_entry = since
            self.next_offset = prepared.last_offset + 1
            self.append_hint = (prepared.first_offset, position)
        except OSError as exc:
            (
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
                self.bytes_since_last_index_entry,
                self.next_offset,
                self.rolling_based_ms,
            ) = saved
            try:
                with log_file.pinned() as fd:
                    os.ftruncate(fd, position)
                self.offset_index.truncate_to(prepared.first_offset)
                self.time_index.truncate_to(prepared.first_offset)
            except OSError:
                logger.exception("could not undo a failed append to %s", self.log_path)
            self._size = position
            raise KafkaStorageError(
                f"write to {self.log_path} failed: {os.strerror(exc.errno or errno.EIO)}"
            ) from exc
        return position

    # -- reading -------------------------------------------------------------------------------
    def read_headers(
        self, start_position: int, end_position: int
    ) -> Iterator[tuple[int, RecordBatchHeader]]:
        """Yield ``(position, header)`` of the batches in ``[start_position, end_position)``.

        Headers are validated against the bytes present (magic, length); damage raises
        ``CorruptRecordError``. Reads in chunks so small batches cost no syscall each.
        """
        position = start_position
        window = b""
        window_start = 0
        while position < end_position:
            rel = position - window_start
            if rel < 0 or rel + BATCH_HEADER_SIZE > len(window):
                want = min(_READ_CHUNK, end_position - position)
                window = self._pread_some(max(want, BATCH_HEADER_SIZE), position)
                window_start = position
                rel = 0
            try:
                header = parse_batch_header(window, rel, available=end_position - position)
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"{self.log_path} at position {position}: {exc}") from None
            yield position, header
            position += header.batch_length + LOG_OVERHEAD

    def iter_spans(
        self, start_position: int, end_position: int
    ) -> Iterator[tuple[int, int, int, int]]:
        """Yield ``(position, base_offset, last_offset, size)`` of the batches in a range.

        The fetch path's lean scan: 64 KiB preads, one small unpack per batch, header sanity
        (magic, length, inside the range) checked; damage raises ``CorruptRecordError``.
        """
        unpack = SPAN_STRUCT.unpack_from
        position = start_position
        window = b""
        window_start = 0
        window_len = 0
        chunk = _SPAN_FIRST_CHUNK
        while position < end_position:
            rel = position - window_start
            if rel + BATCH_HEADER_SIZE > window_len:
                if window_len:  # the window held several batches: grow it; one: start small
                    chunk = min(chunk * 4, _SPAN_CHUNK) if rel <= window_len else _SPAN_FIRST_CHUNK
                want = min(chunk, end_position - position)
                window = self._pread_some(max(want, BATCH_HEADER_SIZE), position)
                window_start = position
                window_len = len(window)
                rel = 0
                if window_len < BATCH_HEADER_SIZE:
                    raise CorruptRecordError(
                        f"{self.log_path} at position {position}: truncated batch header"
                    )
            base_offset, batch_length, magic, last_delta = unpack(window, rel)
            size = batch_length + LOG_OVERHEAD
            if (
                magic != MAGIC_V2
                or batch_length < MIN_BATCH_LENGTH
                or position + size > end_position
                or last_delta < 0
            ):
                parse_batch_header(window, rel, available=end_position - position)
                raise CorruptRecordError(  # pragma: no cover - parse_batch_header raised
                    f"{self.log_path} at position {position}: bad batch header"
                )
            yield position, base_offset, base_offset + last_delta, size
            position += size

    def translate_offset(
        self, offset: int, end_position: int, start_position: int = 0
    ) -> tuple[int, RecordBatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        _, position = self.offset_index.lookup(offset)
        for pos, header in self.read_headers(max(position, start_position), end_position):
            if header.base_offset + header.last_offset_delta >= offset:
                return pos, header
        return None

    def scan_start(self, offset: int, end_position: int) -> int:
        """A batch position at or before the first batch whose last offset is >= ``offset``:
        the append or read hint when one lies at or below ``offset``, else the offset index's
        entry."""
        hint_offset, position = self.append_hint
        if not hint_offset <= offset or position >= end_position:
            truncations, hint_offset, position = self.read_hint
            if (
                truncations != self.truncations
                or not hint_offset <= offset
                or position >= end_position
            ):
                _, position = self.offset_index.lookup(offset)
        return position

    def fileno(self) -> int:
        """The ``.log`` file's descriptor now (-1 when the cache has it closed).

        The cache may close it (and the number be reused) at any moment: hold
        ``log_file.pinned()`` for as long as a descriptor is used (``sendfile``...).
        """
        return self.log_file._fd

    def _pread_some(self, length: int, position: int) -> bytes:
        log_file = self.log_file
        fd = log_file.pin()
        try:
            return os.pread(fd, length, position)
        finally:
            log_file.unpin()

    def pread(self, position: int, length: int) -> bytes:
        log_file = self.log_file
        fd = log_file.pin()
        try:
            return pread_all(fd, position, length)
        finally:
            log_file.unpin()

    # -- state changes -------------------------------------------------------------------------
    def seal(self) -> None:
        """The segment stops being active: final time-index entry, trimmed index files."""
        before = (
            self.time_index.entries,
            self.offset_index.file_size,
            self.time_index.file_size,
        )
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        after = (
            self.time_index.entries,
            self.offset_index.file_size,
            self.time_index.file_size,
        )
        if after != before:
            self.dirty = True

    def release_index_files(self) -> None:
        """Close the index descriptors of an inactive, synced segment (reopened on demand)."""
        self.offset_index.release()
        self.time_index.release()

    def make_active(self, config: LogConfig, *, preallocate: bool = True) -> None:
        """Preallocate the index files for appends.

        ``preallocate=False`` (the loader's last segment): the files stay as they are. Kafka
        divergence: Kafka resizes a loaded active segment's indexes to ``segment.index.bytes``
        because it maps them; tidelog keeps entries in memory and writes them when the
        segment stops being active (``seal`` cuts the file to them), so the preallocation
        would never be read and would cost two ``open``+``ftruncate`` per partition at start-up.
        """
        self.offset_index.make_writable(config.segment_index_bytes, preallocate=preallocate)
        self.time_index.make_writable(config.segment_index_bytes, preallocate=preallocate)

    def start_empty(self, config: LogConfig) -> None:
        """Make a segment just created by a roll or a full truncation the empty active one: a
        stray file that already had its name is cut to zero, the indexes emptied."""
        if self._size > 0:
            with self.log_file.pinned() as fd:
                os.ftruncate(fd, 0)
            self.log_file.mark_unsynced()
            self._size = 0
        self.offset_index.reset()
        self.time_index.reset()
        self.make_active(config)

    def truncate_to(self, offset: int) -> int:
        """Remove the batches holding offsets >= ``offset`` (whole batches); returns bytes cut."""
        found = self.translate_offset(offset, self._size)
        if found is None:
            return 0
        position, _ = found
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        cut = self._size - position
        self.cut_file(position)
        self.unchecked.truncate(position)
        self.append_hint = (self.base_offset, 0)
        self.truncations += 1  # after the cut: read hints from before it are void
        self.reload_tail()  # from the (now shorter) indexes and tail
        if self._size == 0:
            self.rolling_based_ms = None
        return cut

    def flush(self, *, indexes: bool = True) -> None:
        """fsync the log and (unless ``indexes=False``) both index files.

        Called without the partition lock. The active segment's indexes need no fsync: after a
        crash the segment holding the recovery point - always the active one or an earlier
        one - is rebuilt from its log; a segment's indexes are fsynced once it is inactive.
        """
        try:
            self.log_file.sync()
            if indexes:
                self.offset_index.flush()
                self.time_index.flush()
                self.txn_index.flush()
        except OSError as exc:
            raise KafkaStorageError(f"fsync of {self.log_path} failed: {exc}") from exc

    def mark_flushed(self) -> None:
        """Nothing of this segment awaits an fsync (recovery found every byte of the active
        segment below the recovery point; its indexes are rebuilt after any crash)."""
        self.dirty = False
        self.log_file.mark_synced()
        self.offset_index.release(unsynced_ok=True)
        self.time_index.release(unsynced_ok=True)

    def rename_with_suffix(self, suffix: str) -> None:
        """Rename all three files (``.deleted`` on retention). The ``.log`` descriptor is held
        open from now on (readers of the old bytes finish even once the file is unlinked)."""
        self.log_file.hold()
        new_log = self.log_path.with_name(self.log_path.name + suffix)
        os.rename(self.log_path, new_log)
        self.log_file.rename(new_log)
        for index in (self.offset_index, self.time_index):
            try:
                index.rename(index.path.with_name(index.path.name + suffix))
            except FileNotFoundError:
                pass
        self.txn_index.rename(self.txn_index.path.with_name(self.txn_index.path.name + suffix))

    def close(self) -> None:
        self.log_file.close()
        self.offset_index.close()
        self.time_index.close()

    def __del__(self) -> None:
        # Deleted segments keep their descriptors until the last reader's snapshot drops them.
        log_file = getattr(self, "log_file", None)
        if log_file is not None:
            log_file.close()

    def delete_files(self) -> None:
        """Unlink the files. The descriptors stay open while anything still references this
        segment (a reader that snapshotted it), so such a read finishes on the old bytes; they
        are closed when the segment object is freed."""
        paths = (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path)
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
