"""Crashes during compaction: recovery ends in the old or the new state, never a mix.

A cleaning pass runs in a forked child that is killed (``os._exit``, no clean-up handlers, like
SIGKILL) just before or just after its k-th file-system step (write, fsync, rename); the parent
then opens the log dir as after a crash and compares what a consumer reads with the log before
the pass ("old") and after a complete pass ("new"). Every k up to the end of the pass is tried.
Hand-made crash states (``.cleaned`` and ``.swap`` files left as a crash would) are checked too.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.storage.storage_helpers import FakeClock
from tidelog.storage import LogConfig, LogManager, PartitionLog
from tidelog.storage.cleaner import CompactionConfig, LogCleaner
from tidelog.storage.record_codec import encode_batch, iter_records
from tidelog.storage.record_types import NewRecord

TOPIC = "crashy"
CRASH_EXIT = 17
ONE_GROUP = LogConfig(segment_bytes=1 << 20, cleanup_policy="compact")
MANY_GROUPS = LogConfig(segment_bytes=600, cleanup_policy="compact")


def fill(root: Path, config: LogConfig, clock: FakeClock, *, rolls: bool) -> None:
    manager = LogManager([root], default_config=config, clock=clock)
    manager.startup()
    log = manager.create_log(TOPIC, 0, config, uuid.uuid4())
    for i in range(60):
        key = f"key-{i % 7}".encode()
        value = None if i % 11 == 5 else f"value-{i}".encode() * 3
        log.append(
            encode_batch(
                [NewRecord(key, value, timestamp=clock.now_ms)],
                compression="gzip" if i % 3 else "none",
            )
        )
        clock.advance(5)
        if rolls and i % 15 == 14:
            log.roll()
    log.append(encode_batch([NewRecord(b"tail", b"active", timestamp=clock.now_ms)]))
    manager.shutdown()


def records(root: Path, config: LogConfig, clock: FakeClock) -> list[tuple[int, Any, Any]]:
    manager = LogManager([root], default_config=config, clock=clock)
    manager.startup()
    try:
        log = manager.get_log(TOPIC, 0)
        assert log is not None
        leftovers = [p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
        assert not leftovers
        data = log.read(log.log_start_offset, 1 << 30).read_bytes()
        return [(r.offset, r.key, r.value) for r in iter_records(data)]
    finally:
        manager.shutdown()


def clean_pass(root: Path, config: LogConfig, clock: FakeClock) -> None:
    manager = LogManager([root], default_config=config, clock=clock)
    manager.startup()
    log = manager.get_log(TOPIC, 0)
    assert log is not None
    cleaner = LogCleaner(
        manager, compaction_config=lambda _l: CompactionConfig(delete_retention_ms=0), clock=clock
    )
    assert cleaner.clean_log(log) is not None
    manager.shutdown()


def crash_at(root: Path, config: LogConfig, clock: FakeClock, k: int, after: bool) -> int:
    """Run a pass in a child killed around its k-th file-system step; the child's exit code."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            count = [0]

            def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
                def step(*args: Any, **kwargs: Any) -> Any:
                    count[0] += 1
                    if count[0] == k and not after:
                        os._exit(CRASH_EXIT)
                    result = real(*args, **kwargs)
                    if count[0] == k and after:
                        os._exit(CRASH_EXIT)
                    return result

                return step

            for name in ("rename", "replace", "fsync", "pwritev", "unlink"):
                setattr(os, name, wrap(getattr(os, name)))
            manager = LogManager([root], default_config=config, clock=clock)
            manager.startup()
            count[0] = 0  # count only the pass's steps
            log = manager.get_log(TOPIC, 0)
            assert log is not None
            LogCleaner(
                manager,
                compaction_config=lambda _l: CompactionConfig(delete_retention_ms=0),
                clock=clock,
            ).clean_log(log)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.parametrize("after", [False, True])
def test_crash_at_every_step_of_a_single_swap(tmp_path: Path, after: bool) -> None:
    clock = FakeClock()
    pristine = tmp_path / "pristine"
    fill(pristine, ONE_GROUP, clock, rolls=True)
    old = records(pristine, ONE_GROUP, clock)
    done = tmp_path / "done"
    shutil.copytree(pristine, done)
    clean_pass(done, ONE_GROUP, clock)
    new = records(done, ONE_GROUP, clock)
    assert new != old and len(new) < len(old)
    outcomes = set()
    k = 1
    while True:
        work = tmp_path / f"work-{k}"
        shutil.copytree(pristine, work)
        code = crash_at(work, ONE_GROUP, clock, k, after)
        assert code in (0, CRASH_EXIT), code
        got = records(work, ONE_GROUP, clock)
        assert got in (old, new), f"crash at step {k} left a mix"
        outcomes.add("old" if got == old else "new")
        # the log is still cleanable afterwards, and then holds the new state
        clean_pass(work, ONE_GROUP, clock)
        assert records(work, ONE_GROUP, clock) == new
        shutil.rmtree(work)
        if code == 0:
            break
        k += 1
    assert outcomes == {"old", "new"}
    assert k > 10


def test_crash_with_many_groups_keeps_every_latest_value(tmp_path: Path) -> None:
    clock = FakeClock()
    pristine = tmp_path / "pristine"
    fill(pristine, MANY_GROUPS, clock, rolls=False)
    old = records(pristine, MANY_GROUPS, clock)
    latest = {key: (offset, value) for offset, key, value in old}
    k = 1
    while True:
        work = tmp_path / f"work-{k}"
        shutil.copytree(pristine, work)
        code = crash_at(work, MANY_GROUPS, clock, k, after=False)
        got = records(work, MANY_GROUPS, clock)
        assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})
        by_offset = {o: (key, v) for o, key, v in got}
        for key, (offset, value) in latest.items():
            if value is not None:
                assert by_offset[offset] == (key, value)
        shutil.rmtree(work)
        if code == 0:
            break
        k += 7  # a sample of the steps: every group's swap is one of them often enough
        assert k < 5000


def _segment_names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.name.endswith(".log")}


def test_hand_made_crash_states(tmp_path: Path) -> None:
    """``.cleaned`` left: old state. ``.swap`` left next to the old segments: new state."""
    clock = FakeClock()
    pristine = tmp_path / "pristine"
    fill(pristine, ONE_GROUP, clock, rolls=True)
    old = records(pristine, ONE_GROUP, clock)
    done = tmp_path / "done"
    shutil.copytree(pristine, done)
    clean_pass(done, ONE_GROUP, clock)
    new = records(done, ONE_GROUP, clock)
    part = f"{TOPIC}-0"
    cleaned = (done / part / "00000000000000000000.log").read_bytes()

    def state(name: str, files: dict[str, bytes], remove: tuple[str, ...] = ()) -> list[Any]:
        work = tmp_path / name
        shutil.copytree(pristine, work)
        (work / ".kafka_cleanshutdown").unlink()
        for file_name, data in files.items():
            (work / part / file_name).write_bytes(data)
        for file_name in remove:
            (work / part / file_name).rename(work / part / (file_name + ".deleted"))
        return records(work, ONE_GROUP, clock)

    base = "00000000000000000000"
    assert state("cleaned", {f"{base}.log.cleaned": cleaned[:100]}) == old
    assert state("cleaned-full", {f"{base}.log.cleaned": cleaned, f"{base}.index.swap": b""}) == old
    assert state("swap", {f"{base}.log.swap": cleaned}) == new
    second = sorted(_segment_names(pristine / part))[1]
    assert (
        state(
            "swap-half-deleted",
            {f"{base}.log.swap": cleaned, f"{base}.index.swap": b""},
            remove=(second,),
        )
        == new
    )
    # a swap and a .cleaned of a later group: the later one is dropped, the swap completes
    assert (
        state(
            "swap-and-cleaned", {f"{base}.log.swap": cleaned, f"{second[:20]}.log.cleaned": b"junk"}
        )
        == new
    )


def test_cleaner_files_vanish_when_a_pass_is_aborted(tmp_path: Path) -> None:
    clock = FakeClock()
    fill(tmp_path, MANY_GROUPS, clock, rolls=False)
    manager = LogManager([tmp_path], default_config=MANY_GROUPS, clock=clock)
    manager.startup()
    log = manager.get_log(TOPIC, 0)
    assert isinstance(log, PartitionLog)
    cleaner = LogCleaner(manager, clock=clock)
    calls = [0]
    real = cleaner._check_done

    def stop_later(target: PartitionLog) -> None:
        calls[0] += 1
        if calls[0] == 40:
            cleaner._stop.set()
        real(target)

    cleaner._check_done = stop_later  # type: ignore[method-assign,assignment]
    assert cleaner.clean_log(log) is None
    assert not [p for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert not (tmp_path / "cleaner-offset-checkpoint").exists()
    manager.shutdown()
