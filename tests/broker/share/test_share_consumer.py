"""Share groups end to end with confluent-kafka's ShareConsumer (librdkafka 2.16)."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Message, ShareConsumer

from tests.broker.share.share_support import (
    create_topic,
    poll_until,
    produce,
    set_group_configs,
    share_consumer,
    start_share_broker,
)
from tests.support.broker_process import BrokerProcess
from tests.support.net import free_port

METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from start_share_broker(
        Path(tmp_path_factory.mktemp("share")),
        {"group.share.delivery.count.limit": "3", "metrics.port": str(METRICS_PORT)},
    )


def _setup(broker: BrokerProcess, name: str, n: int, partitions: int = 1) -> list[bytes]:
    create_topic(broker.bootstrap, name, partitions)
    set_group_configs(broker.bootstrap, name, {"share.auto.offset.reset": "earliest"})
    values = [f"{name}-{i}".encode() for i in range(n)]
    produce(broker.bootstrap, name, values)
    return values


def _accept_all(consumer: ShareConsumer) -> object:
    def ack(batch: list[Message]) -> None:
        for m in batch:
            consumer.acknowledge(m)
        result = consumer.commit_sync(10)
        assert all(v is None for v in result.values()), result

    return ack


def test_explicit_accept_then_nothing_comes_back(share_broker: BrokerProcess) -> None:
    values = _setup(share_broker, "sh-accept", 20)
    c = share_consumer(share_broker.bootstrap, "sh-accept", "sh-accept")
    try:
        got = poll_until(c, lambda g: len(g) >= 20, on_batch=_accept_all(c))
        assert sorted(m.value() for m in got) == sorted(values)
        assert {m.delivery_count() for m in got} == {1}
        assert [m.offset() for m in got] == list(range(20))
        time.sleep(1.0)
        assert [m for m in c.poll(1.0) if m.error() is None] == []
    finally:
        c.close()
    # a new member of the group gets nothing: every record is acknowledged
    c2 = share_consumer(share_broker.bootstrap, "sh-accept", "sh-accept")
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert [m for m in c2.poll(0.5) if m.error() is None] == []
    finally:
        c2.close()


def test_release_redelivers_with_higher_delivery_count_and_reject_archives(
    share_broker: BrokerProcess,
) -> None:
    _setup(share_broker, "sh-release", 4)
    c = share_consumer(share_broker.bootstrap, "sh-release", "sh-release")
    try:
        first = poll_until(c, lambda g: len(g) >= 4, on_batch=None)
        # explicit mode: decide for each record of the poll(s)
        kinds = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.RELEASE, 2: AcknowledgeType.REJECT}
        for m in first:
            c.acknowledge(m, kinds.get(m.offset(), AcknowledgeType.ACCEPT))
        c.commit_sync(10)
        again = poll_until(c, lambda g: len(g) >= 1)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(1, 2)]
        for m in again:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(10)
        time.sleep(1.0)
        assert [m for m in c.poll(1.0) if m.error() is None] == []  # 2 was rejected
    finally:
        c.close()


def test_delivery_count_limit_archives(share_broker: BrokerProcess) -> None:
    _setup(share_broker, "sh-limit", 1)
    c = share_consumer(share_broker.bootstrap, "sh-limit", "sh-limit")
    counts = []
    try:
        for _ in range(3):  # group.share.delivery.count.limit=3 on this broker
            got = poll_until(c, lambda g: len(g) >= 1)
            counts.append(got[0].delivery_count())
            c.acknowledge(got[0], AcknowledgeType.RELEASE)
            c.commit_sync(10)
        time.sleep(1.0)
        assert [m for m in c.poll(1.5) if m.error() is None] == []
    finally:
        c.close()
    assert counts == [1, 2, 3]


def test_implicit_mode_accepts_on_next_poll(share_broker: BrokerProcess) -> None:
    values = _setup(share_broker, "sh-implicit", 10)
    c = share_consumer(share_broker.bootstrap, "sh-implicit", "sh-implicit", explicit=False)
    try:
        got = poll_until(c, lambda g: len(g) >= 10)
        assert sorted(m.value() for m in got) == sorted(values)
        c.commit_sync(10)
    finally:
        c.close()
    c2 = share_consumer(share_broker.bootstrap, "sh-implicit", "sh-implicit", explicit=False)
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert [m for m in c2.poll(0.5) if m.error() is None] == []
    finally:
        c2.close()


def test_commit_async_reports_through_the_callback(share_broker: BrokerProcess) -> None:
    _setup(share_broker, "sh-async", 5)
    c = share_consumer(share_broker.bootstrap, "sh-async", "sh-async")
    results: list[object] = []
    c.set_acknowledgement_commit_callback(lambda *args: results.append(args))
    try:
        got = poll_until(c, lambda g: len(g) >= 5)
        for m in got:
            c.acknowledge(m)
        c.commit_async()
        deadline = time.monotonic() + 10
        while not results and time.monotonic() < deadline:
            c.poll(0.2)
        assert results, "no acknowledgement commit callback"
    finally:
        c.close()


def test_lock_timeout_redelivers_to_another_member(share_broker: BrokerProcess) -> None:
    _setup(share_broker, "sh-lock", 3)
    set_group_configs(
        share_broker.bootstrap,
        "sh-lock",
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1000"},
    )
    holder = share_consumer(share_broker.bootstrap, "sh-lock", "sh-lock")
    try:
        held = poll_until(holder, lambda g: len(g) >= 3)
        assert {m.delivery_count() for m in held} == {1}
        other = share_consumer(share_broker.bootstrap, "sh-lock", "sh-lock")
        try:
            again = poll_until(other, lambda g: len(g) >= 3, on_batch=_accept_all(other))
            assert sorted(m.offset() for m in again) == [0, 1, 2]
            assert {m.delivery_count() for m in again} == {2}
        finally:
            other.close()
    finally:
        holder.close()


def test_two_consumers_share_one_partition(share_broker: BrokerProcess) -> None:
    create_topic(share_broker.bootstrap, "sh-two", 1)
    set_group_configs(share_broker.bootstrap, "sh-two", {"share.auto.offset.reset": "earliest"})
    consumers = [share_consumer(share_broker.bootstrap, "sh-two", "sh-two") for _ in range(2)]
    seen: list[list[int]] = [[], []]
    stop = threading.Event()

    def run(i: int) -> None:
        c = consumers[i]
        while not stop.is_set():
            batch = [m for m in c.poll(0.3) if m.error() is None]
            for m in batch:
                seen[i].append(m.offset())
                c.acknowledge(m)
            if batch:
                c.commit_sync(10)
                time.sleep(0.05)  # give the other member a turn

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    produced = 0
    try:
        # As in Kafka, members get the partition at a heartbeat after its share state is
        # initialized (each on its own heartbeat schedule): records keep coming until both
        # have read some.
        deadline = time.monotonic() + 40
        while produced < 200 or not (seen[0] and seen[1]):
            assert time.monotonic() < deadline, f"one member read nothing: {seen}"
            values = [f"{produced + i}".encode() for i in range(10)]
            produce(share_broker.bootstrap, "sh-two", values)
            produced += 10
            time.sleep(0.1)
        deadline = time.monotonic() + 30
        while len(seen[0]) + len(seen[1]) < produced and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        for c in consumers:
            c.close()
    assert sorted(seen[0] + seen[1]) == list(range(produced))  # each record once
    assert seen[0] and seen[1], "both members read the one partition"


def test_metrics_count_share_deliveries(share_broker: BrokerProcess) -> None:
    """After the tests above (same broker): the per-group counters of the scrape."""
    url = f"http://127.0.0.1:{METRICS_PORT}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("tidelog_share_"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    assert samples['tidelog_share_records_acquired_total{group="sh-accept"}'] == 20
    assert (
        samples['tidelog_share_records_acknowledged_total{group="sh-accept",type="accept"}'] == 20
    )
    assert (
        samples['tidelog_share_records_acknowledged_total{group="sh-release",type="release"}'] == 1
    )
    assert (
        samples['tidelog_share_records_acknowledged_total{group="sh-release",type="reject"}'] == 1
    )
    assert samples['tidelog_share_records_redelivered_total{group="sh-release"}'] == 1
    assert samples['tidelog_share_records_archived_total{group="sh-limit"}'] == 1
    assert samples['tidelog_share_in_flight_locks{group="sh-accept"}'] == 0


def test_read_committed_skips_aborted_records(share_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    create_topic(share_broker.bootstrap, "sh-txn", 1)
    set_group_configs(
        share_broker.bootstrap,
        "sh-txn",
        {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"},
    )
    p = Producer({"bootstrap.servers": share_broker.bootstrap, "transactional.id": "sh-txn-p"})
    p.init_transactions(15)
    for outcome in ("commit", "abort", "commit"):
        p.begin_transaction()
        for i in range(3):
            p.produce("sh-txn", value=f"{outcome}-{i}".encode(), partition=0)
        p.flush(15)
        if outcome == "commit":
            p.commit_transaction(15)
        else:
            p.abort_transaction(15)
    c = share_consumer(share_broker.bootstrap, "sh-txn", "sh-txn")
    try:
        got = poll_until(c, lambda g: len(g) >= 6, on_batch=_accept_all(c))
        time.sleep(1.0)
        got += [m for m in c.poll(1.0) if m.error() is None]
    finally:
        c.close()
    assert sorted(m.value() for m in got) == sorted(
        f"commit-{i}".encode() for i in range(3) for _ in range(2)
    )
