"""The ``.lock`` file of a log dir: one process at a time may use a log dir (Kafka's FileLock).

``<log dir>/.lock`` is locked with an exclusive ``flock`` before anything else in the dir is read
or written, and stays locked for the life of the process: the kernel drops the lock when the
process exits, however it exits (SIGKILL included), so a stale file never blocks a restart.
``flock`` locks belong to the open file description, so a second ``LogManager`` in the same
process is refused too (Kafka: "in another process or thread").

The file holds the decimal pid of the holder and a newline, written after the lock is taken.
Kafka divergence: Kafka leaves ``.lock`` empty; the pid lets the refusal name the holder.
A process that finds the lock taken reads the pid (best effort) and changes nothing in the dir.

Threading: ``acquire`` and ``release`` are called once each, from the start-up and shutdown path.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from .errors import KafkaStorageError, LogDirNotFoundError, StorageError

__all__ = ["LOCK_FILE", "LogDirLock", "LogDirLockedError", "lock_holder_pid"]

LOCK_FILE = ".lock"
#: Read at most this much of a ``.lock`` file (a pid is a few digits).
_MAX_PID_TEXT = 32


class LogDirLockedError(StorageError):
    """Another process (or another LogManager in this one) holds the log dir's ``.lock``."""

    def __init__(self, log_dir: Path, pid: int | None) -> None:
        holder = f" (held by pid {pid})" if pid is not None else ""
        super().__init__(
            f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}{holder}. A Kafka instance "
            "in another process or thread is using this directory."
        )
        self.log_dir = log_dir
        self.pid = pid


def lock_holder_pid(log_dir: Path) -> int | None:
    """The pid written in ``<log_dir>/.lock`` (None if absent or unreadable). Never writes."""
    try:
        with open(log_dir / LOCK_FILE, "rb") as fh:
            text = fh.read(_MAX_PID_TEXT)
    except OSError:
        return None
    try:
        pid = int(text.strip() or b"-1")
    except ValueError:
        return None
    return pid if pid > 0 else None


class LogDirLock:
    """An exclusive lock on ``<log_dir>/.lock``; ``acquire`` raises if someone else has it."""

    def __init__(self, log_dir: Path, fd: int) -> None:
        self.log_dir = log_dir
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, log_dir: Path) -> LogDirLock:
        """Lock ``log_dir`` (which must exist) or raise ``LogDirLockedError``.

        ``LogDirNotFoundError`` when the dir is not a directory; ``KafkaStorageError`` when the
        lock file cannot be created or written (a read-only or unwritable dir).
        """
        path = log_dir / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except NotADirectoryError as exc:
            raise LogDirNotFoundError(f"log dir {log_dir} is not a directory") from exc
        except FileNotFoundError as exc:
            raise LogDirNotFoundError(f"log dir {log_dir} does not exist") from exc
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot create {path}: {exc.strerror} (the broker needs read-write access "
                "to every log dir)"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LogDirLockedError(log_dir, lock_holder_pid(log_dir)) from None
            raise KafkaStorageError(f"cannot lock {path}: {exc.strerror}") from exc
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError as exc:
            os.close(fd)
            raise KafkaStorageError(
                f"cannot write {path}: {exc.strerror} (the broker needs read-write access "
                "to every log dir)"
            ) from exc
        return cls(log_dir, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (closing the file releases it). The file itself stays, as in Kafka."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
