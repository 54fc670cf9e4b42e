"""KIP-848 consumer groups (``group.protocol=consumer``) with confluent-kafka (librdkafka 2.16).

- three members share a 6-partition topic (two partitions each); one leaves and the other two
  take its partitions over, with no record consumed twice after a commit;
- a member killed without leaving is fenced after ``group.consumer.session.timeout.ms`` and
  its partitions move to the survivor;
- a broker restart keeps the group (epochs, assignment) and its committed offsets;
- a classic group and a consumer group consume the same topic side by side, and ListGroups
  reports each group's type.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
FAST = {
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


@pytest.fixture(scope="module")
def fast_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.broker_process import BrokerProcess

    log_dir = tmp_path_factory.mktemp("kip848") / "data"
    log_dir.mkdir(parents=True)
    broker = BrokerProcess(log_dir, FAST).start()
    yield broker
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-3000:]


def _topic(broker: Any, name: str, partitions: int = 6, records: int = 0) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    if records:
        _produce(broker, name, records, partitions)


def _produce(broker: Any, name: str, records: int, partitions: int = 6, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(start, start + records):
        producer.produce(name, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def _consumer(broker: Any, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


class Members:
    """Consumers polled round-robin; each record is committed right after it is seen.

    A commit may meet STALE_MEMBER_EPOCH while a rebalance bumps the member's epoch (Kafka 4
    answers the same): it is retried, and a record counts as committed only once a commit of
    it succeeded. ``again`` collects committed records that were delivered a second time.
    """

    def __init__(self, consumers: list[Consumer]) -> None:
        self.consumers = consumers
        self.seen: list[tuple[int, int]] = []
        self.committed: set[tuple[int, int]] = set()
        self.again: list[tuple[int, int]] = []

    def _commit(self, c: Consumer, msg: Any) -> None:
        for _ in range(50):
            try:
                c.commit(message=msg, asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].code() not in (
                    KafkaError.STALE_MEMBER_EPOCH,
                    KafkaError.UNKNOWN_MEMBER_ID,
                    KafkaError.REBALANCE_IN_PROGRESS,
                ):
                    raise
                time.sleep(0.1)
                continue
            self.committed.add((msg.partition(), msg.offset()))
            return

    def poll_until(self, done: Any, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for c in self.consumers:
                msg = c.poll(0.05)
                if msg is not None and not msg.error():
                    key = (msg.partition(), msg.offset())
                    if key in self.committed:
                        self.again.append(key)
                    self.seen.append(key)
                    self._commit(c, msg)
            if done():
                return
        raise AssertionError(
            f"timed out: seen {len(set(self.seen))}, assignments {self.assignments()}"
        )

    def assignments(self) -> list[list[int]]:
        return [sorted(tp.partition for tp in c.assignment()) for c in self.consumers]


def _describe(broker: Any, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return admin.describe_consumer_groups([group])[group].result(30)


def test_three_members_share_then_one_leaves(fast_broker: Any) -> None:
    _topic(fast_broker, "share6", records=60)
    members = Members([_consumer(fast_broker, "trio") for _ in range(3)])
    for c in members.consumers:
        c.subscribe(["share6"])
    members.poll_until(
        lambda: (
            len(set(members.seen)) == 60 and [len(a) for a in members.assignments()] == [2, 2, 2]
        )
    )
    assert sorted(p for a in members.assignments() for p in a) == list(range(6))
    described = _describe(fast_broker, "trio")
    assert described.type.name == "CONSUMER" and described.state.name == "STABLE"
    assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [2, 2, 2]
    leaving = members.consumers.pop()
    leaving.close()  # leaves the group (member epoch -1)
    _produce(fast_broker, "share6", 60, start=60)
    members.poll_until(
        lambda: len(set(members.seen)) == 120 and [len(a) for a in members.assignments()] == [3, 3]
    )
    assert members.again == [], "a committed record was consumed twice"
    for c in members.consumers:
        c.close()


def test_killed_member_is_fenced_after_the_session_timeout(fast_broker: Any) -> None:
    _topic(fast_broker, "fence6")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "consumer_member_proc.py"),
            fast_broker.bootstrap,
            "fence6",
            "fenced",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())

    threading.Thread(target=read, daemon=True).start()

    def last_assigned() -> str:
        return next((x for x in reversed(lines) if x.startswith("assigned")), "")

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and last_assigned() != "assigned 6":
        time.sleep(0.1)
    assert last_assigned() == "assigned 6", lines
    survivor = Members([_consumer(fast_broker, "fenced")])
    survivor.consumers[0].subscribe(["fence6"])
    try:
        survivor.poll_until(
            lambda: len(survivor.assignments()[0]) == 3 and last_assigned() == "assigned 3"
        )
        _produce(fast_broker, "fence6", 30)
        killed_records = lambda: {  # noqa: E731
            tuple(json.loads(x)) for x in list(lines) if x.startswith("[")
        }
        survivor.poll_until(lambda: len(set(survivor.seen)) == 15 and len(killed_records()) == 15)
    finally:
        proc.kill()
        proc.wait(10)
    killed_at = time.monotonic()
    survivor.poll_until(lambda: survivor.assignments() == [[0, 1, 2, 3, 4, 5]], 60)
    waited = time.monotonic() - killed_at
    assert waited >= 4.0, f"fenced after {waited:.1f}s, before the 6 s session timeout"
    _produce(fast_broker, "fence6", 12, start=30)
    survivor.poll_until(lambda: len(set(survivor.seen)) == 27, 30)
    assert not set(survivor.seen) & killed_records(), "a committed record was consumed twice"
    assert survivor.again == []
    survivor.consumers[0].close()


def test_restart_keeps_the_group_and_its_offsets(broker_factory: Any) -> None:
    broker = broker_factory(FAST)
    _topic(broker, "durable6", records=30)
    members = Members([_consumer(broker, "keeper") for _ in range(2)])
    for c in members.consumers:
        c.subscribe(["durable6"])
    members.poll_until(
        lambda: len(members.seen) == 30 and [len(a) for a in members.assignments()] == [3, 3]
    )
    before = _describe(broker, "keeper")
    for c in members.consumers:
        c.close()
    broker.restart()
    after = _describe(broker, "keeper")
    assert after.type.name == "CONSUMER"
    assert after.state.name == "EMPTY"  # both members left; the group and its epoch stay
    committed = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "keeper"}).committed(
        [TopicPartition("durable6", p) for p in range(6)], timeout=30
    )
    assert [tp.offset for tp in committed] == [5] * 6
    assert before.members and not after.members
    # A new member resumes from the committed offsets: nothing is read twice.
    _produce(broker, "durable6", 6, start=30)
    again = Members([_consumer(broker, "keeper")])
    again.consumers[0].subscribe(["durable6"])
    again.poll_until(lambda: len(set(again.seen)) == 6)
    assert sorted(o for _p, o in again.seen) == [5] * 6
    again.consumers[0].close()


def _classic_consumer(broker: Any, topic: str, group: str) -> KafkaConsumer:
    """A classic-protocol group member (kafka-python), committing by hand."""
    return KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )


def test_classic_and_consumer_groups_on_one_topic(fast_broker: Any) -> None:
    _topic(fast_broker, "both6", records=24)
    modern = Members([_consumer(fast_broker, "modern")])
    modern.consumers[0].subscribe(["both6"])
    classic = _classic_consumer(fast_broker, "both6", "classic")
    classic_seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (len(classic_seen) < 24 or len(set(modern.seen)) < 24):
        for records in classic.poll(timeout_ms=100).values():
            classic_seen.extend((r.partition, r.offset) for r in records)
        modern.poll_until(lambda: True, 1)
    assert len(classic_seen) == len(set(modern.seen)) == 24
    classic.commit()
    admin = AdminClient({"bootstrap.servers": fast_broker.bootstrap})
    try:
        listed = admin.list_consumer_groups().result(30).valid
        types = {g.group_id: g.type.name for g in listed}
        assert types["modern"] == "CONSUMER" and types["classic"] == "CLASSIC", types
        only = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30).valid
        assert "modern" in {g.group_id for g in only}
        assert "classic" not in {g.group_id for g in only}
    finally:
        classic.close()
        modern.consumers[0].close()


def test_tidelog_groups_describes_a_consumer_group(
    fast_broker: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tidelog.cli import main

    _topic(fast_broker, "tool6", records=6)
    member = Members([_consumer(fast_broker, "tooled", **{"client.id": "tool-client"})])
    member.consumers[0].subscribe(["tool6"])
    member.poll_until(lambda: len(set(member.seen)) == 6 and len(member.assignments()[0]) == 6)
    try:
        base = ["groups", "--bootstrap-server", fast_broker.bootstrap, "--group", "tooled"]
        capsys.readouterr()
        assert main([*base, "--describe", "--state"]) == 0
        lines = [x for x in capsys.readouterr().out.splitlines() if x.strip()]
        assert lines[0].split() == [
            "GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
            "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS",
        ]  # fmt: skip
        state = lines[1].split()
        assert state[0] == "tooled" and state[-5:-2] == ["uniform", "Stable", "1"]
        assert state[-1] == "1"
        assert main([*base, "--describe", "--members"]) == 0
        lines = [x for x in capsys.readouterr().out.splitlines() if x.strip()]
        assert lines[0].split()[-4:] == [
            "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT",
        ]  # fmt: skip
        row = lines[1].split()
        assert row[0] == "tooled" and "tool-client" in row
        assert row[-4:] == ["1", "tool6:0,1,2,3,4,5", "1", "tool6:0,1,2,3,4,5"]
        assert main([*base, "--describe"]) == 0
        offsets = [x.split() for x in capsys.readouterr().out.splitlines() if "tool6" in x]
        assert sorted((r[2], r[3], r[5]) for r in offsets) == [(str(p), "1", "0") for p in range(6)]
    finally:
        member.consumers[0].close()


def test_kafka_python_and_the_groups_tool_describe_both_kinds(
    fast_broker: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 26: kafka-python's admin (classic APIs only) gets an answer for a consumer group
    at once, as from Kafka 4 (DescribeGroups: Dead, no error), and ``tidelog groups
    --describe`` shows a classic and a consumer group side by side."""
    from kafka import KafkaAdminClient

    from tidelog.cli import main

    _topic(fast_broker, "kinds6", records=6)
    modern = Members([_consumer(fast_broker, "kinds-modern")])
    modern.consumers[0].subscribe(["kinds6"])
    modern.poll_until(lambda: len(set(modern.seen)) == 6)
    classic = _classic_consumer(fast_broker, "kinds6", "kinds-classic")
    admin = KafkaAdminClient(bootstrap_servers=fast_broker.bootstrap, request_timeout_ms=10000)
    try:
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 6 and time.monotonic() < deadline:
            seen += sum(len(r) for r in classic.poll(timeout_ms=200).values())
        assert seen == 6
        classic.commit()
        started = time.monotonic()
        described = admin.describe_groups(["kinds-modern", "kinds-classic"])
        assert time.monotonic() - started < 5
        assert described["kinds-modern"]["error"] is None
        assert described["kinds-modern"]["group_state"] == "Dead"
        assert described["kinds-classic"]["error"] is None
        assert described["kinds-classic"]["group_state"] == "Stable"
        assert described["kinds-classic"]["protocol_type"] == "consumer"

        capsys.readouterr()
        base = ["groups", "--bootstrap-server", fast_broker.bootstrap, "--describe"]
        groups = ["--group", "kinds-modern", "--group", "kinds-classic"]
        assert main([*base, *groups, "--state"]) == 0
        rows = {
            line.split()[0]: line.split()
            for line in capsys.readouterr().out.splitlines()
            if line.startswith("kinds-")
        }
        assert rows["kinds-modern"][-5:] == ["uniform", "Stable", "1", "1", "1"]
        assert rows["kinds-classic"][-3:] == ["range", "Stable", "1"]
        listed = ["groups", "--bootstrap-server", fast_broker.bootstrap, "--list", "--state"]
        assert main(listed) == 0
        states = dict(
            line.split()
            for line in capsys.readouterr().out.splitlines()
            if line.startswith("kinds-")
        )
        assert states == {"kinds-modern": "Stable", "kinds-classic": "Stable"}
        assert main([*base, *groups]) == 0
        offsets = [x.split() for x in capsys.readouterr().out.splitlines() if "kinds6" in x]
        assert sorted((r[0], r[2], r[3]) for r in offsets) == sorted(
            (g, str(p), "1") for g in ("kinds-modern", "kinds-classic") for p in range(6)
        )
    finally:
        admin.close()
        classic.close()
        modern.consumers[0].close()
