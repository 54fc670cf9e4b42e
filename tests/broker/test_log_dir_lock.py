"""One broker per log dir: the ``.lock`` file (Kafka's LogManager.lockLogDirs).

A second ``tidelog serve`` on a dir a live broker uses must exit 1 with one ERROR line naming
the dir and the holder's pid, touch no file of the dir, and leave every acknowledged record of
the first broker readable. A SIGKILLed broker's lock is gone (the kernel drops it).
"""

from __future__ import annotations

import hashlib
import os
import signal
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.broker_process import BrokerProcess, serve_to_the_end
from tidelog.storage.lockfile import LOCK_FILE, LogDirLock, LogDirLockedError

ROOT = Path(__file__).resolve().parents[2]

TIMEOUT_S = 30.0


def _snapshot(log_dir: Path) -> dict[str, tuple[int, int, str]]:
    """Every file of the dir: (size, mtime ns, sha1 of the content)."""
    out = {}
    for path in sorted(log_dir.rglob("*")):
        if path.is_file():
            st = path.stat()
            digest = hashlib.sha1(path.read_bytes()).hexdigest()
            out[str(path.relative_to(log_dir))] = (st.st_size, st.st_mtime_ns, digest)
    return out


def _produce(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """``count`` records with acks=all, each one acknowledged (delivery report without error)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acked: list[bytes] = []
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(msg.value())

    values = [b"record-%04d" % i for i in range(count)]
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=report)
    assert producer.flush(TIMEOUT_S) == 0
    assert not errors and sorted(acked) == values
    return values


def _consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        for _ in range(200):
            for msg in consumer.consume(num_messages=count, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append(msg.value())
            if len(got) >= count:
                break
    finally:
        consumer.close()
    return got


def test_second_broker_on_a_live_log_dir_refuses_and_the_first_keeps_every_record(
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "data"
    # No periodic checkpoint during the test: any change to the dir is the second broker's.
    quiet = {
        "replica.high.watermark.checkpoint.interval.ms": "3600000",
        "log.flush.offset.checkpoint.interval.ms": "3600000",
    }
    first = BrokerProcess(log_dir, quiet).start()
    try:
        acked = _produce(first.bootstrap, "orders", 100)
        assert first.proc is not None
        before = _snapshot(log_dir)

        second = serve_to_the_end(log_dir)

        assert second.returncode == 1, second.stderr
        errors = [line for line in second.stderr.splitlines() if " ERROR " in line]
        assert len(errors) == 1, second.stderr
        assert f"Failed to acquire lock on file .lock in {log_dir}" in errors[0]
        assert f"pid {first.proc.pid}" in errors[0]
        assert (
            "A Kafka instance in another process or thread is using this directory" in (errors[0])
        )
        assert "Traceback" not in second.stderr
        assert _snapshot(log_dir) == before, "the refused broker changed a file of the dir"

        # The first broker goes on: every acknowledged record is there, and more can be added.
        more = _produce(first.bootstrap, "orders", 10)
        assert _consume_all(first.bootstrap, "orders", 110) == acked + more
    finally:
        assert first.stop() == 0, first.log_text()
    # ... and after its clean stop the dir is free again.
    restarted = first.start()
    try:
        assert _consume_all(restarted.bootstrap, "orders", 110) == acked + more
    finally:
        assert restarted.stop() == 0


def test_the_lock_of_a_killed_broker_is_gone(tmp_path: Path) -> None:
    log_dir = tmp_path / "data"
    first = BrokerProcess(log_dir).start()
    acked = _produce(first.bootstrap, "t", 20)
    first.stop(signal.SIGKILL)
    again = BrokerProcess(log_dir).start()
    try:
        assert _consume_all(again.bootstrap, "t", 20) == acked
        assert (log_dir / LOCK_FILE).read_text().strip() == str(again.proc.pid if again.proc else 0)
    finally:
        assert again.stop() == 0


def test_lock_refuses_a_second_holder_in_the_same_process(tmp_path: Path) -> None:
    held = LogDirLock.acquire(tmp_path)
    try:
        try:
            LogDirLock.acquire(tmp_path)
        except LogDirLockedError as exc:
            assert exc.pid == os.getpid()
            assert str(tmp_path) in str(exc)
        else:
            raise AssertionError("a second lock on the same dir was granted")
    finally:
        held.release()
    LogDirLock.acquire(tmp_path).release()  # free again once released
