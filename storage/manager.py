"""The log manager: every partition log in every log dir (Kafka's LogManager, one node).

A log dir holds::

    .lock                                flock'ed while a broker uses the dir (storage.lockfile)
    meta.properties                      node.id, cluster.id, directory.id (KRaft, version 1)
    recovery-point-offset-checkpoint     per partition: offset below which all is fsynced
    replication-offset-checkpoint        per partition: high watermark
    log-start-offset-checkpoint          per partition: log start offset
    .kafka_cleanshutdown                 present only after a clean shutdown
    <topic>-<partition>/                 one directory per partition (see storage.local_log)
    <topic>-<partition>.<uuid hex>-delete/   a deleted partition awaiting removal

Start-up (``storage.log_dirs``): every log dir is created when missing and its ``.lock`` taken
(another process using a dir stops the start-up before any file is touched); then
``meta.properties`` is read (or created); then each log dir's partitions are loaded. Shutdown:
every log is flushed and closed (indexes trimmed), the checkpoints are written, then the
clean-shutdown marker; the locks are released last.

Descriptors: every segment file of every log is opened through one bounded cache
(``file_handles``, ``storage.file_handles``; ``log.open.files.max``), so the number of open
files does not grow with the number of partitions.

New partitions are made a topic at a time (``create_logs``: all or none, no fsync per
partition, one per log dir). A new partition goes to the log dir holding the fewest partitions.
Deleting a partition renames its directory to ``<topic>-<partition>.<uuid hex>-delete``
(atomic; a crash leaves the renamed dir, removed at the next start-up) and removes it after
``file.delete.delay.ms``.

Threading: ``create_log``/``delete_log``/``get_log`` take the manager lock (short). Checkpoint
writes take a per-dir lock. Per-partition work follows ``PartitionLog``'s rules.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import uuid
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from .checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    write_checkpoint,
)
from .config import LogConfig
from .errors import KafkaStorageError, StorageError
from .file_handles import FileHandleCache
from .fileio import fsync_dir
from .local_log import wall_clock_ms
from .lockfile import LogDirLock
from .log_dirs import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    TopicPartition,
    ensure_meta_properties,
    load_log_dir,
    lock_log_dirs,
)
from .metadata import (
    PARTITION_METADATA_FILE,
    write_new_partition_metadata,
)
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, segment_file_name

# The partition log (and the record, transaction and recovery code under it) is imported by
# the first partition opened or created: an empty log dir starts without it.
if TYPE_CHECKING:
    from .log import PartitionLog

__all__ = ["CLEAN_SHUTDOWN_FILE", "LogManager"]

logger = logging.getLogger("tidelog.storage")

#: Threads that create and close (shutdown) partition logs: the work is file creations and
#: fsyncs, which overlap while they wait on the disk. Start-up uses
#: num.recovery.threads.per.data.dir (``log_dirs.load_log_dir``).
IO_THREADS = 8
CHECKPOINT_FILES = (
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
)


class LogManager:
    """Opens, creates, deletes, checkpoints and shuts down the partition logs."""

    def __init__(
        self,
        log_dirs: Sequence[Path],
        *,
        default_config: LogConfig,
        clock: Callable[[], int] = wall_clock_ms,
        node_id: int = 1,
        cluster_id: str | None = None,
        producer_id_expiration_ms: int | None = None,
        recovery_threads_per_data_dir: int = 1,
        open_files_max: int | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        if recovery_threads_per_data_dir < 1:
            raise ValueError("recovery_threads_per_data_dir must be at least 1")
        #: Kafka's num.recovery.threads.per.data.dir: partitions of one log dir are opened (and
        #: recovered past their recovery point) by this many threads at start-up.
        self.recovery_threads_per_data_dir = recovery_threads_per_data_dir
        self.log_dirs = [Path(d) for d in log_dirs]
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.default_config = default_config
        self.clock = clock
        self.node_id = node_id
        self._cluster_id = cluster_id
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._pending_dir_deletes: list[tuple[Path, int]] = []
        self._before_delete: list[Callable[[str, int], None]] = []
        self._lock = threading.Lock()
        self._checkpoint_locks = {d: threading.Lock() for d in self.log_dirs}
        self._dir_locks: list[LogDirLock] = []
        self._started = False
        #: Every segment file of every log is opened through this cache: at most
        #: ``open_files_max`` descriptors (``log.open.files.max``; None: no bound).
        self.file_handles = FileHandleCache(open_files_max)

    @property
    def cluster_id(self) -> str:
        if self._cluster_id is None:
            raise StorageError("cluster id is known only after startup()")
        return self._cluster_id

    # -- start-up ------------------------------------------------------------------------------
    def startup(self) -> None:
        """Lock every log dir, then load them. On failure the locks taken are released."""
        self.lock_log_dirs()
        try:
            for log_dir in self.log_dirs:
                self._cluster_id = ensure_meta_properties(
                    log_dir, node_id=self.node_id, cluster_id=self._cluster_id
                )
            for log_dir in self.log_dirs:
                loaded = load_log_dir(
                    log_dir,
                    self._open_log,
                    threads=self.recovery_threads_per_data_dir,
                    loaded=self._log_dir_of,
                )
                for key, log in loaded:
                    self._logs[key] = log
                    self._log_dir_of[key] = log_dir
            self._started = True
            if self._logs:  # an empty dir has no offsets to record (six fsyncs saved)
                self.checkpoint()
        except BaseException:
            self.release_locks()
            raise

    def lock_log_dirs(self) -> None:
        """Create missing log dirs and take each one's ``.lock`` (``log_dirs.lock_log_dirs``)."""
        if not self._dir_locks:
            self._dir_locks = lock_log_dirs(self.log_dirs)

    def release_locks(self) -> None:
        """Release every ``.lock`` this manager holds (after shutdown, or a failed start)."""
        locks, self._dir_locks = self._dir_locks, []
        for lock in locks:
            lock.release()

    def _open_log(
        self, path: Path, recovery_point: int, log_start_offset: int, clean_shutdown: bool
    ) -> PartitionLog:
        from .log import PartitionLog

        return PartitionLog(
            path,
            self.default_config,
            clock=self.clock,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            file_handles=self.file_handles,
            found=True,
        )

    # -- partitions ----------------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        # one dict read (atomic under the GIL): no lock on the produce and fetch paths
        return self._logs.get((topic, partition))

    def logs(self) -> list[PartitionLog]:
        with self._lock:
            return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        with self._lock:
            return self._log_dir_of.get((topic, partition))

    def _least_loaded_dirs(self, count: int) -> list[Path]:
        """Log dirs for ``count`` new partitions, each to the dir holding the fewest (under
        the manager lock)."""
        if len(self.log_dirs) == 1:
            return self.log_dirs * count
        counts = dict.fromkeys(self.log_dirs, 0)
        for d in self._log_dir_of.values():
            counts[d] = counts.get(d, 0) + 1
        chosen = []
        for _ in range(count):
            log_dir = min(self.log_dirs, key=lambda d: counts[d])
            counts[log_dir] += 1
            chosen.append(log_dir)
        return chosen

    def create_log(
        self, topic: str, partition: int, config: LogConfig, topic_id: uuid.UUID
    ) -> PartitionLog:
        """Create (or return the existing) log; a new one goes to the least-loaded log dir."""
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        return self.create_logs(topic, [partition], config, topic_id)[0]

    def create_logs(
        self,
        topic: str,
        partitions: Sequence[int],
        config: LogConfig,
        topic_id: uuid.UUID,
    ) -> list[PartitionLog]:
        """Create the logs of new partitions of one topic: all of them, or none.

        Each partition: ``mkdir``, ``partition.metadata``, an empty active segment; then one
        fsync of each log dir for all of them. No fsync per partition (a thousand of them cost
        seconds on a busy disk): on a journaling file system (ext4, xfs) the log dir's fsync
        commits the partition dirs' entries with it; elsewhere a crash may lose entries of a
        partition dir, which start-up recreates empty (nothing had been written to it: the
        first flush of a partition fsyncs its dir, see ``PartitionLog``) and a lost
        ``partition.metadata`` reads as no id (the topic registry's id applies). The
        partitions are made by ``IO_THREADS`` threads: the time goes to file creations in
        the kernel, which wait on the file system's journal when the disk is busy (1,000
        partitions: 0.3 s on an idle disk, 3 s by one thread on a busy one, 1 s by eight).
        Meant for a worker thread. A partition that already has a log is returned
        as it is. On any failure (EMFILE, ENOSPC ...) every log and directory this call made
        is removed again and ``KafkaStorageError`` names the cause and the fix.
        """
        with self._lock:
            wanted = [p for p in partitions if (topic, p) not in self._logs]
            busy = [p for p in wanted if (topic, p) in self._log_dir_of]
            if busy:
                raise KafkaStorageError(
                    f"partition {busy[0]} of {topic} is being created by another request"
                )
            for partition, log_dir in zip(
                wanted, self._least_loaded_dirs(len(wanted)), strict=True
            ):
                self._log_dir_of[(topic, partition)] = log_dir  # reserved while being made
        made: dict[int, PartitionLog] = {}
        made_dirs: list[Path] = []
        made_lock = threading.Lock()

        def make(partition: int) -> None:
            log_dir = self._log_dir_of[(topic, partition)]
            directory = log_dir / f"{topic}-{partition}"
            try:
                directory.mkdir()
                fresh = True
            except FileExistsError:
                fresh = False  # a dir left over (a crash): loaded as it is
            if fresh:
                with made_lock:
                    made_dirs.append(directory)
            write_new_partition_metadata(directory, topic_id)
            from .log import PartitionLog

            log = PartitionLog(
                directory,
                config,
                clock=self.clock,
                topic_id=topic_id,
                clean_shutdown=True,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                file_handles=self.file_handles,
                new=fresh,
            )
            with made_lock:
                made[partition] = log

        try:
            if len(wanted) < 2 * IO_THREADS:
                for partition in wanted:
                    make(partition)
            else:
                with ThreadPoolExecutor(IO_THREADS, thread_name_prefix="log-create") as pool:
                    for future in [pool.submit(make, p) for p in wanted]:
                        future.result()
            for log_dir in {self._log_dir_of[(topic, p)] for p in wanted}:
                fsync_dir(log_dir)
        except BaseException as exc:
            self._undo_create(topic, wanted, made, made_dirs)
            if isinstance(exc, OSError):
                raise KafkaStorageError(_create_failure(topic, exc)) from exc
            if isinstance(exc, KafkaStorageError) and isinstance(exc.__cause__, OSError):
                raise KafkaStorageError(_create_failure(topic, exc.__cause__)) from exc
            raise
        with self._lock:
            for partition, log in made.items():
                self._logs[(topic, partition)] = log
            return [self._logs[(topic, p)] for p in partitions]

    def _undo_create(
        self,
        topic: str,
        wanted: Sequence[int],
        made: dict[int, PartitionLog],
        made_dirs: list[Path],
    ) -> None:
        for log in made.values():
            log.close_without_flush()
        for directory in made_dirs:
            _remove_new_partition_dir(directory)
        with self._lock:
            log_dirs = {self._log_dir_of.pop((topic, p), None) for p in wanted}
        for log_dir in log_dirs:
            if log_dir is not None:
                try:
                    fsync_dir(log_dir)
                except OSError:
                    logger.warning("cannot fsync %s after removing %s", log_dir, topic)
        logger.warning(
            "creating %d partition(s) of %s failed: removed the %d made",
            len(wanted),
            topic,
            len(made_dirs),
        )

    def add_before_delete_hook(self, hook: Callable[[str, int], None]) -> None:
        """Call ``hook(topic, partition)`` before a log is deleted (the cleaner stops its pass)."""
        self._before_delete.append(hook)

    def delete_log(self, topic: str, partition: int) -> None:
        """Close the log and rename its dir ``<topic>-<partition>.<uuid hex>-delete``.

        Hooks run first, so a cleaning pass over the partition ends before its files go
        (Kafka's LogManager.asyncDelete aborts the cleaning of the partition).
        """
        key = (topic, partition)
        for hook in self._before_delete:
            hook(topic, partition)
        with self._lock:
            log = self._logs.pop(key, None)
            log_dir = self._log_dir_of.pop(key, None)
        if log is None or log_dir is None:
            return
        log.close_without_flush()
        target = log_dir / f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        try:
            os.rename(log.dir, target)
            fsync_dir(log_dir)
        except OSError as exc:
            raise KafkaStorageError(f"cannot rename {log.dir} for deletion: {exc}") from exc
        with self._lock:
            self._pending_dir_deletes.append((target, self.clock()))

    def delete_expired_dirs(self, now_ms: int) -> None:
        delay = self.default_config.file_delete_delay_ms
        with self._lock:
            due = [p for p, t in self._pending_dir_deletes if now_ms - t >= delay]
            self._pending_dir_deletes = [
                (p, t) for p, t in self._pending_dir_deletes if now_ms - t < delay
            ]
        for path in due:
            import shutil

            shutil.rmtree(path, ignore_errors=True)

    # -- periodic work -------------------------------------------------------------------------
    def checkpoint(self, files: Collection[str] = CHECKPOINT_FILES) -> None:
        """Write offset checkpoint files of every log dir (atomically): all three, or those named
        in ``files`` (the broker writes the log-start one on its own interval, as Kafka does)."""
        for log_dir in self.log_dirs:
            with self._lock:
                logs = [
                    (key, log)
                    for key, log in self._logs.items()
                    if self._log_dir_of.get(key) == log_dir
                ]
            recovery = {key: log.recovery_point for key, log in logs}
            replication = {key: log.high_watermark for key, log in logs}
            log_start = {key: log.log_start_offset for key, log in logs}
            with self._checkpoint_locks[log_dir]:
                try:
                    if RECOVERY_POINT_CHECKPOINT in files:
                        write_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, recovery)
                    if REPLICATION_OFFSET_CHECKPOINT in files:
                        write_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, replication)
                    if LOG_START_OFFSET_CHECKPOINT in files:
                        write_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, log_start)
                except OSError as exc:
                    raise KafkaStorageError(
                        f"cannot write checkpoints in {log_dir}: {exc}"
                    ) from exc

    def run_retention(self, now_ms: int) -> None:
        """Apply retention to every log and remove files whose deletion delay passed."""
        for log in self.logs():
            try:
                log.apply_retention(now_ms)
                log.delete_expired_files(now_ms)
            except StorageError:
                logger.exception("retention failed for %s", log)
        self.delete_expired_dirs(now_ms)

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown marker.

        Logs are closed by IO_THREADS threads (Kafka closes them with a pool per log dir): each
        close is a few fsyncs, which overlap.
        """
        logs = self.logs()
        if len(logs) < 2 * IO_THREADS:
            for log in logs:
                log.close()
        else:
            with ThreadPoolExecutor(IO_THREADS, thread_name_prefix="log-close") as pool:
                for future in [pool.submit(log.close) for log in logs]:
                    future.result()
        self.checkpoint()
        for log_dir in self.log_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(log_dir)
        with self._lock:
            self._logs.clear()
            self._log_dir_of.clear()
        self.release_locks()


def _create_failure(topic: str, exc: OSError) -> str:
    """The message of a failed partition creation, naming the fix."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return (
            f"cannot create the partitions of {topic}: out of file descriptors ({exc.strerror}). "
            "Raise the broker's open-file limit (ulimit -n) or lower log.open.files.max, or "
            "create fewer partitions"
        )
    if exc.errno == errno.ENOSPC:
        return (
            f"cannot create the partitions of {topic}: no space left in the log dir "
            f"({exc.filename}). Free disk space or delete topics"
        )
    return f"cannot create the partitions of {topic}: {exc.strerror or exc} ({exc.filename})"


def _remove_new_partition_dir(directory: Path) -> None:
    """Remove a partition dir ``create_logs`` made, without opening a descriptor when possible
    (the usual reason to be here is that none is left): the files it can hold are known."""
    for name in (
        PARTITION_METADATA_FILE,
        f"{segment_file_name(0)}{LOG_SUFFIX}",
        f"{segment_file_name(0)}{INDEX_SUFFIX}",
        f"{segment_file_name(0)}{TIMEINDEX_SUFFIX}",
    ):
        try:
            os.unlink(directory / name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            logger.warning("cannot remove %s: %s", directory / name, exc)
    try:
        os.rmdir(directory)
    except FileNotFoundError:
        pass
    except OSError:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)
        if directory.exists():
            logger.error("cannot remove %s: remove it by hand", directory)
