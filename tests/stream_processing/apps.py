"""What the stream-processing tests share: an application script run as a separate process
(as its users run it), the input they feed it and the output they read back.

Every wait here is for the condition a step needs (a committed offset, a value in the output),
never for a time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

__all__ = ("AppProcess", "produce", "read_all", "wait_for")

HERE = Path(__file__).resolve().parent


def wait_for(what: str, check: Callable[[], Any], timeout_s: float, app: AppProcess) -> Any:
    """``check()``'s first truthy value; fails naming ``what`` (with the app's log) at the
    deadline or when the app exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if not app.running:
            raise AssertionError(f"{what}: the app exited {app.returncode}\n{app.log_tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s\n{app.log_tail()}")
        time.sleep(0.2)


class AppProcess:
    """One run of an application script: ``python <script> <args>``, its output in a log."""

    def __init__(
        self, python: str, script: Path, args: Sequence[str], env: Mapping[str, str], cwd: Path
    ) -> None:
        self.python, self.script, self.args = python, script, list(args)
        self.env = {**os.environ, **env}
        self.cwd = cwd
        self.runs = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = cwd / "app.log"

    def start(self) -> AppProcess:
        self.runs += 1
        with open(self.log_path, "ab") as log:
            log.write(f"===== run {self.runs}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [self.python, str(self.script), *self.args],
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout_s: float = 60.0) -> int:
        """Send ``sig`` and wait for the exit (SIGKILL after ``timeout_s``); the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(f"the app ignored {sig.name}\n{self.log_tail()}") from None
        return self.proc.returncode

    def run_log(self) -> str:
        """The log of the current run."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text.rpartition(f"===== run {self.runs}\n")[2]

    def log_tail(self, chars: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""


def produce(bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes, int | None]]) -> None:
    """(key, value, timestamp ms or None) records to partition 0 of ``topic``, acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value, ts in records:
        if ts is None:
            producer.produce(topic, value, key, partition=0)
        else:
            producer.produce(topic, value, key, partition=0, timestamp=ts)
    assert producer.flush(30) == 0


def read_all(bootstrap: str, topic: str, partitions: int = 1) -> list[tuple[bytes, bytes]]:
    """Every committed (key, value) of ``topic`` (read_committed), from the beginning to the
    end as it is now."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        try:
            ends = [
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)
            ]
        except KafkaException:
            return []  # the app has not created it yet
        todo = {p for p in range(partitions) if ends[p] > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in todo])
        out = []
        deadline = time.monotonic() + 30
        while todo and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF: the last stable offset
                    todo.discard(msg.partition())
                continue
            out.append((msg.key(), msg.value()))
        return out
    finally:
        consumer.close()
