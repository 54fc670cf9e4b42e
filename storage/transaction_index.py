"""The transaction index (``NNNNNNNNNNNNNNNNNNNN.txnindex``): aborted transactions of a segment.

One file per segment, next to its ``.log``, named by the segment's base offset, created only
when the first aborted transaction whose ABORT marker lies in the segment is appended (as
Kafka's TransactionIndex). The file is a sequence of fixed-size entries, Kafka's AbortedTxn
layout (big-endian)::

    offset  size  field
         0     2  version             int16, always 0
         2     8  producer_id         int64
        10     8  first_offset        int64  first offset of the aborted transaction
        18     8  last_offset         int64  offset of its ABORT marker
        26     8  last_stable_offset  int64  the partition's LSO once the marker was written

Invariants: the size is a multiple of 34 (a torn tail entry is ignored on read and cut on the
next append); entries are in ``last_offset`` order; every ``last_offset`` lies inside the
segment. A read_committed Fetch asks for the entries overlapping ``[fetch_offset,
upper_bound)`` (``collect``) of the segment holding the fetch offset and of each later segment
until one answers complete; the client then drops the aborted producers' records from each
``first_offset`` to the marker.

Durability: the file is appended without fsync; ``flush`` fsyncs it (the log's flush of an
inactive segment). After an unclean shutdown the index of every recovered segment is emptied
by the loader (``storage.recovery``) and rebuilt from the log by the producer-state replay
(``storage.transaction_state``). It is renamed and deleted with its segment.

Threading: appends and truncation under the partition lock; ``collect`` from reader threads
reads the entries kept in memory (a list replaced, never mutated in place).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .fileio import read_small_file

__all__ = [
    "ABORTED_TXN_SIZE",
    "TXNINDEX_SUFFIX",
    "AbortedTxn",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "decode_entries",
    "unpack_entry",
]

TXNINDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size
CURRENT_VERSION = 0
assert ABORTED_TXN_SIZE == 34


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """What one segment's index holds for a look-up (Kafka's TxnIndexSearchResult)."""

    aborted_transactions: tuple[AbortedTxn, ...]
    is_complete: bool


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            CURRENT_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


def unpack_entry(data: bytes, position: int = 0) -> tuple[int, AbortedTxn]:
    """The version and the entry stored at ``position`` (no version check: ``dump-log`` shows
    whatever a file holds)."""
    version, producer_id, first, last, lso = _ENTRY.unpack_from(data, position)
    return version, AbortedTxn(producer_id, first, last, lso)


def decode_entries(data: bytes, *, name: str = "txnindex") -> list[AbortedTxn]:
    """The whole entries of a ``.txnindex`` file's bytes (a torn tail is ignored).

    Raises ``ValueError`` for an entry of an unknown version.
    """
    out: list[AbortedTxn] = []
    for position in range(0, len(data) - ABORTED_TXN_SIZE + 1, ABORTED_TXN_SIZE):
        version, txn = unpack_entry(data, position)
        if version != CURRENT_VERSION:
            raise ValueError(f"{name}: unknown aborted-transaction entry version {version}")
        out.append(txn)
    return out


class TransactionIndex:
    """The aborted transactions of one segment, in memory and in its ``.txnindex`` file."""

    def __init__(self, path: Path, *, exists: bool = True) -> None:
        """``exists=False``: the caller's directory listing has no such file (not read)."""
        self.path = path
        #: The entries in ``last_offset`` order: a list replaced on change, never mutated in
        #: place (readers use it without the lock). Read-only for callers.
        self.entries: list[AbortedTxn] = []
        data = b""
        if exists:
            try:
                data = read_small_file(path)
            except FileNotFoundError:
                pass
        try:
            self.entries = decode_entries(data, name=str(path))
        except ValueError:
            self.entries = []  # rebuilt by recovery; an unknown version is not ours to keep
        self._file_size = len(self.entries) * ABORTED_TXN_SIZE
        self._dirty = len(data) != self._file_size

    @property
    def last_offset(self) -> int:
        """The marker offset of the last entry (-1 when empty)."""
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; entries must come in ``last_offset`` order (duplicates are skipped,
        so a replay over a kept index is harmless)."""
        if txn.last_offset <= self.last_offset:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, self._file_size)  # cut a torn tail first
            os.pwrite(fd, txn.encode(), self._file_size)
        finally:
            os.close(fd)
        self._file_size += ABORTED_TXN_SIZE
        self.entries = [*self.entries, txn]
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries overlapping ``[fetch_offset, upper_bound_offset)``, and whether the search
        is complete (Kafka's collectAbortedTxns): an entry whose last stable offset reaches the
        upper bound was written when every transaction that began below the bound had ended,
        so no later segment's index can hold another overlapping entry. Without such an entry
        the caller reads the next segment's index (an aborted transaction is indexed in the
        segment of its marker, which may be any later one)."""
        found: list[AbortedTxn] = []
        for t in self.entries:
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset:
                found.append(t)
            if t.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(tuple(found), True)
        return TxnIndexSearchResult(tuple(found), False)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or above ``offset``."""
        kept = [t for t in self.entries if t.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self.entries = kept
        self._rewrite()

    def reset(self) -> None:
        """Empty the index (recovery rebuilds it); the file goes."""
        self.entries = []
        self._file_size = 0
        self._dirty = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _rewrite(self) -> None:
        if not self.entries:
            self.reset()
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            data = b"".join(t.encode() for t in self.entries)
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)
        self._file_size = len(self.entries) * ABORTED_TXN_SIZE
        self._dirty = True

    def flush(self) -> None:
        """fsync the file if it changed since the last flush."""
        if not self._dirty:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._dirty = False
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
