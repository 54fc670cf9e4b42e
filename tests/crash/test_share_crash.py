"""Share-group state survives a clean restart and a SIGKILL during acknowledgement.

Before the stop, a member acquires records with raw ShareFetch and acknowledges some with
ShareAcknowledge; after the restart a confluent-kafka ShareConsumer of the same group reads
what is left. Acknowledged records (answer received) never come back; acquired records that
were never acknowledged do; a record whose acknowledgement was in flight at the SIGKILL may go
either way.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.broker.share.share_support import (
    create_topic,
    poll_until,
    produce,
    set_group_configs,
    share_consumer,
    start_share_broker,
)
from tests.broker.share.test_share_wire import _join, ack_request, heartbeat, share_ack, share_fetch
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_wire import WireClient
from tests.support.net import free_port

METRICS_PORT = free_port()


@pytest.fixture
def share_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    yield from start_share_broker(tmp_path, {"metrics.port": str(METRICS_PORT)})


def _acquire_and_ack(broker: BrokerProcess, topic: str) -> WireClient:
    create_topic(broker.bootstrap, topic)
    set_group_configs(broker.bootstrap, topic, {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap, topic, [f"r{i}".encode() for i in range(20)])
    wire = WireClient(broker.bootstrap)
    _, topic_id = _join(wire, topic, "before", topic)
    got = share_fetch(wire, topic, "before", 0, topic_id)
    ranges = got.responses[0].partitions[0].acquired_records
    assert [(r.first_offset, r.last_offset) for r in ranges] == [(0, 19)]
    accepted = share_ack(wire, topic, "before", 1, topic_id, 0, 9, 1)
    assert accepted.responses[0].partitions[0].error_code == ErrorCode.none
    rejected = share_ack(wire, topic, "before", 2, topic_id, 10, 11, 3)
    assert rejected.responses[0].partitions[0].error_code == ErrorCode.none
    return wire


def _read_rest(broker: BrokerProcess, topic: str, quiet_s: float = 4.0) -> list[tuple[int, int]]:
    c = share_consumer(broker.bootstrap, topic, topic)
    got: list[tuple[int, int]] = []
    try:
        last = time.monotonic()
        deadline = time.monotonic() + 30
        while time.monotonic() - last < quiet_s and time.monotonic() < deadline:
            batch = [m for m in c.poll(0.5) if m.error() is None]
            for m in batch:
                got.append((m.offset(), m.delivery_count()))
                c.acknowledge(m)
            if batch:
                c.commit_sync(10)
                last = time.monotonic()
    finally:
        c.close()
    return sorted(got)


def test_clean_restart_keeps_acknowledged_records_done(share_broker: BrokerProcess) -> None:
    wire = _acquire_and_ack(share_broker, "crash-clean")
    wire.close()
    share_broker.restart()
    rest = _read_rest(share_broker, "crash-clean")
    assert [o for o, _ in rest] == list(range(12, 20))


def test_sigkill_during_acknowledgement(share_broker: BrokerProcess) -> None:
    wire = _acquire_and_ack(share_broker, "crash-kill")
    topic_id = share_broker_topic_id(share_broker, "crash-kill")
    # an acknowledgement of 12-15 on its way when the broker dies
    wire.send(ack_request("crash-kill", "before", 3, topic_id, 12, 15, 1))
    share_broker.kill()
    wire.close()
    share_broker.start()
    rest = _read_rest(share_broker, "crash-kill")
    offsets = {o for o, _ in rest}
    assert not offsets & set(range(12)), "acknowledged or rejected records came back"
    assert set(range(16, 20)) <= offsets, "acquired records were lost"
    assert offsets <= set(range(12, 20))


def share_broker_topic_id(broker: BrokerProcess, topic: str) -> object:
    with WireClient(broker.bootstrap) as wire:
        _, topic_id = _join(wire, topic, "probe", topic)
        heartbeat(wire, topic, "probe", -1, None)
    return topic_id


def _groups_with_share_partitions() -> set[str]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).read()
    prefix = 'tidelog_share_in_flight_locks{group="'
    return {
        line[len(prefix) :].split('"', 1)[0]
        for line in text.decode().splitlines()
        if line.startswith(prefix)
    }


def test_a_deleted_topics_share_state_stays_gone_after_sigkill(
    share_broker: BrokerProcess,
) -> None:
    from confluent_kafka.admin import AdminClient

    wire = _acquire_and_ack(share_broker, "crash-del")
    wire.close()
    assert "crash-del" in _groups_with_share_partitions()
    admin = AdminClient({"bootstrap.servers": share_broker.bootstrap})
    admin.delete_topics(["crash-del"])["crash-del"].result(15)
    assert "crash-del" not in _groups_with_share_partitions()
    share_broker.kill()
    share_broker.start()
    assert "crash-del" not in _groups_with_share_partitions()
    # a new topic of the same name starts afresh for the group
    create_topic(share_broker.bootstrap, "crash-del")
    produce(share_broker.bootstrap, "crash-del", [b"n0", b"n1", b"n2"])
    c = share_consumer(share_broker.bootstrap, "crash-del", "crash-del")
    try:

        def accept(batch: list[Any]) -> None:
            for m in batch:
                c.acknowledge(m)

        got = poll_until(c, lambda g: len(g) >= 3, on_batch=accept)
    finally:
        c.close()
    assert sorted((m.offset(), m.delivery_count()) for m in got) == [(0, 1), (1, 1), (2, 1)]
