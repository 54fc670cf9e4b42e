"""The bounded cache of segment files (storage/file_handles.py, issue 20)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tidelog.storage import LogConfig, PartitionLog
from tidelog.storage.file_handles import FileHandleCache

from .batches import simple_batch


def _open_fds_under(directory: Path) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            count += 1
    return count


def test_bound_is_kept_and_evicted_files_reopen(tmp_path: Path) -> None:
    cache = FileHandleCache(3)
    handles = [cache.handle(tmp_path / f"f{i}") for i in range(10)]
    for i, handle in enumerate(handles):
        with handle.pinned() as fd:
            os.pwrite(fd, f"file {i}".encode(), 0)
        assert cache.open_count <= 3
    assert _open_fds_under(tmp_path) == 3
    assert cache.evictions == 7
    # the oldest were closed; reading them reopens them by path
    for i, handle in enumerate(handles):
        with handle.pinned() as fd:
            assert os.pread(fd, 16, 0) == f"file {i}".encode()
    assert cache.open_count == 3
    for handle in handles:
        handle.close()
    assert cache.open_count == 0
    assert _open_fds_under(tmp_path) == 0


def test_pinned_and_held_files_are_never_closed(tmp_path: Path) -> None:
    cache = FileHandleCache(2)
    a, b, c = (cache.handle(tmp_path / n) for n in "abc")
    fd_a = a.pin()
    b.hold()
    with c.pinned():  # over the bound rather than closing a descriptor in use
        assert cache.open_count == 3
    assert cache.open_count == 2  # c went back under the bound once unpinned
    os.pwrite(fd_a, b"still mine", 0)
    os.unlink(b.path)  # a held file keeps its bytes after the unlink
    with b.pinned() as fd:
        os.pwrite(fd, b"x", 0)
        assert os.pread(fd, 1, 0) == b"x"
    a.unpin()
    for h in (a, b, c):
        h.close()
    with pytest.raises(OSError):
        a.pin()


def test_unsynced_file_is_fsynced_before_eviction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    cache = FileHandleCache(1)
    a, b = cache.handle(tmp_path / "a"), cache.handle(tmp_path / "b")
    with a.pinned() as fd_a:
        os.pwrite(fd_a, b"data", 0)
    a.mark_unsynced()
    with b.pinned():  # evicts a: fsync first
        pass
    assert synced == [fd_a]
    assert not a.is_open and not a.unsynced
    a.sync()  # nothing left to sync: no reopen
    assert synced == [fd_a] and not a.is_open
    a.close()
    b.close()


def test_partitions_work_through_a_tiny_cache(tmp_path: Path) -> None:
    """Many partitions with many segments under a bound of 4 descriptors: appends, reads,
    rolls, flushes, truncation, retention-style renames and a clean reopen all work."""
    cache = FileHandleCache(4)
    config = LogConfig(segment_bytes=400, index_interval_bytes=50)
    logs = [
        PartitionLog(tmp_path / f"t-{p}", config, file_handles=cache, clean_shutdown=True)
        for p in range(12)
    ]
    for round_ in range(10):
        for p, log in enumerate(logs):
            log.append(simple_batch(2, seed=round_ * 100 + p, value_size=60))
            assert cache.open_count <= 4
    for log in logs:
        log.flush()
    assert _open_fds_under(tmp_path) <= 4
    for log in logs:
        data = log.read(0, 1 << 20).read_bytes()
        assert len(data) > 0
        assert log.log_end_offset == 20
        assert len(log.segments()) > 2
    logs[0].truncate_to(5)
    assert logs[0].log_end_offset in range(4, 6)
    logs[1].delete_records(10)
    logs[1].apply_retention(0)
    assert logs[1].log_start_offset >= 10
    for log in logs:
        log.close()
    assert cache.open_count == 0
    reopened = [
        PartitionLog(tmp_path / f"t-{p}", config, file_handles=cache, clean_shutdown=True)
        for p in range(12)
    ]
    assert [r.log_end_offset for r in reopened[1:]] == [20] * 11
    assert cache.open_count <= 4
    for r in reopened:
        r.close()


def test_readers_and_writers_share_a_bound_of_two(tmp_path: Path) -> None:
    """Reader threads and an appender on eight partitions through a cache of two descriptors:
    every read returns whole, correct batches (a descriptor is never closed or reused under a
    read) and the cache ends under its bound."""
    cache = FileHandleCache(2)
    config = LogConfig(segment_bytes=2000, index_interval_bytes=100)
    logs = [
        PartitionLog(tmp_path / f"r-{p}", config, file_handles=cache, clean_shutdown=True)
        for p in range(8)
    ]
    expected = [simple_batch(1, seed=p, value_size=40) for p in range(8)]
    for p, log in enumerate(logs):
        log.append(expected[p])
    stop = threading.Event()
    errors: list[str] = []

    def reader(p: int) -> None:
        while not stop.is_set():
            data = logs[p].read(0, 1 << 20).read_bytes()
            head = data[: len(expected[p])]
            if head[12:] != expected[p][12:]:  # after base offset and length: the same batch
                errors.append(f"partition {p}: read {head[:16]!r}")
                return

    threads = [threading.Thread(target=reader, args=(p,)) for p in range(8)]
    for t in threads:
        t.start()
    try:
        for round_ in range(40):
            for p, log in enumerate(logs):
                log.append(simple_batch(1, seed=1000 + round_ * 8 + p, value_size=40))
            for log in logs[:2]:
                log.flush()
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert errors == []
    assert cache.evictions > 100  # the bound was exercised, not just respected
    assert cache.open_count <= 2
    assert [log.log_end_offset for log in logs] == [41] * 8
    for log in logs:
        log.close()
    assert cache.open_count == 0
