"""Offset checkpoint files of a log dir, in Kafka's text format (OffsetCheckpointFile)::

    0                       version
    <n>                     number of entries
    <topic> <partition> <offset>     n lines

Files: ``recovery-point-offset-checkpoint`` (offset below which all is fsynced),
``replication-offset-checkpoint`` (high watermarks), ``log-start-offset-checkpoint``.

Writes go to ``<file>.tmp``, are fsynced, then renamed over the file and the directory is
fsynced: a crash leaves the old or the new checkpoint, never a torn one. A checkpoint that does
not parse is reported (``CheckpointError``); the log manager then treats it as missing (offsets
fall back to 0 / the first segment, which only costs recovery work).

Threading: the log manager serializes writers per log dir.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .metadata import atomic_write

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CheckpointError",
    "read_checkpoint",
    "write_checkpoint",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

TopicPartition = tuple[str, int]


class CheckpointError(Exception):
    """A checkpoint file exists but is malformed."""


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = ["0", str(len(offsets))]
    lines.extend(f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items())
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Entries of a checkpoint file; empty when the file is absent."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except (UnicodeDecodeError, OSError) as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise CheckpointError(f"{path}: bad version line")
    try:
        count = int(lines[1])
    except ValueError as exc:
        raise CheckpointError(f"{path}: bad count line") from exc
    entries = lines[2:]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    result: dict[TopicPartition, int] = {}
    for line in entries:
        parts = line.split(" ")
        if len(parts) != 3:
            raise CheckpointError(f"{path}: malformed line {line!r}")
        topic, partition, offset = parts
        try:
            result[(topic, int(partition))] = int(offset)
        except ValueError as exc:
            raise CheckpointError(f"{path}: malformed line {line!r}") from exc
    return result
