"""The log dirs at start-up: create and lock them, their ``meta.properties``, load their logs.

Kafka's LogManager.lockLogDirs, the meta.properties check and LogManager.loadLogs, as functions
``storage.manager.LogManager`` calls before it serves anything (the layout of a log dir is in
its docstring). Loading a log dir: the clean-shutdown marker is noted and deleted (fsynced)
before any partition is loaded, so a crash during this run is seen as unclean next time; the
recovery-point and log-start checkpoints are read (an unreadable one counts as empty); every
``<topic>-<partition>`` dir is opened by ``num.recovery.threads.per.data.dir`` threads
(recovering past its recovery point when the shutdown was not clean); ``-delete`` dirs are
removed; anything else is logged and left alone.

Threading: called from the thread that starts the broker, before the logs are shared.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from .checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    read_checkpoint,
)
from .errors import KafkaStorageError, LogDirNotFoundError, StorageError
from .fileio import fsync_dir
from .local_log import parse_partition_dir_name
from .lockfile import LogDirLock
from .metadata import (
    META_PROPERTIES_FILE,
    kafka_uuid_string,
    read_meta_properties,
    write_meta_properties,
)

# The partition log and its recovery code are imported by the first partition a dir holds.
if TYPE_CHECKING:
    from .log import PartitionLog

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "DELETE_DIR_SUFFIX",
    "OpenLog",
    "TopicPartition",
    "ensure_meta_properties",
    "load_log_dir",
    "lock_log_dirs",
]

logger = logging.getLogger("tidelog.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"

TopicPartition = tuple[str, int]
#: Opens one partition dir: ``(path, recovery point, log start offset, clean shutdown)``.
OpenLog = Callable[[Path, int, int, bool], "PartitionLog"]


def lock_log_dirs(log_dirs: Sequence[Path]) -> list[LogDirLock]:
    """Create missing log dirs and take each one's ``.lock`` (Kafka's lockLogDirs).

    Raises ``LogDirLockedError`` when a dir is in use (nothing in any dir is touched then, and
    the locks already taken are released), ``LogDirNotFoundError`` or ``KafkaStorageError``
    when a dir cannot be created, is not a directory or is not writable.
    """
    locks: list[LogDirLock] = []
    try:
        for log_dir in log_dirs:
            _create_log_dir(log_dir)
            locks.append(LogDirLock.acquire(log_dir))
            if not os.access(log_dir, os.R_OK | os.W_OK | os.X_OK):
                raise KafkaStorageError(
                    f"log dir {log_dir} is not writable (the broker needs read-write "
                    "access to every log dir)"
                )
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    return locks


def _create_log_dir(log_dir: Path) -> None:
    """Create ``log_dir`` and its parents when missing (as Kafka does)."""
    if log_dir.is_dir():
        return
    if log_dir.exists() or log_dir.is_symlink():
        raise LogDirNotFoundError(f"log dir {log_dir} is not a directory")
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LogDirNotFoundError(
            f"cannot create log dir {log_dir}: {exc.strerror or exc}"
        ) from exc


def ensure_meta_properties(log_dir: Path, *, node_id: int, cluster_id: str | None) -> str:
    """Check (or write) ``log_dir``'s ``meta.properties``; returns the cluster id.

    ``cluster_id``: the one another log dir (or the caller) has, None when none is known yet.
    A file of another cluster or node raises ``StorageError``.
    """
    props = read_meta_properties(log_dir)
    if props is not None:
        found = props.get("cluster.id")
        if found:
            if cluster_id is None:
                cluster_id = found
            elif found != cluster_id:
                raise StorageError(
                    f"{log_dir}/meta.properties has cluster.id {found}, expected {cluster_id}"
                )
        node = props.get("node.id")
        if node is not None and node != str(node_id):
            raise StorageError(
                f"{log_dir}/meta.properties has node.id {node}, this node is {node_id}"
            )
        if found and props.get("directory.id"):
            return found  # the cluster id (checked above)
        # An empty or torn file (a crash on a file system that lost the write): the ids
        # are rewritten, the cluster id from another log dir when one has it.
        logger.warning(
            "%s/%s is empty or damaged (no cluster.id or directory.id): writing it again",
            log_dir,
            META_PROPERTIES_FILE,
        )
    if cluster_id is None:
        cluster_id = kafka_uuid_string(uuid.uuid4())
    directory_id = (props or {}).get("directory.id") or kafka_uuid_string(uuid.uuid4())
    write_meta_properties(
        log_dir, node_id=node_id, cluster_id=cluster_id, directory_id=directory_id
    )
    return cluster_id


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        return read_checkpoint(path)
    except CheckpointError as exc:
        # Kafka divergence: Kafka takes the log dir offline; a lost checkpoint only costs
        # recovery work here (offsets fall back to 0 and segments are re-scanned).
        logger.warning("ignoring unreadable checkpoint: %s", exc)
        return {}


def load_log_dir(
    log_dir: Path,
    open_log: OpenLog,
    *,
    threads: int,
    loaded: Mapping[TopicPartition, Path],
) -> list[tuple[TopicPartition, PartitionLog]]:
    """Open every partition of ``log_dir`` (see the module docstring), in name order.

    ``loaded``: the partitions other log dirs hold already (a second copy raises
    ``StorageError``).
    """
    marker = log_dir / CLEAN_SHUTDOWN_FILE
    clean = marker.exists()
    if clean:
        marker.unlink()
        fsync_dir(log_dir)
    recovery_points = _read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
    log_starts = _read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
    found: list[tuple[Path, TopicPartition]] = []
    # One listing whose entries know their type (no stat per partition dir).
    with os.scandir(log_dir) as listing:
        dir_names = sorted(entry.name for entry in listing if entry.is_dir())
    for name in dir_names:
        path = log_dir / name
        if name.endswith(DELETE_DIR_SUFFIX):
            # Kafka divergence: Kafka waits file.delete.delay.ms again after a restart.
            logger.info("removing deleted partition dir %s", path)
            import shutil

            shutil.rmtree(path, ignore_errors=True)
            continue
        parsed = parse_partition_dir_name(path.name)
        if parsed is None:
            logger.warning("ignoring %s: not a <topic>-<partition> directory", path)
            continue
        if parsed in loaded:
            raise StorageError(
                f"duplicate log directories for {parsed[0]}-{parsed[1]}: "
                f"{loaded[parsed]} and {log_dir}"
            )
        found.append((path, parsed))

    def open_one(item: tuple[Path, TopicPartition]) -> PartitionLog:
        path, parsed = item
        return open_log(path, recovery_points.get(parsed, 0), log_starts.get(parsed, 0), clean)

    # As Kafka: num.recovery.threads.per.data.dir threads open a dir's logs (default 1).
    # Loading a partition is mostly Python (a few microseconds of syscalls each, no fsync
    # unless recovery cut or found unflushed bytes): more threads only contend for the GIL
    # (2,000 small partitions: 0.55 s by one thread, 0.8-1.0 s by eight, on 2 cores).
    threads = min(threads, len(found))
    if found:
        from .recovery import PROGRESS_INTERVAL_S

    opened: list[PartitionLog] = []
    started = logged = time.monotonic()
    with ThreadPoolExecutor(max(threads, 1), thread_name_prefix="log-recovery") as pool:
        loading = map(open_one, found) if threads <= 1 else pool.map(open_one, found)
        for log in loading:
            opened.append(log)
            now = time.monotonic()
            if now - logged >= PROGRESS_INTERVAL_S:  # a long start-up says where it is
                logged = now
                logger.info(
                    "loading log dir %s: %d of %d partitions loaded (%d%%), %.1f s",
                    log_dir,
                    len(opened),
                    len(found),
                    100 * len(opened) // len(found),
                    now - started,
                )
    if clean:
        how = "after a clean shutdown"
    elif opened:
        how = "after an unclean shutdown (segments past the recovery point checked)"
    else:
        how = "new or empty"
    logger.info(
        "loaded log dir %s: %d partition(s), %s, in %.2f s",
        log_dir,
        len(opened),
        how,
        time.monotonic() - started,
    )
    return [(parsed, log) for (_, parsed), log in zip(found, opened, strict=True)]
