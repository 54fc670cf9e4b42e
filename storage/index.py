"""Sparse offset and time indexes of a segment (Kafka's ``.index`` and ``.timeindex`` files).

``<base offset, 20 digits>.index`` - entries of 8 bytes, big-endian::

    relative_offset  int32   last offset of an indexed batch minus the segment's base offset
    position         int32   byte position of that batch in the ``.log`` file

``<base offset, 20 digits>.timeindex`` - entries of 12 bytes, big-endian::

    timestamp        int64   largest timestamp seen in the segment up to the indexed batch
    relative_offset  int32   offset of (the batch holding) that timestamp, minus the base offset

Invariants: offset-index relative offsets strictly increase and positions never decrease; time
index timestamps strictly increase (an entry is added only when the max timestamp grows) and
their offsets never decrease; every position lies inside the ``.log`` file. Entries are sparse:
the segment adds one when more than ``index.interval.bytes`` were appended since the last entry.

The files of the active segment are preallocated (``ftruncate``, sparse) to
``segment.index.bytes`` rounded down to a whole entry; the used entries are the leading ones.
When a segment rolls, and on clean shutdown, the files are trimmed to their used size, so an
inactive segment's index holds exactly ``size / entry_size`` entries (what Kafka expects).

In memory the entries live in two ``array`` columns (compact, C-speed ``bisect``). They reach
the file lazily: ``write_pending`` writes every entry added since its last call in one
``pwrite``; it runs when the segment stops being active (roll, clean close) and after a
rebuild. The active segment's index file may therefore lag behind memory;
that is safe because after a crash the segment holding the recovery point and every later one
(so always the active one) are rebuilt from the ``.log`` file. Writing entries one by one on the
append path cost tens of microseconds each (a page under writeback must settle first).

A crash can leave an untrimmed file (zero entries after the used ones), a lagging or torn file
or one of the wrong size; ``load`` reports any of these as ``IndexCorruptError`` and the loader
rebuilds the index from the ``.log`` file. Removed entries (truncation) are zeroed on disk.

Descriptors: an index file is opened through the segment files' cache
(``storage.file_handles``) only while it is read or written - load, preallocation, roll,
rebuild, truncation, fsync - and given back right after preallocation and after the fsync of an
inactive index; look-ups never touch the file (Kafka's LazyIndex opens its file on first use).

Threading: one writer (the appender, or the loader, under the partition lock); readers may
``lookup`` concurrently from other threads (array operations are atomic under the GIL; a reader
sees a prefix of the entries, which is always a valid index).
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import ClassVar

from .batch import INT32_MAX
from .file_handles import UNBOUNDED, FileHandleCache

__all__ = [
    "IndexCorruptError",
    "OffsetIndex",
    "TimeIndex",
    "decode_offset_index",
    "decode_time_index",
]

_TIME_ENTRY = struct.Struct(">qi")
_LITTLE = sys.byteorder == "little"


class IndexCorruptError(Exception):
    """An index file fails its sanity check; the caller rebuilds it from the log."""


class _Index:
    """What both indexes share: entries as two ``array`` columns (the first one sorted, the one
    binary-searched), the file they are written to, and the common sanity checks."""

    entry_size: ClassVar[int]
    #: ``array`` type codes of the two columns.
    _key_type: ClassVar[str]
    _value_type: ClassVar[str]
    #: The relative offsets are the first column (offset index), else the second (time index).
    _offsets_first: ClassVar[bool]

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_bytes: int,
        handles: FileHandleCache = UNBOUNDED,
        *,
        exists: bool = True,
    ) -> None:
        """``exists=False``: the caller's directory listing has no such file (no ``stat``)."""
        self.base_offset = base_offset
        self._max_entries = max(max_index_bytes // self.entry_size, 2)
        # The descriptor comes from the cache only while the file is read or written (load,
        # preallocation, roll, rebuild, truncation, fsync): look-ups use the arrays in memory.
        self._file = handles.handle(path)
        self._file_size = 0
        self._exists = False  # created (empty) when first opened, or when trimmed
        if exists:
            try:
                self._file_size = os.stat(path).st_size
                self._exists = True
            except FileNotFoundError:
                pass
        self._written = 0  # leading entries that are in the file
        self._writable = False  # preallocated for appends (active segment)
        self._keys: array[int] = array(self._key_type)
        self._values: array[int] = array(self._value_type)

    @property
    def path(self) -> Path:
        return self._file.path

    # -- the descriptor: from the file-handle cache, only while the file is used ---------------
    def release(self, *, unsynced_ok: bool = False) -> None:
        """Close the descriptor of a synced index now (it is reopened when needed);
        ``unsynced_ok``: its changes need no fsync (an active segment's index).

        A segment then costs one descriptor (its ``.log``), as in Kafka, which maps indexes.
        """
        self._file.release(unsynced_ok=unsynced_ok)

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        return len(self._keys)

    @property
    def size_in_bytes(self) -> int:
        """Bytes of used entries (the file size once trimmed)."""
        return self.entries * self.entry_size

    @property
    def file_size(self) -> int:
        return self._file_size

    def _read_file(self) -> bytes:
        if self._exists and self._file_size == 0:
            return b""  # stat'ed empty just before (an index with no entry): nothing to open
        with self._file.pinned() as fd:
            size = os.fstat(fd).st_size
            if size % self.entry_size != 0:
                raise IndexCorruptError(
                    f"{self.path}: size {size} is not a multiple of {self.entry_size}"
                )
            chunks: list[bytes] = []
            done = 0
            while done < size:
                chunk = os.pread(fd, size - done, done)
                if not chunk:
                    raise IndexCorruptError(f"{self.path}: short read")
                chunks.append(chunk)
                done += len(chunk)
        return b"".join(chunks)

    def _pack(self, first: int, last: int) -> bytes:
        """Entries ``[first, last)`` as the file holds them."""
        raise NotImplementedError

    def _unpack(self, data: bytes) -> tuple[array[int], array[int]]:
        """The two columns of a file's bytes (a whole number of entries)."""
        raise NotImplementedError

    def _offset_column(self) -> array[int]:
        """The column of relative offsets (never decreasing)."""
        return self._keys if self._offsets_first else self._values

    def _read_entries(self) -> tuple[array[int], array[int]]:
        """The file's entries, checked: the first relative offset is not negative, the first
        column strictly increases and the second never decreases (raises
        ``IndexCorruptError``). A zero-filled (untrimmed) file therefore is no index."""
        keys, values = self._unpack(self._read_file())
        if len(keys) > 0:
            if (keys if self._offsets_first else values)[0] < 0:
                raise IndexCorruptError(f"{self.path}: negative first entry")
            first, second = keys.tolist(), values.tolist()
            if first != sorted(first) or len(set(first)) != len(first) or second != sorted(second):
                raise IndexCorruptError(f"{self.path}: entries are not monotonic")
        return keys, values

    def _install(self, keys: array[int], values: array[int]) -> None:
        """Entries read from the file (``load``): memory and file agree."""
        self._keys = keys
        self._values = values
        self._written = len(keys)

    def reset(self) -> None:
        self._forget_from(0)
        self._keys = array(self._key_type)
        self._values = array(self._value_type)

    def replace_entries(self, keys: array[int], values: array[int], *, write: bool = True) -> None:
        """Install rebuilt entries (the two columns, relative offsets relative to the base
        offset); see ``_store_replaced``."""
        self._keys = keys
        self._values = values
        self._store_replaced(write)

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is >= ``offset``."""
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else bisect_right(self._offset_column(), relative - 1)
        if keep < len(self._keys):
            self._forget_from(keep)
            del self._keys[keep:]
            del self._values[keep:]

    def write_pending(self) -> None:
        """Write the entries appended since the last call to the file (one ``pwrite``)."""
        entries = self.entries
        if self._written < entries:
            data = self._pack(self._written, entries)
            start = self._written * self.entry_size
            with self._file.pinned() as fd:
                os.pwrite(fd, data, start)
            self._exists = True
            self._file.mark_unsynced()
            self._file_size = max(self._file_size, start + len(data))
            self._written = entries

    def _forget_from(self, keep: int) -> None:
        """Entries from ``keep`` on are gone: zero the ones already in the file."""
        if keep < self._written:
            start = keep * self.entry_size
            end = min(self._written * self.entry_size, self._file_size)
            if end > start:
                with self._file.pinned() as fd:
                    os.pwrite(fd, bytes(end - start), start)
                self._file.mark_unsynced()
            self._written = keep

    def _store_replaced(self, write: bool) -> None:
        """After rebuilt entries were installed in memory: cut the file to zero and write
        them all in one go (stale bytes of an untrimmed file must not survive), or, with
        ``write=False``, only change memory (``forget_file``)."""
        if write:
            self._replace_file(self._pack(0, self.entries), self.entries)
        else:
            self.forget_file()

    def _replace_file(self, data: bytes, entries: int) -> None:
        with self._file.pinned() as fd:
            os.ftruncate(fd, 0)
            if data:
                os.pwrite(fd, data, 0)
        self._exists = True
        self._file.mark_unsynced()
        self._file_size = len(data)
        self._written = entries

    def forget_file(self) -> None:
        """The file's bytes are not trusted any more (a rebuild left them as they were): the
        next ``write_pending`` writes every entry from the first, and ``trim_to_valid_size``
        then cuts whatever stale bytes follow them."""
        self._written = 0

    def make_writable(self, max_index_bytes: int, *, preallocate: bool = True) -> None:
        """Preallocate the file for appends (the segment became active); ``preallocate=False``
        leaves the file as it is (a loaded active segment, see ``LogSegment.make_active``).

        The preallocation needs no fsync: the active segment's indexes are rebuilt from its
        log after a crash, and trimmed (and then fsynced) when it stops being active.
        """
        self._max_entries = max(max_index_bytes // self.entry_size, 2)
        self._max_entries = max(self._max_entries, self.entries + 2)
        size = self._max_entries * self.entry_size
        self._writable = True
        if preallocate and self._file_size != size:
            with self._file.pinned() as fd:
                os.ftruncate(fd, size)
            self._file_size = size
            self._exists = True
        # Nothing is written to it until the segment rolls, and the active segment's index
        # needs no fsync (a crash rebuilds it): the descriptor goes back at once.
        self._file.release(unsynced_ok=True)

    def trim_to_valid_size(self) -> None:
        """Write pending entries and shrink the file to them (roll or clean shutdown).

        Entries written here need an fsync (``write_pending`` marks the file); cutting off the
        preallocated tail alone does not: should a crash lose the cut, the zeros left are no
        valid index and the loader rebuilds it from the log. A clean stop of thousands of idle
        partitions saves two fsyncs each this way.
        """
        self.write_pending()
        size = self.size_in_bytes
        if self._file_size != size or not self._exists:
            with self._file.pinned() as fd:
                os.ftruncate(fd, size)
            self._file_size = size
            self._exists = True
        self._max_entries = max(self.entries, 2)
        self._writable = False

    def flush(self) -> None:
        """fsync the file if it changed, then release the descriptor of an inactive index.

        Pending entries are not written here (that happens under the partition lock, in
        ``trim_to_valid_size``), so a flusher never races the appender.
        """
        self._file.sync()
        if not self._writable:
            self._file.release()

    def rename(self, new_path: Path) -> None:
        os.rename(self._file.path, new_path)
        self._file.rename(new_path)

    def close(self) -> None:
        self._file.close()

    def __del__(self) -> None:
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()


class OffsetIndex(_Index):
    """Maps offsets to file positions (floor look-up). Columns: relative offsets, positions."""

    entry_size = 8
    _key_type = "i"
    _value_type = "i"
    _offsets_first = True

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self._max_entries

    def _pack(self, first: int, last: int) -> bytes:
        flat = array("i", bytes(8 * (last - first)))
        flat[0::2] = self._keys[first:last]
        flat[1::2] = self._values[first:last]
        if _LITTLE:
            flat.byteswap()
        return flat.tobytes()

    def _unpack(self, data: bytes) -> tuple[array[int], array[int]]:
        return _offset_columns(data)

    def load(self, log_size: int) -> None:
        """Read the file's entries and sanity-check them (raises ``IndexCorruptError``):
        besides the common checks, every position lies inside the ``.log`` file."""
        offsets, positions = self._read_entries()
        if len(positions) > 0:
            if positions[0] < 0:
                raise IndexCorruptError(f"{self.path}: negative first entry")
            if positions[-1] >= log_size:
                raise IndexCorruptError(
                    f"{self.path}: last entry points at {positions[-1]}, log has {log_size} bytes"
                )
        self._install(offsets, positions)

    def can_append_offset(self, offset: int) -> bool:
        relative = offset - self.base_offset
        return 0 <= relative <= INT32_MAX

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._keys and relative <= self._keys[-1]:
            raise ValueError(
                f"offset {offset} is not larger than the last indexed offset "
                f"{self._keys[-1] + self.base_offset} in {self.path}"
            )
        self._keys.append(relative)
        self._values.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """Floor entry ``(offset, position)``: largest indexed offset <= ``offset``.

        ``(base_offset, 0)`` when there is none.
        """
        relative = offset - self.base_offset
        if relative < 0:
            return self.base_offset, 0
        if relative > INT32_MAX:
            relative = INT32_MAX
        # Both look-ups call bisect_right themselves: a shared floor-slot method added 70 ns
        # (12%) to this one, which the fetch path calls when no read hint applies.
        slot = bisect_right(self._keys, relative) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[slot], self._values[slot]

    def last_entry(self) -> tuple[int, int]:
        if not self._keys:
            return self.base_offset, 0
        return self.base_offset + self._keys[-1], self._values[-1]

    def all_entries(self) -> list[tuple[int, int]]:
        base = self.base_offset
        return [(base + o, p) for o, p in zip(self._keys, self._values, strict=True)]


class TimeIndex(_Index):
    """Maps timestamps to offsets (floor look-up). Columns: timestamps, relative offsets."""

    entry_size = 12
    _key_type = "q"
    _value_type = "i"
    _offsets_first = False

    @property
    def is_full(self) -> bool:
        # One slot stays free for the entry written when the segment rolls (as Kafka).
        return len(self._keys) >= self._max_entries - 1

    def _pack(self, first: int, last: int) -> bytes:
        pack = _TIME_ENTRY.pack
        keys, values = self._keys[first:last], self._values[first:last]
        return b"".join(pack(t, o) for t, o in zip(keys, values, strict=True))

    def _unpack(self, data: bytes) -> tuple[array[int], array[int]]:
        return _time_columns(data)

    def load(self) -> None:
        """Read the file's entries and sanity-check them (raises ``IndexCorruptError``)."""
        self._install(*self._read_entries())

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if ``timestamp`` is larger than the last entry's."""
        if self._keys:
            if timestamp <= self._keys[-1]:
                return
        elif timestamp <= -1:
            return
        if not skip_full_check and self.is_full:
            raise ValueError(f"time index {self.path} is full")
        relative = offset - self.base_offset
        if self._values and relative < self._values[-1]:
            raise ValueError(f"time index offset {offset} goes backwards in {self.path}")
        self._keys.append(timestamp)
        self._values.append(relative)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Floor entry ``(timestamp, offset)``; ``(-1, base_offset)`` when there is none."""
        slot = bisect_right(self._keys, timestamp) - 1
        if slot < 0:
            return -1, self.base_offset
        return self._keys[slot], self.base_offset + self._values[slot]

    def last_entry(self) -> tuple[int, int]:
        if not self._keys:
            return -1, self.base_offset
        return self._keys[-1], self.base_offset + self._values[-1]

    def all_entries(self) -> list[tuple[int, int]]:
        base = self.base_offset
        return [(t, base + o) for t, o in zip(self._keys, self._values, strict=True)]


# -- the file layout, for readers of any file (the loader above, and dump-log) ---------------------
def _offset_columns(data: bytes) -> tuple[array[int], array[int]]:
    """Relative offsets and positions of an ``.index`` file's bytes (whole entries)."""
    flat = array("i")
    flat.frombytes(data)
    if _LITTLE:
        flat.byteswap()
    return flat[0::2], flat[1::2]


def _time_columns(data: bytes) -> tuple[array[int], array[int]]:
    """Timestamps and relative offsets of a ``.timeindex`` file's bytes (whole entries)."""
    timestamps: array[int] = array("q")
    offsets: array[int] = array("i")
    for ts, rel in _TIME_ENTRY.iter_unpack(data):
        timestamps.append(ts)
        offsets.append(rel)
    return timestamps, offsets


def _written_bytes(data: bytes, entry_size: int) -> bytes:
    """The entries before the zero-filled tail an active segment's preallocated file ends with
    (a torn last entry is left out)."""
    used = len(data.rstrip(b"\x00"))
    return data[: min(-(-used // entry_size), len(data) // entry_size) * entry_size]


def decode_offset_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(absolute offset, position) entries of an ``.index`` file's bytes, unchecked, without the
    preallocated tail (dump-log shows files in any state)."""
    offsets, positions = _offset_columns(_written_bytes(data, OffsetIndex.entry_size))
    return [(base_offset + rel, pos) for rel, pos in zip(offsets, positions, strict=True)]


def decode_time_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) entries of a ``.timeindex`` file's bytes, unchecked, without
    the preallocated tail."""
    timestamps, offsets = _time_columns(_written_bytes(data, TimeIndex.entry_size))
    return [(ts, base_offset + rel) for ts, rel in zip(timestamps, offsets, strict=True)]
