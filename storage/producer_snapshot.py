"""Producer state snapshot files (Kafka's ``<offset>.snapshot``), byte for byte.

A partition directory holds zero or more ``NNNNNNNNNNNNNNNNNNNN.snapshot`` files (the offset
zero-padded to 20 digits, like segment names). The file named ``N`` holds the producer state as
it was after every batch below offset ``N`` had been applied - the state a replay of the log
from offset ``N`` starts from. Byte layout (big-endian; Kafka's ProducerStateManager schema,
version 1)::

    offset  size  field
         0     2  version            int16, always 1
         2     4  crc                uint32, CRC-32C (Castagnoli) of bytes [6, end of file)
         6     4  entry_count        int32, number of entries that follow (never -1 here)
        10  46*n  entries, each:
                    producer_id               int64
                    epoch                     int16
                    last_sequence             int32  last sequence of the producer's last batch
                    last_offset               int64  last offset of that batch (-1: no batch)
                    offset_delta              int32  last_offset - first offset of that batch
                    timestamp                 int64  max timestamp of that batch
                    coordinator_epoch         int32  epoch of the coordinator's last marker (-1)
                    current_txn_first_offset  int64  first offset of the open transaction (-1)

Invariants: the file is exactly ``10 + 46 * entry_count`` bytes; the CRC matches; producer ids
are unique. Only the producer's *last* batch is kept (as in Kafka), so after a load from a
snapshot alone, duplicate detection covers that batch; the batches replayed from the log after
the snapshot refill the cache of five.

Writing: the bytes go to ``<name>.tmp``, which is renamed over ``<name>`` (optionally fsynced
first, and the directory after). A crash can leave a ``.tmp`` file (removed when the directory
is listed), or - without the fsync - a renamed file whose bytes never reached the disk; such a
file fails its CRC or size check, ``read_snapshot`` raises ``CorruptSnapshotError`` and the
loader deletes it and falls back to the next older snapshot, or to a replay from the log start.

Kafka divergence: Kafka writes the final file in place (``CREATE, WRITE`` then ``force``); the
tmp + rename here means a reader never sees a half-written file. The bytes are the same, and
Kafka reads files written here (and the other way round).

Threading: pure functions over files; the caller (ProducerStateManager) serialises access.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from tidelog.storage.checksum import crc32c

from .batch import decrement_sequence
from .errors import StorageError
from .fileio import fsync_dir, read_small_file

__all__ = [
    "SNAPSHOT_SUFFIX",
    "SNAPSHOT_VERSION",
    "CorruptSnapshotError",
    "SnapshotEntry",
    "delete_snapshot",
    "decode_snapshot",
    "encode_snapshot",
    "fsync_file_and_directory",
    "list_snapshots",
    "read_snapshot",
    "snapshot_path",
    "write_snapshot",
]

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
TMP_SUFFIX = ".tmp"

_HEAD = struct.Struct(">hIi")  # version, crc, entry_count
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6
assert _HEAD.size == 10 and _ENTRY.size == 46


class CorruptSnapshotError(StorageError, error_name="CORRUPT_MESSAGE"):
    """A snapshot file that fails its version, size or CRC check (Kafka's CorruptSnapshotException).

    The loader deletes the file and falls back to an older snapshot; it never reaches a client.
    """


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One producer as a snapshot stores it."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def first_sequence(self) -> int:
        """First sequence of the last batch (Kafka's decrementSequence(last_sequence,
        offset_delta)): sequences wrap at 2^31."""
        return decrement_sequence(self.last_sequence, self.offset_delta)


def snapshot_path(directory: Path, offset: int) -> Path:
    """``<directory>/<offset, 20 digits>.snapshot``."""
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """The bytes of a version-1 snapshot holding ``entries`` (in the order given)."""
    items = list(entries)
    body = bytearray(_HEAD.size + _ENTRY.size * len(items))
    struct.pack_into(">i", body, _CRC_START, len(items))
    position = _HEAD.size
    for e in items:
        _ENTRY.pack_into(
            body,
            position,
            e.producer_id,
            e.epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        position += _ENTRY.size
    crc = crc32c(memoryview(body)[_CRC_START:])
    struct.pack_into(">hI", body, 0, SNAPSHOT_VERSION, crc)
    return bytes(body)


def decode_snapshot(data: bytes, *, name: str = "snapshot") -> list[SnapshotEntry]:
    """Parse and check a snapshot's bytes; raise ``CorruptSnapshotError`` on any damage."""
    # The messages are Kafka's (ProducerStateManager.readSnapshot), which dump-log prints.
    if len(data) < _HEAD.size:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {name} has {len(data)} bytes, "
            f"less than the {_HEAD.size}-byte header"
        )
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}: {name}")
    computed = crc32c(memoryview(data)[_CRC_START:])
    if crc != computed:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
            f"Computed crc: {computed}: {name}"
        )
    if count < 0 or len(data) != _HEAD.size + _ENTRY.size * count:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {name}: {count} entries of {_ENTRY.size} "
            f"bytes do not fit {len(data)} bytes"
        )
    entries = [
        SnapshotEntry(*_ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)) for i in range(count)
    ]
    if len({e.producer_id for e in entries}) != len(entries):
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {name}: a producer id appears twice"
        )
    return entries


def read_snapshot(path: Path) -> list[SnapshotEntry]:
    """Read a snapshot file (``CorruptSnapshotError`` if damaged; OSError if unreadable)."""
    return decode_snapshot(read_small_file(path), name=str(path))


def write_snapshot(
    directory: Path, offset: int, entries: Iterable[SnapshotEntry], *, sync: bool
) -> Path:
    """Write ``<offset>.snapshot`` via a tmp file and a rename; fsync file and dir if ``sync``."""
    path = snapshot_path(directory, offset)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    data = encode_snapshot(entries)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(directory)
    return path


def fsync_file_and_directory(path: Path) -> None:
    """fsync a file written earlier without ``sync`` (and its directory). Missing: no-op."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def list_snapshots(directory: Path, names: Collection[str] | None = None) -> dict[int, Path]:
    """Snapshot files of a directory by offset; leftover ``.snapshot.tmp`` files are removed.

    ``names``: the directory's file names when the caller has just listed it (no new listing).
    """
    found: dict[int, Path] = {}
    if names is None:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return found
    for name in names:
        if name.endswith(SNAPSHOT_SUFFIX + TMP_SUFFIX):
            delete_snapshot(directory / name)
            continue
        if not name.endswith(SNAPSHOT_SUFFIX):
            continue
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if stem.isdigit() and len(stem) == 20:
            found[int(stem)] = directory / name
    return found


def delete_snapshot(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
