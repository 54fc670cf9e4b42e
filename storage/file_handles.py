"""A bounded cache of open segment files: at most ``log.open.files.max`` descriptors.

Kafka keeps one descriptor per segment open and maps the indexes of every segment it touched
(its ``LazyIndex`` opens an index only when it is first used). On a machine whose descriptor
limit cannot be raised (20,000 here) that caps a broker near 20,000 / 3 partitions, so tidelog
opens segment files through this cache instead:

* A ``FileHandle`` names one file (``.log``, ``.index`` or ``.timeindex``); its descriptor is
  opened on first use (``pin``) and stays open afterwards, in least-recently-used order, until
  the cache needs room for another file and closes it (``evict``). The next ``pin`` reopens the
  file by its current path (``rename`` keeps the path up to date).
* ``pin()`` returns the descriptor and keeps it open until the matching ``unpin()``: a read or a
  write never sees its descriptor closed (or its number reused) under it. Pinned handles are
  never evicted; when every open handle is pinned the cache goes over its bound rather than
  fail, and comes back under it as handles are unpinned and others opened.
* ``hold()`` pins for good: a segment renamed ``.deleted`` keeps its descriptor until the
  segment object is freed, so reads that snapshotted it finish on the old bytes even after the
  file is unlinked (and a file that is gone can never be reopened by path).
* A handle written to since its last ``sync()`` is fsynced before the cache closes it (flush
  before evict), so a later ``sync()`` of a closed handle has nothing left to do: durability
  never depends on a descriptor staying open.
* ``os.open`` failing with EMFILE/ENFILE makes the cache close half of its idle descriptors and
  try once more before the error reaches the caller.

Kafka divergence: Kafka has no such bound (``log.open.files.max`` is tidelog's own setting);
its default is half the soft RLIMIT_NOFILE, leaving the other half for sockets and the files
opened briefly (snapshots, checkpoints, ``.txnindex``, the cleaner's output).

Threading: every method may be called from any thread; one lock per cache guards the LRU, the
counts and each handle's descriptor. ``os.open`` runs outside it (``pin``); ``close`` (a few
microseconds) and, rarely, the fsync of an unsynced handle being evicted run under it.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["FileHandle", "FileHandleCache", "UNBOUNDED"]

logger = logging.getLogger("tidelog.storage")

_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC


class FileHandle:
    """One file whose descriptor the cache opens on demand and may close when idle."""

    __slots__ = ("__weakref__", "_cache", "_fd", "_held", "_pins", "_unsynced", "closed", "path")

    def __init__(self, cache: FileHandleCache, path: Path) -> None:
        self._cache = cache
        self.path = path
        self._fd = -1
        self._pins = 0
        self._held = False
        self._unsynced = False
        self.closed = False

    def __repr__(self) -> str:
        return f"FileHandle({self.path}, fd={self._fd}, pins={self._pins})"

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    @property
    def unsynced(self) -> bool:
        return self._unsynced

    def pin(self) -> int:
        """The open descriptor (opened now if needed), kept open until ``unpin``.

        Raises ``OSError`` (EBADF once ``close``d; the ``os.open`` error otherwise). The file
        is opened outside the cache's lock (threads loading thousands of partitions open
        files in parallel); two threads opening the same handle at once keep one descriptor.
        """
        cache = self._cache
        with cache._lock:
            fd = self._fd
            if fd >= 0:
                if self._pins == 0 and not self._held:
                    del cache._idle[self]
                self._pins += 1
                return fd
            if self.closed:
                raise OSError(errno.EBADF, f"{self.path} is closed")
            cache._make_room_locked()
            self._pins += 1  # not idle while it opens: nothing evicts or reuses it
            path = self.path
        try:
            fd = cache._open_file(path)
        except BaseException:
            with cache._lock:
                self._pins -= 1
            raise
        with cache._lock:
            if self._fd >= 0 or self.closed:  # another thread opened it, or it was closed
                os.close(fd)
                if self.closed and self._fd < 0:
                    self._pins -= 1
                    raise OSError(errno.EBADF, f"{self.path} is closed")
                return self._fd
            self._fd = fd
            cache._opened_locked()
            return fd

    def unpin(self) -> None:
        cache = self._cache
        with cache._lock:
            self._pins -= 1
            if self._pins == 0 and self._fd >= 0 and not self._held:
                cache._idle[self] = None  # most recently used
                cache._trim_locked()

    @contextmanager
    def pinned(self) -> Iterator[int]:
        """``with handle.pinned() as fd:`` - the descriptor, open for the block."""
        fd = self.pin()
        try:
            yield fd
        finally:
            self.unpin()

    def hold(self) -> None:
        """Keep the descriptor open until ``close`` (the file is about to be deleted)."""
        cache = self._cache
        with cache._lock:
            if self._held:
                return
            if self._fd < 0:
                cache._open_locked(self)
            elif self._pins == 0:
                del cache._idle[self]
            self._held = True

    def mark_unsynced(self) -> None:
        """The file was written to: fsync it before its descriptor is closed."""
        self._unsynced = True

    def mark_synced(self) -> None:
        """The file's bytes are known to be on disk already (nothing for ``sync`` to do)."""
        self._unsynced = False

    def sync(self) -> None:
        """fsync the file if it was written to since the last sync (nothing to do when the
        cache closed it: it fsynced it first). Raises ``OSError`` when fsync fails."""
        if not self._unsynced:
            return
        fd = self.pin()
        try:
            self._unsynced = False  # cleared first: a write racing the fsync sets it again
            try:
                os.fsync(fd)
            except OSError:
                self._unsynced = True
                raise
        finally:
            self.unpin()

    def release(self, *, unsynced_ok: bool = False) -> None:
        """Close the descriptor now if nobody uses it and nothing awaits an fsync (a segment
        that stopped being active gives its index descriptors back at once). ``unsynced_ok``:
        the file's changes need no fsync (the active segment's indexes, rebuilt after a crash).
        """
        cache = self._cache
        with cache._lock:
            if unsynced_ok:
                self._unsynced = False
            if self._fd >= 0 and self._pins == 0 and not self._held and not self._unsynced:
                del cache._idle[self]
                cache._close_locked(self)

    def rename(self, new_path: Path) -> None:
        """The file was renamed: an open descriptor stays valid, a reopen uses the new path."""
        with self._cache._lock:
            self.path = new_path

    def close(self) -> None:
        """Close the descriptor for good (without fsync: call ``sync`` first if needed)."""
        cache = self._cache
        with cache._lock:
            if self.closed:
                return
            self.closed = True
            if self._fd >= 0:
                if self._pins == 0 and not self._held:
                    cache._idle.pop(self, None)
                cache._close_locked(self)
            self._held = False

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


class FileHandleCache:
    """At most ``max_open`` descriptors of ``FileHandle`` files open at once (None: no bound)."""

    def __init__(self, max_open: int | None = None) -> None:
        if max_open is not None and max_open < 1:
            raise ValueError(f"max_open must be at least 1, got {max_open}")
        self.max_open = max_open
        # Reentrant: a segment freed by the garbage collector while this thread holds the lock
        # (any allocation may start a collection) closes its handles from ``__del__``.
        self._lock = threading.RLock()
        #: Open, unpinned, unheld handles, least recently used first.
        self._idle: OrderedDict[FileHandle, None] = OrderedDict()
        self._open = 0
        #: Descriptors closed to make room (a measure of churn, for the metrics and tests).
        self.evictions = 0
        self._over_bound_logged = False

    def __repr__(self) -> str:
        return f"FileHandleCache(max_open={self.max_open}, open={self._open})"

    def handle(self, path: Path) -> FileHandle:
        """A handle for ``path``; nothing is opened until it is pinned."""
        return FileHandle(self, path)

    @property
    def open_count(self) -> int:
        """Descriptors open now (pinned, held and idle)."""
        return self._open

    # -- under the lock --------------------------------------------------------------------------
    def _make_room_locked(self) -> None:
        if self.max_open is not None and self._open >= self.max_open:
            self._evict_locked(self._open - self.max_open + 1)

    def _open_file(self, path: Path) -> int:
        """``os.open`` (without the lock); out of descriptors, close half of the idle ones and
        try once more."""
        try:
            return os.open(path, _OPEN_FLAGS, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            with self._lock:
                if not self._idle:
                    raise
                closed = self._evict_locked(max(len(self._idle) // 2, 1))
            logger.warning(
                "out of file descriptors opening %s: closed %d idle segment files and retrying "
                "(lower log.open.files.max or raise the process's RLIMIT_NOFILE)",
                path,
                closed,
            )
            return os.open(path, _OPEN_FLAGS, 0o644)

    def _opened_locked(self) -> None:
        self._open += 1
        if self.max_open is not None and self._open > self.max_open and not self._over_bound_logged:
            self._over_bound_logged = True
            logger.warning(
                "%d segment files are in use at once, more than log.open.files.max=%d: the "
                "bound is exceeded until some are released",
                self._open,
                self.max_open,
            )

    def _open_locked(self, handle: FileHandle) -> int:
        """Open under the lock (``hold``: rare)."""
        if handle.closed:
            raise OSError(errno.EBADF, f"{handle.path} is closed")
        self._make_room_locked()
        try:
            fd = os.open(handle.path, _OPEN_FLAGS, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE) or not self._idle:
                raise
            self._evict_locked(max(len(self._idle) // 2, 1))
            fd = os.open(handle.path, _OPEN_FLAGS, 0o644)
        handle._fd = fd
        self._opened_locked()
        return fd

    def _trim_locked(self) -> None:
        if self.max_open is not None and self._open > self.max_open:
            self._evict_locked(self._open - self.max_open)

    def _evict_locked(self, count: int) -> int:
        closed = 0
        failed: list[FileHandle] = []
        while closed < count and self._idle:
            victim, _ = self._idle.popitem(last=False)
            if victim._unsynced:
                try:
                    victim._unsynced = False
                    os.fsync(victim._fd)
                except OSError:
                    victim._unsynced = True
                    logger.exception("fsync of %s before closing it failed", victim.path)
                    failed.append(victim)  # stays open: its own flush reports the error
                    continue
            self._close_locked(victim)
            closed += 1
        for victim in failed:
            self._idle[victim] = None
        self.evictions += closed
        return closed

    def _close_locked(self, handle: FileHandle) -> None:
        fd, handle._fd = handle._fd, -1
        self._open -= 1
        try:
            os.close(fd)
        except OSError:  # pragma: no cover - the descriptor was ours
            logger.exception("closing %s failed", handle.path)


#: The cache of segments made outside a ``LogManager`` (tools, tests): no bound, as before.
UNBOUNDED = FileHandleCache(None)
