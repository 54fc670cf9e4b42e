"""What Kafka 4.2-4.4 added to share groups, on tidelog: lock expiry by timer, the
``by_duration`` start, ``share.renew.acknowledge.enable``, topic ACLs, deleted topics and the
leave heartbeat that keeps the share session (the behaviours compared with Apache Kafka 4.4 are
in ``tests/kafkaref/test_share_differential.py``)."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from kio.schema.errors import ErrorCode

from tests.broker.share.share_support import (
    create_topic,
    poll_until,
    produce,
    set_group_configs,
    start_share_broker,
)
from tests.broker.share.test_share_wire import _join, heartbeat, share_ack, share_fetch
from tests.security.secure_broker import wait_for_log
from tests.security.test_acls import _sasl, acl_broker  # noqa: F401 (a fixture)
from tests.support import share_behaviour
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_wire import WireClient
from tests.support.net import free_port

METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from start_share_broker(
        Path(tmp_path_factory.mktemp("share42")), {"metrics.port": str(METRICS_PORT)}
    )


def _in_flight_locks(group: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).read()
    for line in text.decode().splitlines():
        if line.startswith(f'tidelog_share_in_flight_locks{{group="{group}"}} '):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _acquire(wire: WireClient, group: str, topic: str) -> tuple[Any, int, list[Any]]:
    """Join, then ShareFetch until records come: (topic id, next session epoch, ranges)."""
    _, topic_id = _join(wire, group, "m1", topic)
    epoch = 0
    deadline = time.monotonic() + 10
    while True:
        answer = share_fetch(wire, group, "m1", epoch, topic_id)
        epoch += 1
        assert answer.error_code == ErrorCode.none, answer
        ranges = [r for t in answer.responses for p in t.partitions for r in p.acquired_records]
        if ranges:
            return topic_id, epoch, ranges
        assert time.monotonic() < deadline, "nothing acquired"


def test_a_lock_runs_out_on_time_without_any_request(share_broker: BrokerProcess) -> None:
    create_topic(share_broker.bootstrap, "s42-lock")
    set_group_configs(
        share_broker.bootstrap,
        "s42-lock",
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1000"},
    )
    produce(share_broker.bootstrap, "s42-lock", [b"a", b"b"])
    with WireClient(share_broker.bootstrap) as wire:
        _acquire(wire, "s42-lock", "s42-lock")
        assert _in_flight_locks("s42-lock") == 2
        acquired_at = time.monotonic()
        # no fetch, no acknowledgement, the session stays open: the timer releases them
        while _in_flight_locks("s42-lock") != 0:
            assert time.monotonic() - acquired_at < 5, "the locks never ran out"
            time.sleep(0.1)
        assert time.monotonic() - acquired_at >= 0.5


def test_renew_disabled_by_group_config(share_broker: BrokerProcess) -> None:
    create_topic(share_broker.bootstrap, "s42-renew")
    set_group_configs(
        share_broker.bootstrap,
        "s42-renew",
        {"share.auto.offset.reset": "earliest", "share.renew.acknowledge.enable": "false"},
    )
    produce(share_broker.bootstrap, "s42-renew", [b"a"])
    with WireClient(share_broker.bootstrap) as wire:
        topic_id, epoch, _ = _acquire(wire, "s42-renew", "s42-renew")
        refused = share_ack(wire, "s42-renew", "m1", epoch, topic_id, 0, 0, 4)
        (part,) = refused.responses[0].partitions
        assert part.error_code == ErrorCode.invalid_record_state  # as Kafka
        accepted = share_ack(wire, "s42-renew", "m1", epoch + 1, topic_id, 0, 0, 1)
        assert accepted.responses[0].partitions[0].error_code == ErrorCode.none


def test_by_duration_starts_at_the_first_record_that_recent(share_broker: BrokerProcess) -> None:
    # five records stamped 2 h ago, five now; share.auto.offset.reset=by_duration:PT1H
    assert share_behaviour.by_duration_start(share_broker.bootstrap, "s42-dur") == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("value", ["by_duration:P1Y", "by_duration:-PT1H", "by_duration:", "soon"])
def test_share_auto_offset_reset_refuses_what_kafka_refuses(
    share_broker: BrokerProcess, value: str
) -> None:
    with pytest.raises(KafkaException, match=re.escape("by_duration:<PnDTnHnMn.nS>")):
        set_group_configs(share_broker.bootstrap, "s42-bad", {"share.auto.offset.reset": value})


def test_leave_keeps_the_share_session_until_it_closes(share_broker: BrokerProcess) -> None:
    create_topic(share_broker.bootstrap, "s42-leave")
    set_group_configs(share_broker.bootstrap, "s42-leave", {"share.auto.offset.reset": "earliest"})
    produce(share_broker.bootstrap, "s42-leave", [b"a", b"b"])
    with WireClient(share_broker.bootstrap) as wire, WireClient(share_broker.bootstrap) as other:
        topic_id, _, _ = _acquire(wire, "s42-leave", "s42-leave")
        # the leave heartbeat comes first (another connection), then the last ack (epoch -1)
        left = heartbeat(other, "s42-leave", "m1", -1, None)
        assert left.error_code == ErrorCode.none
        last = share_ack(wire, "s42-leave", "m1", -1, topic_id, 0, 1, 1)
        assert last.error_code == ErrorCode.none
        assert last.responses[0].partitions[0].error_code == ErrorCode.none
        # the session is closed now; nothing comes back to a new member
        assert share_ack(wire, "s42-leave", "m1", 1, topic_id, 0, 1, 1).error_code == (
            ErrorCode.share_session_not_found
        )
        _, topic_id2 = _join(other, "s42-leave", "m2", "s42-leave")
        again = share_fetch(other, "s42-leave", "m2", 0, topic_id2, max_wait_ms=300)
        assert not [r for t in again.responses for p in t.partitions for r in p.acquired_records]


def test_acknowledging_after_the_topic_is_deleted(share_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    create_topic(share_broker.bootstrap, "s42-del")
    set_group_configs(share_broker.bootstrap, "s42-del", {"share.auto.offset.reset": "earliest"})
    produce(share_broker.bootstrap, "s42-del", [b"a"])
    with WireClient(share_broker.bootstrap) as wire:
        topic_id, epoch, _ = _acquire(wire, "s42-del", "s42-del")
        admin = AdminClient({"bootstrap.servers": share_broker.bootstrap})
        admin.delete_topics(["s42-del"])["s42-del"].result(15)
        answer = share_ack(wire, "s42-del", "m1", epoch, topic_id, 0, 0, 1)
        assert answer.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_id
        assert _in_flight_locks("s42-del") == 0  # its share partition is gone


def test_topic_acls_for_share_groups(acl_broker: tuple[Any, int, int]) -> None:  # noqa: F811
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    broker, sasl_port, plain_port = acl_broker
    plain = f"127.0.0.1:{plain_port}"
    for topic in ("acl-read", "acl-describe", "acl-none"):
        create_topic(plain, topic)
        produce(plain, topic, [b"x"])
    set_group_configs(plain, "acl-g", {"share.auto.offset.reset": "earliest"})
    admin = AdminClient({"bootstrap.servers": plain})

    def allow(rtype: Any, name: str, op: Any) -> AclBinding:
        return AclBinding(
            rtype, name, ResourcePatternType.LITERAL, "User:alice", "*", op,
            AclPermissionType.ALLOW,
        )  # fmt: skip

    bindings = [
        allow(ResourceType.GROUP, "acl-g", AclOperation.READ),
        allow(ResourceType.TOPIC, "acl-read", AclOperation.READ),
        allow(ResourceType.TOPIC, "acl-describe", AclOperation.DESCRIBE),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(15)

    def consumer(topic: str) -> ShareConsumer:
        c = ShareConsumer({**_sasl(sasl_port, "alice"), "group.id": "acl-g", "log_level": 3})
        c.subscribe([topic])
        return c

    readable = consumer("acl-read")
    try:
        got = poll_until(readable, lambda g: len(g) >= 1)
        assert got[0].value() == b"x"
    finally:
        readable.close()
    # DESCRIBE but not READ: the heartbeat is answered, ShareFetch is refused for the topic
    describe_only = consumer("acl-describe")
    try:
        deadline = time.monotonic() + 20
        while "TOPIC:acl-describe" not in broker.log_text():
            assert time.monotonic() < deadline, broker.log_text()[-3000:]
            assert not [m for m in describe_only.poll(0.3) if m.error() is None]
        wait_for_log(broker, "Denied operation = READ from host = 127.0.0.1 on resource = "
                     "TOPIC:acl-describe")  # fmt: skip
    finally:
        describe_only.close()
    # not even DESCRIBE: the heartbeat is TOPIC_AUTHORIZATION_FAILED, which the consumer raises
    hidden = consumer("acl-none")
    try:
        deadline = time.monotonic() + 20
        with pytest.raises(KafkaException, match="Topic authorization failed"):
            while time.monotonic() < deadline:
                assert not [m for m in hidden.poll(0.3) if m.error() is None]
        wait_for_log(broker, "Denied operation = DESCRIBE from host = 127.0.0.1 on resource = "
                     "TOPIC:acl-none")  # fmt: skip
    finally:
        hidden.close()
