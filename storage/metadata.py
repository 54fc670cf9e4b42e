"""Small metadata files: ``partition.metadata`` and ``meta.properties``, in Kafka's formats.

``<partition dir>/partition.metadata``::

    version: 0
    topic_id: <topic id>

``<log dir>/meta.properties`` (KRaft, version 1; Java properties, ``key=value`` per line,
``#`` comments)::

    #
    #<date>
    node.id=1
    directory.id=<uuid>
    version=1
    cluster.id=<uuid>

Ids are Kafka ``Uuid`` strings: the 16 bytes in URL-safe base64 without padding (22 chars).
Files are written to ``<name>.tmp``, fsynced and renamed over the old one, then the directory is
fsynced, so a crash leaves either the old or the new content (and maybe a stray ``.tmp``).

Threading: called with no shared state; callers serialize writers of one file.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from pathlib import Path

from .fileio import fsync_dir as fsync_dir  # its home is fileio; re-exported for old callers
from .fileio import read_small_file

__all__ = [
    "PARTITION_METADATA_FILE",
    "META_PROPERTIES_FILE",
    "atomic_write",
    "kafka_uuid_from_string",
    "kafka_uuid_string",
    "read_meta_properties",
    "read_partition_metadata",
    "write_meta_properties",
    "write_new_partition_metadata",
    "write_partition_metadata",
]

PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES_FILE = "meta.properties"


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def kafka_uuid_from_string(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka Uuid")
    return uuid.UUID(bytes=raw)


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``path`` via ``path.tmp`` + fsync + rename + directory fsync; the file has ``mode``
    from its first byte (a secret file is never readable by others, even briefly)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        if not mode & 0o077:
            os.fchmod(fd, mode)  # a private file: also when a crash left an older tmp file
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    text = f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}\n"
    atomic_write(directory / PARTITION_METADATA_FILE, text.encode())


def write_new_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    """``partition.metadata`` of a partition dir just made, written in place without fsync
    (nothing older can be lost; a torn or lost file reads as no id, and the topic registry's id
    applies). The caller fsyncs the log dir (``LogManager.create_logs``)."""
    text = f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}\n".encode()
    fd = os.open(directory / PARTITION_METADATA_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(text)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id from ``partition.metadata``, or None when absent or unreadable."""
    try:
        text = read_small_file(os.path.join(directory, PARTITION_METADATA_FILE)).decode()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        return None
    try:
        return kafka_uuid_from_string(fields["topic_id"])
    except ValueError:
        return None


def read_meta_properties(log_dir: Path) -> dict[str, str] | None:
    """The file's properties; None when it is absent, ``{}`` when it is not text."""
    try:
        text = (log_dir / META_PROPERTIES_FILE).read_text()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        return {}
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def write_meta_properties(
    log_dir: Path, *, node_id: int, cluster_id: str, directory_id: str
) -> None:
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    text = (
        f"#\n#{stamp}\nnode.id={node_id}\ndirectory.id={directory_id}\nversion=1\n"
        f"cluster.id={cluster_id}\n"
    )
    atomic_write(log_dir / META_PROPERTIES_FILE, text.encode())
