"""LogManager: start-up, create/delete, checkpoints, meta files, clean shutdown."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.storage.batches import simple_batch
from tests.storage.storage_helpers import FakeClock
from tidelog.storage import LogConfig, LogManager, StorageError
from tidelog.storage.checkpoint import CheckpointError, read_checkpoint, write_checkpoint
from tidelog.storage.metadata import (
    kafka_uuid_from_string,
    kafka_uuid_string,
    read_partition_metadata,
)

CONFIG = LogConfig(segment_bytes=2000)


def _manager(dirs: list[Path], clock: FakeClock | None = None) -> LogManager:
    manager = LogManager(dirs, default_config=CONFIG, clock=clock or FakeClock(), node_id=3)
    manager.startup()
    return manager


def test_create_spreads_over_dirs_and_persists(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = _manager(dirs)
    topic_id = uuid.uuid4()
    logs = [manager.create_log("orders", p, CONFIG, topic_id) for p in range(4)]
    assert manager.create_log("orders", 0, CONFIG, topic_id) is logs[0]
    placed = [manager.log_dir_of("orders", p) for p in range(4)]
    assert placed.count(dirs[0]) == placed.count(dirs[1]) == 2
    for p, log in enumerate(logs):
        for i in range(p + 1):
            log.append(simple_batch(2, seed=i))
    assert read_partition_metadata(logs[0].dir) == topic_id
    text = (logs[0].dir / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}\n"
    cluster_id = manager.cluster_id
    manager.shutdown()
    for d in dirs:
        assert (d / ".kafka_cleanshutdown").exists()
        props = (d / "meta.properties").read_text()
        assert "version=1" in props and f"cluster.id={cluster_id}" in props
        assert "node.id=3" in props and "directory.id=" in props
    rp = read_checkpoint(dirs[0] / "recovery-point-offset-checkpoint")
    rp.update(read_checkpoint(dirs[1] / "recovery-point-offset-checkpoint"))
    assert rp == {("orders", p): 2 * (p + 1) for p in range(4)}

    manager = _manager(dirs)
    assert manager.cluster_id == cluster_id
    for d in dirs:
        assert not (d / ".kafka_cleanshutdown").exists()
    for p in range(4):
        log = manager.get_log("orders", p)
        assert log is not None
        assert log.log_end_offset == log.high_watermark == 2 * (p + 1)
        assert log.topic_id == topic_id
    assert len(manager.logs()) == 4
    manager.shutdown()


def test_delete_log(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = _manager([tmp_path], clock)
    log = manager.create_log("gone", 0, CONFIG, uuid.uuid4())
    log.append(simple_batch(1))
    manager.delete_log("gone", 0)
    assert manager.get_log("gone", 0) is None
    renamed = [p.name for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert len(renamed) == 1 and renamed[0].startswith("gone-0.")
    assert len(renamed[0].split(".")[1]) == len(uuid.uuid4().hex + "-delete")
    manager.run_retention(clock.now_ms)
    assert (tmp_path / renamed[0]).exists()
    manager.run_retention(clock.now_ms + CONFIG.file_delete_delay_ms)
    assert not (tmp_path / renamed[0]).exists()
    manager.delete_log("gone", 0)  # idempotent
    manager.shutdown()


def test_delete_dirs_removed_at_startup(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    manager.create_log("x", 0, CONFIG, uuid.uuid4())
    manager.delete_log("x", 0)
    manager.shutdown()
    manager = _manager([tmp_path])
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    manager.shutdown()


def test_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_checkpoint(path, {("a-b", 0): 5, ("c", 12): 7})
    assert path.read_text() == "0\n2\na-b 0 5\nc 12 7\n"
    assert read_checkpoint(path) == {("a-b", 0): 5, ("c", 12): 7}
    assert read_checkpoint(tmp_path / "missing") == {}
    path.write_text("0\n3\na 0 5\n")
    with pytest.raises(CheckpointError):
        read_checkpoint(path)


def test_corrupt_checkpoint_is_ignored(tmp_path: Path) -> None:
    manager = _manager([tmp_path])
    log = manager.create_log("t", 0, CONFIG, uuid.uuid4())
    log.append(simple_batch(3))
    manager.shutdown()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("garbage")
    (tmp_path / ".kafka_cleanshutdown").unlink()
    manager = _manager([tmp_path])
    reopened = manager.get_log("t", 0)
    assert reopened is not None and reopened.log_end_offset == 3
    manager.shutdown()


def test_wrong_node_id_refused(tmp_path: Path) -> None:
    _manager([tmp_path]).shutdown()
    other = LogManager([tmp_path], default_config=CONFIG, node_id=9)
    with pytest.raises(StorageError):
        other.startup()


def test_kafka_uuid_strings() -> None:
    value = uuid.UUID("5c3e1d7a-0b8e-4b0c-9a7e-2f1d3c4b5a69")
    text = kafka_uuid_string(value)
    assert len(text) == 22 and "=" not in text
    assert kafka_uuid_from_string(text) == value


def test_startup_says_how_each_log_dir_was_found(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A new dir is not reported as an unclean shutdown; a dir without the clean-shutdown
    marker but with partitions is."""
    caplog.set_level("INFO", logger="tidelog.storage")
    manager = _manager([tmp_path])
    assert f"loaded log dir {tmp_path}: 0 partition(s), new or empty" in caplog.text
    manager.create_log("t", 0, CONFIG, uuid.uuid4()).append(simple_batch(1))
    manager.shutdown()
    caplog.clear()
    manager = _manager([tmp_path])
    assert f"loaded log dir {tmp_path}: 1 partition(s), after a clean shutdown" in caplog.text
    caplog.clear()
    # no shutdown: as after a crash (the kernel drops the .lock of a dead process)
    manager.release_locks()
    manager = _manager([tmp_path])
    assert "1 partition(s), after an unclean shutdown" in caplog.text
    manager.shutdown()


def test_recovery_threads_open_every_partition_after_an_unclean_shutdown(tmp_path: Path) -> None:
    """num.recovery.threads.per.data.dir: partitions of a dir are opened by several threads."""
    dirs = [tmp_path / "a"]
    manager = _manager(dirs)
    topic_id = uuid.uuid4()
    for p in range(6):
        log = manager.create_log("orders", p, CONFIG, topic_id)
        for i in range(p + 1):
            log.append(simple_batch(3, seed=i))
        log.flush()
    for log in manager.logs():
        log.close()  # no clean-shutdown marker: every partition is recovered
    manager.release_locks()  # as after a crash: the kernel drops a dead process's .lock
    assert not (dirs[0] / ".kafka_cleanshutdown").exists()
    opened = LogManager(
        dirs, default_config=CONFIG, clock=FakeClock(), node_id=3, recovery_threads_per_data_dir=4
    )
    opened.startup()
    assert sorted(log.log_end_offset for log in opened.logs()) == [3 * (p + 1) for p in range(6)]
    opened.shutdown()
    with pytest.raises(ValueError, match="at least 1"):
        LogManager(dirs, default_config=CONFIG, recovery_threads_per_data_dir=0)


def test_checkpoint_writes_only_the_files_asked_for(tmp_path: Path) -> None:
    dirs = [tmp_path / "a"]
    manager = _manager(dirs)
    log = manager.create_log("orders", 0, CONFIG, uuid.uuid4())
    log.append(simple_batch(4))
    log.flush()
    manager.checkpoint(("log-start-offset-checkpoint",))
    assert read_checkpoint(dirs[0] / "log-start-offset-checkpoint") == {("orders", 0): 0}
    assert read_checkpoint(dirs[0] / "recovery-point-offset-checkpoint") == {}
    manager.checkpoint()
    assert read_checkpoint(dirs[0] / "recovery-point-offset-checkpoint") == {("orders", 0): 4}
    manager.shutdown()
