"""Consumer groups with real clients: kafka-python, confluent-kafka and aiokafka together.

Each test starts its own broker (``broker_factory`` from tests/conftest.py) with a short
initial rebalance delay and a low minimum session timeout, so joins and failure detection take
seconds. Every consumer commits synchronously right after handling a batch and before its next
poll: rebalances happen inside poll, and the broker accepts commits while a rebalance is being
prepared, so no record is handled twice even when partitions move.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import TopicPartition as CKTopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.coordinator.assignors.range import RangePartitionAssignor

from tests.support.fault_wire import create_topic_at

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
SESSION_MS = 3000
OVERRIDES = {
    "group.initial.rebalance.delay.ms": "100",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "5",
}

Seen = list[tuple[int, int, str]]


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def produce(bootstrap: str, topic: str, prefix: str, count: int, partitions: int) -> set[str]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    values = [f"{prefix}-{i}" for i in range(count)]
    for i, v in enumerate(values):
        producer.send(topic, value=v.encode(), partition=i % partitions)
    producer.flush()
    producer.close()
    return set(values)


def describe(bootstrap: str, group: str) -> dict[str, Any]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return dict(admin.describe_groups([group])[group])
    finally:
        admin.close()


def assigned(description: dict[str, Any], topic: str) -> list[list[int]]:
    """Each member's partitions of ``topic``, from DescribeGroups."""
    out = []
    for m in description["members"]:
        parts: list[int] = []
        for a in m["member_assignment"]["assigned_partitions"]:
            if a["topic"] == topic:
                parts.extend(a["partitions"])
        out.append(sorted(parts))
    return out


class ThreadMember:
    """A consumer polling in a thread until ``stop()``; records what it handled."""

    def __init__(self, name: str, loop: Callable[[ThreadMember], None]) -> None:
        self.name = name
        self.seen: Seen = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(loop,), daemon=True)
        self._thread.start()

    def _run(self, loop: Callable[[ThreadMember], None]) -> None:
        try:
            loop(self)
        except BaseException as e:  # surfaced by stop()
            self.error = e

    def record(self, items: Seen) -> None:
        with self.lock:
            self.seen.extend(items)

    def count(self) -> int:
        with self.lock:
            return len(self.seen)

    def stop(self) -> None:
        self.stopping.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


def kafka_python_member(bootstrap: str, topic: str, group: str) -> ThreadMember:
    def loop(me: ThreadMember) -> None:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id="kafka-python-member",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            partition_assignment_strategy=[RangePartitionAssignor],
        )
        try:
            while not me.stopping.is_set():
                batch = consumer.poll(timeout_ms=200)
                items = [(tp.partition, r.offset, r.value.decode()) for tp, rs in batch.items()
                         for r in rs]  # fmt: skip
                if items:
                    consumer.commit()
                    me.record(items)
        finally:
            consumer.close()  # graceful: LeaveGroup

    return ThreadMember("kafka-python", loop)


def confluent_member(
    bootstrap: str, topic: str, group: str, extra: dict[str, Any] | None = None
) -> ThreadMember:
    def loop(me: ThreadMember) -> None:
        consumer = CKConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": "confluent-member",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": "range",
                **(extra or {}),
            }
        )
        consumer.subscribe([topic])
        try:
            while not me.stopping.is_set():
                msgs = consumer.consume(num_messages=500, timeout=0.2)
                items = []
                for m in msgs:
                    if m.error():
                        raise RuntimeError(str(m.error()))
                    items.append((m.partition(), m.offset(), m.value().decode()))
                if items:
                    consumer.commit(asynchronous=False)
                    me.record(items)
        finally:
            consumer.close()

    return ThreadMember("confluent-kafka", loop)


class ProcessMember:
    """The aiokafka member, in a subprocess that can be SIGKILLed."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "groups_member_proc.py"), bootstrap, topic, group,
             str(SESSION_MS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )  # fmt: skip
        self.seen: Seen = []
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip() == "ready":
                self.ready.set()
                continue
            p, o, v = json.loads(line)
            with self.lock:
                self.seen.append((p, o, v))

    def count(self) -> int:
        with self.lock:
            return len(self.seen)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)


def test_three_clients_share_a_topic_through_leave_and_crash(broker_factory: Any) -> None:
    b = broker_factory(OVERRIDES)
    topic, group = "shared", "mixed"
    create_topic_at(b.bootstrap, topic, 6)
    expected = produce(b.bootstrap, topic, "a", 600, 6)

    kp = kafka_python_member(b.bootstrap, topic, group)
    ck = confluent_member(b.bootstrap, topic, group)
    aio = ProcessMember(b.bootstrap, topic, group)
    members = (kp, ck, aio)
    try:

        def total() -> int:
            return sum(m.count() for m in members)

        def three_stable() -> bool:
            d = describe(b.bootstrap, group)
            return d["group_state"] == "Stable" and len(d["members"]) == 3

        wait_for(lambda: total() >= 600, 60, "the first 600 records")
        wait_for(three_stable, 30, "a stable group of three")
        d = describe(b.bootstrap, group)
        parts = assigned(d, topic)
        assert sorted(p for ps in parts for p in ps) == list(range(6)), parts
        assert all(len(ps) == 2 for ps in parts), f"range gives each member 2: {parts}"
        clients = sorted(m["client_id"] for m in d["members"])
        assert clients == ["aiokafka-member", "confluent-member", "kafka-python-member"]

        # A graceful leave: kafka-python closes (LeaveGroup); its partitions move at once.
        kp.stop()
        expected |= produce(b.bootstrap, topic, "b", 600, 6)
        wait_for(lambda: total() >= 1200, 60, "records after the graceful leave")
        d = describe(b.bootstrap, group)
        assert len(d["members"]) == 2
        parts = assigned(d, topic)
        assert sorted(p for ps in parts for p in ps) == list(range(6)), parts

        # A crash: the aiokafka process dies without leaving; its partitions move once its
        # session times out.
        wait_for(lambda: total() >= 1200, 5, "the survivors to settle")
        aio.kill()
        killed_at = time.monotonic()
        expected |= produce(b.bootstrap, topic, "c", 600, 6)
        wait_for(lambda: total() >= 1800, 60, "records after the crash")
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.8
        d = describe(b.bootstrap, group)
        assert [m["client_id"] for m in d["members"]] == ["confluent-member"]
        assert assigned(d, topic) == [list(range(6))]
    finally:
        for m in (kp, ck):
            if m._thread.is_alive():
                m.stop()
        if aio.proc.poll() is None:
            aio.kill()

    seen = Counter(v for m in members for _, _, v in m.seen)
    duplicates = {v: n for v, n in seen.items() if n > 1}
    assert not duplicates, f"handled more than once: {sorted(duplicates)[:10]}"
    assert set(seen) == expected
    assert all(m.seen for m in members), "every client consumed something"


def test_committed_offsets_survive_a_broker_restart(broker_factory: Any) -> None:
    b = broker_factory(OVERRIDES)
    topic, group = "resume", "resumers"
    create_topic_at(b.bootstrap, topic, 3)
    produce(b.bootstrap, topic, "old", 90, 3)

    first = KafkaConsumer(
        topic,
        bootstrap_servers=b.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
    )
    got = 0
    deadline = time.monotonic() + 30
    while got < 90 and time.monotonic() < deadline:
        got += sum(len(rs) for rs in first.poll(timeout_ms=200).values())
    assert got == 90
    first.commit()
    first.close()

    b.restart()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    offsets = admin.list_group_offsets(group)[group]
    admin.close()
    assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 30, 1: 30, 2: 30}

    new = produce(b.bootstrap, topic, "new", 30, 3)
    consumer = CKConsumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
        }
    )
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 30 and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=100, timeout=0.2):
            assert not m.error(), m.error()
            values.append(m.value().decode())
    time.sleep(0.5)
    values += [m.value().decode() for m in consumer.consume(num_messages=100, timeout=0.5)]
    consumer.commit(asynchronous=False)
    committed = consumer.committed([CKTopicPartition(topic, p) for p in range(3)], timeout=10)
    consumer.close()
    assert sorted(values) == sorted(new), "resumed exactly at the committed offsets"
    assert [tp.offset for tp in committed] == [40, 40, 40]


def test_static_member_restarts_without_a_rebalance(broker_factory: Any) -> None:
    b = broker_factory(OVERRIDES)
    topic, group = "static", "statics"
    create_topic_at(b.bootstrap, topic, 4)
    events: list[str] = []
    live: list[Any] = []  # consumers to poll (and to close at the end)

    def start(instance: str, **callbacks: Any) -> Any:
        consumer = CKConsumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": group,
                "group.instance.id": instance,
                "client.id": instance,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": "range",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic], **callbacks)
        live.append(consumer)
        return consumer

    def stable_with_partitions() -> bool:
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            for c in live:
                c.poll(0.05)
        d = describe(b.bootstrap, group)
        return (
            d["group_state"] == "Stable"
            and len(d["members"]) == 2
            and all(c.assignment() for c in live)
        )

    try:
        start(
            "steady",
            on_assign=lambda c, ps: events.append(f"assign {sorted(p.partition for p in ps)}"),
            on_revoke=lambda c, ps: events.append("revoke"),
        )
        mover = start("mover")
        wait_for(stable_with_partitions, 30, "both static members to get their partitions")
        before = {m["group_instance_id"]: m for m in describe(b.bootstrap, group)["members"]}
        assert set(before) == {"steady", "mover"}
        mover_partitions = assigned({"members": [before["mover"]]}, topic)[0]
        events_before = list(events)

        # The mover restarts: a static member's close() sends no LeaveGroup (KIP-345)...
        live.remove(mover)
        mover.close()
        time.sleep(1.0)
        mover = start("mover")
        wait_for(stable_with_partitions, 30, "the mover to come back")
        time.sleep(1.0)
        stable_with_partitions()

        after = {m["group_instance_id"]: m for m in describe(b.bootstrap, group)["members"]}
        # ...so it comes back under a new member id, with its old partitions...
        assert after["mover"]["member_id"] != before["mover"]["member_id"]
        assert assigned({"members": [after["mover"]]}, topic)[0] == mover_partitions
        assert sorted(p.partition for p in mover.assignment()) == mover_partitions
        # ...and the other member never saw a rebalance.
        assert events == events_before, events
        assert after["steady"]["member_id"] == before["steady"]["member_id"]
    finally:
        for c in live:
            c.close()
