"""Many partitions under a descriptor bound, and CreateTopics when descriptors run out (issue 20).

A real ``tidelog serve`` subprocess and confluent-kafka (admin, producer, consumer). The
descriptor count is read from ``/proc/<broker pid>/fd``.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

#: Descriptors a broker holds besides segment files: stdio, the ``.lock``, the event loop's
#: epoll and self-pipe, the listener, client connections, transient files (checkpoints,
#: snapshots), the random device ...
MARGIN = 40


def _fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _pid(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    return broker.proc.pid


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(admin: AdminClient, topics: Mapping[str, int]) -> dict[str, BaseException | None]:
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=n, replication_factor=1) for name, n in topics.items()],
        operation_timeout=60,
        request_timeout=120,
    )
    outcome: dict[str, BaseException | None] = {}
    for name, future in futures.items():
        try:
            future.result(timeout=120)
            outcome[name] = None
        except KafkaException as exc:
            outcome[name] = exc
    return outcome


def _error_code(exc: BaseException | None) -> int | None:
    if exc is None:
        return None
    err = exc.args[0]
    assert isinstance(err, KafkaError)
    return int(err.code())


def _produce_one_each(broker: BrokerProcess, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    failures: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"{msg.partition()}: {err}")

    for p in range(partitions):
        producer.produce(topic, value=f"{topic}/{p}".encode(), partition=p, on_delivery=report)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert failures == []


def _consume_one_each(broker: BrokerProcess, topic: str, partitions: int) -> dict[int, bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"check-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 120
    try:
        while len(got) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error() is None:
                    got[msg.partition()] = bytes(msg.value() or b"")
    finally:
        consumer.close()
    return got


def test_thousands_of_partitions_under_a_small_descriptor_bound(
    broker_factory: Any,
) -> None:
    """2,000 partitions with ``log.open.files.max=64``: every one takes a produce and serves
    it back, and the broker never holds more than the bound plus a small margin."""
    bound = 64
    broker = broker_factory({"log.open.files.max": str(bound)})
    pid = _pid(broker)
    admin = _admin(broker)
    assert _create(admin, {"wide-a": 1000, "wide-b": 1000}) == {"wide-a": None, "wide-b": None}
    assert _fd_count(pid) <= bound + MARGIN
    for topic in ("wide-a", "wide-b"):
        _produce_one_each(broker, topic, 1000)
        assert _fd_count(pid) <= bound + MARGIN
    for topic in ("wide-a", "wide-b"):
        got = _consume_one_each(broker, topic, 1000)
        assert got == {p: f"{topic}/{p}".encode() for p in range(1000)}
        assert _fd_count(pid) <= bound + MARGIN
    # every partition dir holds Kafka's files
    for topic in ("wide-a", "wide-b"):
        for p in (0, 999):
            names = set(os.listdir(broker.log_dir / f"{topic}-{p}"))
            assert {
                "00000000000000000000.log",
                "00000000000000000000.index",
                "00000000000000000000.timeindex",
                "partition.metadata",
            } <= names
    # a clean restart loads them all under the same bound
    broker.restart()
    pid = _pid(broker)
    assert _fd_count(pid) <= bound + MARGIN
    got = _consume_one_each(broker, "wide-b", 1000)
    assert len(got) == 1000
    assert _fd_count(pid) <= bound + MARGIN


class LimitedBroker(BrokerProcess):
    """A broker whose RLIMIT_NOFILE (soft and hard) is ``limit`` from its first instruction."""

    def __init__(self, log_dir: Path, overrides: Mapping[str, str], limit: int) -> None:
        super().__init__(log_dir, overrides)
        self.limit = limit

    def command(self) -> list[str]:
        args = super().command()
        launcher = (
            "import resource, runpy, sys; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({self.limit}, {self.limit})); "
            "sys.argv = ['tidelog'] + sys.argv[1:]; "
            "runpy.run_module('tidelog', run_name='__main__')"
        )
        return [sys.executable, "-c", launcher, *args[3:]]


@pytest.fixture
def limited_broker(tmp_path: Path) -> Iterator[LimitedBroker]:
    log_dir = tmp_path / "data"
    log_dir.mkdir()
    broker = LimitedBroker(log_dir, {"log.open.files.max": "100000"}, limit=256)
    broker.start()
    yield broker
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-3000:]


def _flood(broker: BrokerProcess, pid: int, limit: int) -> list[socket.socket]:
    """Connections until the broker's descriptors are (nearly) all used."""
    sockets: list[socket.socket] = []
    deadline = time.monotonic() + 30
    while _fd_count(pid) < limit - 1 and time.monotonic() < deadline:
        for _ in range(20):
            sockets.append(socket.create_connection(("127.0.0.1", broker.port), timeout=5))
        time.sleep(0.05)
    assert _fd_count(pid) >= limit - 1, "could not use up the broker's descriptors"
    return sockets


def test_out_of_descriptors_answers_per_topic_and_leaves_nothing(
    limited_broker: LimitedBroker,
) -> None:
    broker = limited_broker
    pid = _pid(broker)
    assert "open-file limit (RLIMIT_NOFILE): soft 256" in broker.log_text()
    admin = _admin(broker)
    assert _create(admin, {"kept": 3}) == {"kept": None}
    _produce_one_each(broker, "kept", 3)
    sockets = _flood(broker, pid, broker.limit)
    try:
        outcome = _create(admin, {"starved-a": 50, "starved-b": 5})
    finally:
        for s in sockets:
            s.close()
    # per-topic errors (KAFKA_STORAGE_ERROR naming the fix), not UNKNOWN for the request
    assert set(outcome) == {"starved-a", "starved-b"}
    for name, exc in outcome.items():
        assert _error_code(exc) == KafkaError.KAFKA_STORAGE_ERROR, (name, exc)
        assert "file descriptors" in str(exc) and "ulimit" in str(exc), exc
    leftovers = [n for n in os.listdir(broker.log_dir) if n.startswith("starved")]
    assert leftovers == []
    # the broker keeps serving what exists, and creates topics again once descriptors free up
    deadline = time.monotonic() + 30
    while _fd_count(pid) > broker.limit // 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    got = _consume_one_each(broker, "kept", 3)
    assert got == {p: f"kept/{p}".encode() for p in range(3)}
    assert _create(admin, {"starved-a": 50}) == {"starved-a": None}
    assert "starved-a" in admin.list_topics(timeout=30).topics


def test_one_topic_failing_does_not_stop_the_others(broker: BrokerProcess) -> None:
    """A partition dir that cannot be made (a file is in its way) fails that topic alone: its
    other partitions are removed again, the other topic of the request is created."""
    (broker.log_dir / "blocked-7").write_bytes(b"not a directory")
    outcome = _create(_admin(broker), {"blocked": 10, "fine": 4})
    assert outcome["fine"] is None
    assert _error_code(outcome["blocked"]) == KafkaError.KAFKA_STORAGE_ERROR
    assert sorted(n for n in os.listdir(broker.log_dir) if n.startswith("blocked")) == ["blocked-7"]
    topics = _admin(broker).list_topics(timeout=30).topics
    assert "fine" in topics and "blocked" not in topics
    _produce_one_each(broker, "fine", 4)
    assert len(_consume_one_each(broker, "fine", 4)) == 4


@pytest.mark.slow
def test_twenty_thousand_partitions_under_the_default_bound(broker_factory: Any) -> None:
    """Issue 20's size: 20 topics of 1,000 partitions with the defaults (the bound is half the
    soft limit): every partition takes a produce and serves it back, the broker stays under
    its soft limit, and a clean restart loads them all."""
    broker = broker_factory()
    pid = _pid(broker)
    soft = _soft_nofile(pid)
    admin = _admin(broker)
    names = [f"huge-{t}" for t in range(20)]
    for name in names:
        assert _create(admin, {name: 1000}) == {name: None}
        assert _fd_count(pid) < soft
    for name in names:
        _produce_one_each(broker, name, 1000)
    assert _fd_count(pid) < soft
    for name in names[:2] + names[-2:]:
        assert len(_consume_one_each(broker, name, 1000)) == 1000
    assert _fd_count(pid) < soft
    broker.restart()
    assert _fd_count(_pid(broker)) < soft
    assert len(_consume_one_each(broker, names[-1], 1000)) == 1000


def _soft_nofile(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    raise AssertionError("no open-file limit in /proc")
