"""Values handed from storage to the broker: append results and read results.

``FileRegion`` names bytes of a segment's ``.log`` file so the broker can ``sendfile`` them
without copying; a region always holds whole batches.

Threading: immutable values.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from .batch import RecordBatchHeader
from .segment import DELETED_SUFFIX, LogSegment

if TYPE_CHECKING:  # the transaction index loads with the first segment
    from .transaction_index import AbortedTxn

__all__ = ["AppendInfo", "FetchDataInfo", "FileRegion", "ReadInfo"]


class AppendInfo(NamedTuple):
    """What one ``PartitionLog.append`` wrote.

    A NamedTuple rather than a frozen dataclass, like ``RecordBatchHeader``: one is built per
    produce request, and a frozen dataclass costs ~4x more to build (one ``object.__setattr__``
    per field).
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int  # -1 when CreateTime
    log_start_offset: int
    batches: tuple[RecordBatchHeader, ...]  # headers as written (offsets assigned)
    size_in_bytes: int = 0


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``length`` bytes of whole batches at ``position`` in the segment file ``path``.

    The region holds a reference to its segment, whose file (reopened by the segment-file cache
    when it was closed meanwhile; held open once scheduled for deletion) keeps the bytes the read
    found readable even if retention deletes the segment or the cleaner swaps a new file in
    under the same name meanwhile: ``read_bytes`` and ``pinned_fd`` (for ``sendfile``) use it.
    Only without a segment (or once the log was closed) is the file reopened by ``path``
    (falling back to ``path + ".deleted"``, kept for ``file.delete.delay.ms``).
    """

    path: str
    position: int
    length: int
    segment: LogSegment | None = field(default=None, compare=False, repr=False)

    def fileno(self) -> int | None:
        """The segment's descriptor now, or None. Segment files live in a bounded cache that
        may close an idle descriptor at any time: use ``pinned_fd`` to keep one (``sendfile``)."""
        if self.segment is None:
            return None
        fd = self.segment.fileno()
        return fd if fd >= 0 else None

    @contextmanager
    def pinned_fd(self) -> Iterator[int | None]:
        """``with region.pinned_fd() as fd:`` the segment's descriptor, kept open for the block
        (None without a segment or once its log is closed: use ``read_bytes`` then)."""
        if self.segment is None:
            yield None
            return
        try:
            fd = self.segment.log_file.pin()
        except OSError:
            yield None
            return
        try:
            yield fd
        finally:
            self.segment.log_file.unpin()

    def read_bytes(self) -> bytes:
        if self.segment is not None and not self.segment.log_file.closed:
            try:
                return self.segment.pread(self.position, self.length)
            except OSError:
                pass  # closed meanwhile: read by path below
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            fd = os.open(self.path + DELETED_SUFFIX, os.O_RDONLY)
        try:
            parts: list[bytes] = []
            done = 0
            while done < self.length:
                chunk = os.pread(fd, self.length - done, self.position + done)
                if not chunk:
                    raise OSError(f"short read of {self.path} at {self.position + done}")
                parts.append(chunk)
                done += len(chunk)
            return b"".join(parts)
        finally:
            os.close(fd)


class ReadInfo(NamedTuple):
    """Result of ``PartitionLog.read``: whole batches in offset order, maybe across segments.

    A NamedTuple (immutable, like a frozen dataclass) because one is built per fetch.
    """

    regions: tuple[FileRegion, ...]
    size_in_bytes: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    first_offset: int | None  # base offset of the first batch returned (None if empty)
    last_offset: int | None = None  # last offset of the last batch returned (None if empty)

    def read_bytes(self) -> bytes:
        """The concatenated bytes of the regions (``os.pread``)."""
        return b"".join(region.read_bytes() for region in self.regions)


class FetchDataInfo(NamedTuple):
    """Result of ``PartitionLog.read_for_fetch``: the data, the LSO, and for READ_COMMITTED
    the aborted transactions overlapping it (None for READ_UNCOMMITTED)."""

    read: ReadInfo
    last_stable_offset: int
    aborted_transactions: tuple[AbortedTxn, ...] | None
