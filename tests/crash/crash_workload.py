"""The load of a crash round: idempotent producers and a consumer group, and what they saw.

``Ledger`` is the ground truth a round is checked against: every record a producer had
acknowledged (acks=all), at the offset the broker gave, as a digest of its key, value and
headers; every record the group consumer was handed; every offset commit the coordinator
acknowledged. Producers and the consumer run in threads and can be paused (``pause`` waits
until every send is resolved), so that a check sees a quiet broker.

Records are unique: key ``<producer>:<sequence>``, a value of random size derived from the key,
and two headers naming the producer and the sequence. A key read twice is a duplicate.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

__all__ = ("ChaosConsumer", "ChaosProducer", "Ledger", "digest", "record_for")

Position = tuple[str, int, int]  # topic, partition, offset
COMPRESSIONS = (None, "gzip", "lz4", "zstd", "snappy")


def digest(key: bytes | None, value: bytes | None, headers: Any) -> bytes:
    """16 bytes naming a record's key, value and headers (order kept)."""
    h = hashlib.blake2b(digest_size=16)
    for part in (key, value):
        h.update(b"-" if part is None else len(part).to_bytes(4, "big") + part)
    for name, data in headers or ():
        name_b = name.encode() if isinstance(name, str) else bytes(name)
        h.update(b"h" + len(name_b).to_bytes(2, "big") + name_b)
        h.update(b"-" if data is None else len(data).to_bytes(4, "big") + bytes(data))
    return h.digest()


def record_for(producer: int, sequence: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """The record ``<producer>:<sequence>`` (deterministic: a re-send is byte-identical)."""
    key = f"{producer}:{sequence}".encode()
    rng = random.Random(producer * 1_000_003 + sequence)
    value = key + b"|" + rng.randbytes(rng.choice((8, 60, 200, 900)))
    headers = [("producer", str(producer).encode()), ("seq", str(sequence).encode())]
    return key, value, headers


@dataclass
class Ledger:
    """What the clients were told (thread-safe)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[Position, bytes] = field(default_factory=dict)
    acked_keys: dict[bytes, Position] = field(default_factory=dict)
    #: Two different records acknowledged at one position, or one record at two positions.
    conflicts: list[str] = field(default_factory=list)
    sent: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    consumed: dict[Position, bytes] = field(default_factory=dict)
    #: Offset commits: the highest acknowledged and the highest attempted, per partition.
    commits_acked: dict[tuple[str, int], int] = field(default_factory=dict)
    commits_attempted: dict[tuple[str, int], int] = field(default_factory=dict)
    commit_errors: dict[str, int] = field(default_factory=dict)

    def ack(self, key: bytes, record_digest: bytes, position: Position) -> None:
        with self.lock:
            old = self.acked.get(position)
            if old is not None and old != record_digest:
                self.conflicts.append(f"two records acknowledged at {position}")
            seen = self.acked_keys.get(key)
            if seen is not None and seen != position:
                self.conflicts.append(f"{key!r} acknowledged at {seen} and at {position}")
            self.acked[position] = record_digest
            self.acked_keys[key] = position

    def fail(self, exc: BaseException) -> None:
        with self.lock:
            name = type(exc).__name__
            self.failed[name] = self.failed.get(name, 0) + 1


class _Pausable(threading.Thread):
    """A worker loop that ``pause()`` parks at a quiet point and ``resume()`` restarts."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._stop_event = threading.Event()
        self._pause_wanted = threading.Event()
        self._idle = threading.Event()
        self._resumed = threading.Event()
        self.error: BaseException | None = None
        self.error_trace = ""

    def request_pause(self) -> None:
        """Ask the loop to park at its next quiet point (returns at once)."""
        self._resumed.clear()
        self._pause_wanted.set()

    def wait_idle(self, timeout: float) -> bool:
        return self._idle.wait(timeout)

    def pause(self, timeout: float) -> bool:
        self.request_pause()
        return self.wait_idle(timeout)

    def resume(self) -> None:
        self._idle.clear()
        self._pause_wanted.clear()
        self._resumed.set()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop_event.set()
        self._resumed.set()
        self.join(timeout)

    def _park_if_asked(self, quiesce: Callable[[], None]) -> bool:
        """Park if a pause was asked for (after ``quiesce()``); True if it parked."""
        if not self._pause_wanted.is_set():
            return False
        quiesce()
        self._idle.set()
        while not self._resumed.wait(0.1):
            if self._stop_event.is_set():
                break
        return True

    def run(self) -> None:
        try:
            self.loop()
        except BaseException as exc:  # reported by the harness
            self.error = exc
            self.error_trace = traceback.format_exc()
            self._idle.set()

    def loop(self) -> None:
        raise NotImplementedError


class ChaosProducer(_Pausable):
    """An idempotent kafka-python producer (acks=all) sending unique records to ``topics``."""

    def __init__(
        self,
        index: int,
        bootstrap: str,
        topics: dict[str, int],
        ledger: Ledger,
        *,
        rate: float,
        seed: int,
    ) -> None:
        super().__init__(f"chaos-producer-{index}")
        self.index = index
        self.topics = topics
        self.ledger = ledger
        self.rate = rate
        self.rng = random.Random(seed)
        self.sequence = 0
        self.window = threading.BoundedSemaphore(2000)  # unresolved sends at most
        self._unresolved = 0
        self._resolved = threading.Condition()
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=f"chaos-producer-{index}",
            acks="all",
            enable_idempotence=True,
            compression_type=COMPRESSIONS[index % len(COMPRESSIONS)],
            linger_ms=self.rng.choice((0, 2, 10)),
            batch_size=self.rng.choice((1024, 4096)),
            max_in_flight_requests_per_connection=5,
            request_timeout_ms=15_000,
            delivery_timeout_ms=120_000,
            retry_backoff_ms=50,
            reconnect_backoff_ms=20,
            reconnect_backoff_max_ms=300,
            max_block_ms=60_000,
        )

    def _send_one(self) -> None:
        topic = self.rng.choice(list(self.topics))
        partition = self.rng.randrange(self.topics[topic])
        key, value, headers = record_for(self.index, self.sequence)
        self.sequence += 1
        record_digest = digest(key, value, headers)
        self.window.acquire()
        ledger = self.ledger

        with self._resolved:
            self._unresolved += 1

        def resolved() -> None:
            self.window.release()
            with self._resolved:
                self._unresolved -= 1
                self._resolved.notify_all()

        def done(metadata: Any) -> None:
            ledger.ack(key, record_digest, (metadata.topic, metadata.partition, metadata.offset))
            resolved()

        def failed(exc: BaseException) -> None:
            ledger.fail(exc)
            resolved()

        try:
            future = self.producer.send(
                topic, key=key, value=value, headers=headers, partition=partition
            )
        except Exception as exc:
            failed(exc)
            return
        with ledger.lock:
            ledger.sent += 1
        future.add_callback(done)
        future.add_errback(failed)

    def settle(self, timeout: float = 150.0) -> None:
        """Send what is buffered and wait until every send has been answered or failed."""
        deadline = time.monotonic() + timeout
        try:
            self.producer.flush(timeout=timeout)
        except Exception:  # kafka-python's flush can trip over split batches; we count below
            pass
        with self._resolved:
            while self._unresolved and time.monotonic() < deadline:
                self._resolved.wait(0.1)
            if self._unresolved:
                raise TimeoutError(f"{self._unresolved} sends unresolved after {timeout} s")

    def loop(self) -> None:
        started = time.monotonic()
        sent = 0
        while not self._stop_event.is_set():
            if self._park_if_asked(self.settle):
                started, sent = time.monotonic(), 0
            ahead = sent / self.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(min(ahead, 0.05))
                continue
            for _ in range(10):
                self._send_one()
                sent += 1
        self.settle()
        self.producer.close(timeout=10)


class ChaosConsumer(_Pausable):
    """A group member that commits (synchronously) after every poll."""

    def __init__(self, bootstrap: str, topic: str, group: str, ledger: Ledger) -> None:
        super().__init__("chaos-consumer")
        self.ledger = ledger
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id="chaos-consumer",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=1_000,
            request_timeout_ms=15_000,
            reconnect_backoff_ms=20,
            reconnect_backoff_max_ms=300,
            retry_backoff_ms=50,
        )

    def loop(self) -> None:
        ledger = self.ledger
        while not self._stop_event.is_set():
            self._park_if_asked(lambda: None)
            try:
                polled = self.consumer.poll(timeout_ms=200, max_records=500)
            except Exception as exc:
                with ledger.lock:
                    name = f"poll:{type(exc).__name__}"
                    ledger.commit_errors[name] = ledger.commit_errors.get(name, 0) + 1
                time.sleep(0.1)
                continue
            offsets = {}
            with ledger.lock:
                for tp, messages in polled.items():
                    for m in messages:
                        ledger.consumed[(tp.topic, tp.partition, m.offset)] = digest(
                            m.key, m.value, m.headers
                        )
                    offsets[tp] = messages[-1].offset + 1
            if not offsets:
                continue
            self._commit(offsets)
        self.consumer.close(autocommit=False)

    def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        ledger = self.ledger
        with ledger.lock:
            for tp, offset in offsets.items():
                key = (tp.topic, tp.partition)
                ledger.commits_attempted[key] = max(ledger.commits_attempted.get(key, 0), offset)
        try:
            self.consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
        except Exception as exc:
            with ledger.lock:
                name = type(exc).__name__
                ledger.commit_errors[name] = ledger.commit_errors.get(name, 0) + 1
            return
        with ledger.lock:
            for tp, offset in offsets.items():
                key = (tp.topic, tp.partition)
                ledger.commits_acked[key] = max(ledger.commits_acked.get(key, 0), offset)
