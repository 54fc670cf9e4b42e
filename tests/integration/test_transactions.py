"""Transactions over TCP with stock clients: commit, abort, offsets, fencing, crashes.

Every test starts a real broker subprocess (``broker_factory``) and talks to it with
confluent-kafka, kafka-python, aiokafka or kcat; crash tests SIGKILL the broker or a producer
process and check, after restart, what read_committed consumers see.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.broker.coordinator.log import encode_records
from tidelog.broker.txn.service import TRANSACTION_STATE_TOPIC, _read_all
from tidelog.protocol.internal_topics.consumer_offsets import partition_for
from tidelog.protocol.internal_topics.transaction_state import (
    TxnLogValue,
    encode_txn_key,
    encode_txn_value,
)
from tidelog.storage import LogConfig, PartitionLog

pytestmark = pytest.mark.integration

FAST = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def txn_producer(bootstrap: str, transactional_id: str, **extra: Any) -> Producer:
    config = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id}
    config.update(extra)
    return Producer(config)


def read_committed(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    *,
    want: int = -1,
    wait_s: float = 8.0,
    **extra: Any,
) -> list[bytes]:
    """Every value a read_committed consumer sees from the start (until ``want`` or quiet);
    ``extra``: more consumer settings."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **extra,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF
                    eof.add(message.partition())
                    if want < 0 and len(eof) == partitions:
                        break
                continue
            out.append(message.value())
            if 0 <= want <= len(out):
                break
    finally:
        consumer.close()
    return out


def lso(bootstrap: str, topic: str, partition: int = 0) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "lso-probe",
            "isolation.level": "read_committed",
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(high)
    finally:
        consumer.close()


# -- confluent-kafka ------------------------------------------------------------------------
def test_confluent_commit_abort_and_offsets(broker_factory: Any) -> None:
    broker = broker_factory()
    bs = broker.bootstrap
    create_topic(bs, "orders", 2)
    producer = txn_producer(bs, "tx-orders")
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("orders", value=b"c%d" % i, partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(6):
        producer.produce("orders", value=b"a%d" % i, partition=i % 2)
    producer.flush(10)
    producer.abort_transaction(30)
    seen = read_committed(bs, "orders", 2)
    assert sorted(seen) == sorted(b"c%d" % i for i in range(10))

    # consume-transform-produce: offsets invisible until the commit
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "etl", "enable.auto.commit": False})
    consumer.assign([TopicPartition("orders", 0, 0)])
    producer.begin_transaction()
    producer.produce("orders", value=b"late", partition=0)
    producer.send_offsets_to_transaction(
        [TopicPartition("orders", 0, 5)], consumer.consumer_group_metadata(), 30
    )
    # librdkafka asks with require_stable: UNSTABLE_OFFSET_COMMIT, retried until it gives up
    with pytest.raises(KafkaException) as pending:
        consumer.committed([TopicPartition("orders", 0)], timeout=2)
    assert pending.value.args[0].code() == -185  # _TIMED_OUT
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bs)
    assert admin.list_group_offsets({"etl": None}) == {"etl": {}}  # invisible until commit
    producer.commit_transaction(30)
    after = consumer.committed([TopicPartition("orders", 0)], timeout=10)
    assert after[0].offset == 5
    offsets = admin.list_group_offsets({"etl": None})["etl"]
    admin.close()
    assert [(tp.topic, tp.partition, o.offset) for tp, o in offsets.items()] == [("orders", 0, 5)]
    consumer.close()
    assert b"late" in read_committed(bs, "orders", 2)

    # the offsets and the coordinator state survive a restart
    broker.restart()
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "etl"})
    assert consumer.committed([TopicPartition("orders", 0)], timeout=10)[0].offset == 5
    consumer.close()
    again = txn_producer(bs, "tx-orders")
    again.init_transactions(30)
    again.begin_transaction()
    again.produce("orders", value=b"after-restart", partition=1)
    again.commit_transaction(30)
    assert b"after-restart" in read_committed(bs, "orders", 2)
    dirs = list(Path(broker.log_dir).rglob("orders-*/*.txnindex"))
    assert dirs, "aborted transactions are indexed in .txnindex files"


def test_read_committed_waits_for_the_open_transaction(broker_factory: Any) -> None:
    broker = broker_factory()
    bs = broker.bootstrap
    create_topic(bs, "t")
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("t", value=b"before")
    plain.flush(10)
    producer = txn_producer(bs, "tx-open")
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("t", value=b"pending")
    producer.flush(10)
    plain.produce("t", value=b"after")
    plain.flush(10)
    assert lso(bs, "t") == 1  # stops at the open transaction's first offset
    assert read_committed(bs, "t") == [b"before"]
    producer.commit_transaction(30)
    assert read_committed(bs, "t") == [b"before", b"pending", b"after"]


def test_zombie_is_fenced(broker_factory: Any) -> None:
    broker = broker_factory()
    bs = broker.bootstrap
    create_topic(bs, "z")
    old = txn_producer(bs, "tx-zombie")
    old.init_transactions(30)
    old.begin_transaction()
    old.produce("z", value=b"zombie")
    old.flush(10)
    new = txn_producer(bs, "tx-zombie")
    new.init_transactions(30)  # aborts the old instance's transaction, bumps the epoch
    new.begin_transaction()
    new.produce("z", value=b"fresh")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as failure:
        old.produce("z", value=b"late zombie")
        old.commit_transaction(10)
    assert failure.value.args[0].fatal() or "fenced" in str(failure.value).lower()
    assert read_committed(bs, "z") == [b"fresh"]


# -- kafka-python, aiokafka, kcat ------------------------------------------------------------
def test_kafka_python_transactions_and_read_committed(broker_factory: Any) -> None:
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient

    broker = broker_factory()
    bs = broker.bootstrap
    create_topic(bs, "kp")
    producer = KafkaProducer(bootstrap_servers=bs, transactional_id="tx-kp")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(5):
        producer.send("kp", b"ok%d" % i)
    producer.send_offsets_to_transaction(
        {KpTopicPartition("kp", 0): OffsetAndMetadata(4, "", -1)}, "kp-group"
    )
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("kp", b"dropped")
    producer.flush()
    producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer(
        "kp",
        bootstrap_servers=bs,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=4000,
    )
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"ok%d" % i for i in range(5)]
    admin = KafkaAdminClient(bootstrap_servers=bs)
    offsets = admin.list_group_offsets({"kp-group": None})["kp-group"]
    admin.close()
    assert [(tp.topic, tp.partition, o.offset) for tp, o in offsets.items()] == [("kp", 0, 4)]


def test_aiokafka_transactional_producer(broker_factory: Any) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition
    from kafka.admin import KafkaAdminClient

    broker = broker_factory()
    bs = broker.bootstrap
    create_topic(bs, "aio")

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="tx-aio")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(3):
                    await producer.send_and_wait("aio", b"aio%d" % i)
                await producer.send_offsets_to_transaction(
                    {AioTopicPartition("aio", 0): 2}, "aio-group"
                )
            await producer.begin_transaction()
            await producer.send_and_wait("aio", b"aborted")
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert read_committed(bs, "aio") == [b"aio0", b"aio1", b"aio2"]
    admin = KafkaAdminClient(bootstrap_servers=bs)
    offsets = admin.list_group_offsets({"aio-group": None})["aio-group"]
    admin.close()
    assert [(tp.topic, tp.partition, o.offset) for tp, o in offsets.items()] == [("aio", 0, 2)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_reads_committed_only(broker_factory: Any) -> None:
    broker = broker_factory()
    bs = broker.bootstrap
    create_topic(bs, "kc")
    producer = txn_producer(bs, "tx-kcat")
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("kc", value=b"aborted")
    producer.flush(10)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("kc", value=b"kept")
    producer.commit_transaction(30)
    out = subprocess.run(
        ["kcat", "-C", "-b", bs, "-t", "kc", "-o", "beginning", "-e", "-q"],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split() == [b"kept"]


# -- crashes ---------------------------------------------------------------------------------
PRODUCER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "tx-crash",
                  "transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("crash", value=b"lost%d" % i)
    p.flush(10)
    print("ready", flush=True)
    time.sleep(600)
    """
)


def test_producer_killed_mid_transaction_is_aborted_at_timeout(broker_factory: Any) -> None:
    broker = broker_factory(FAST)
    bs = broker.bootstrap
    create_topic(bs, "crash")
    proc = subprocess.Popen(
        [sys.executable, "-c", PRODUCER_SCRIPT, bs], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert lso(bs, "crash") == 0  # invisible while open
        deadline = time.monotonic() + 15
        while lso(bs, "crash") == 0 and time.monotonic() < deadline:
            time.sleep(0.3)
        assert lso(bs, "crash") == 6  # five records and the ABORT marker
        assert read_committed(bs, "crash") == []
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "transaction timed out" in broker.log_text()


def test_broker_killed_mid_transaction_then_aborts(broker_factory: Any) -> None:
    broker = broker_factory(FAST)
    bs = broker.bootstrap
    create_topic(bs, "bk")
    producer = txn_producer(bs, "tx-bk", **{"transaction.timeout.ms": 2000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("bk", value=b"open")
    producer.flush(10)
    broker.kill()
    broker.start()
    assert lso(bs, "bk") == 0  # the open transaction survived the crash (snapshot/replay)
    deadline = time.monotonic() + 15
    while lso(bs, "bk") == 0 and time.monotonic() < deadline:
        time.sleep(0.3)
    assert lso(bs, "bk") == 2
    assert read_committed(bs, "bk") == []
    fresh = txn_producer(bs, "tx-bk")
    fresh.init_transactions(30)
    fresh.begin_transaction()
    fresh.produce("bk", value=b"next")
    fresh.commit_transaction(30)
    assert read_committed(bs, "bk") == [b"next"]


def test_broker_killed_between_prepare_commit_and_markers(broker_factory: Any) -> None:
    """The PrepareCommit record is durable, no marker is: after restart the coordinator
    completes the commit on every partition (all-or-nothing)."""
    broker = broker_factory(FAST)
    bs = broker.bootstrap
    create_topic(bs, "pc", 3)
    producer = txn_producer(bs, "tx-pc", **{"transaction.timeout.ms": 60000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(9):
        producer.produce("pc", value=b"v%d" % i, partition=i % 3)
    producer.flush(10)
    assert read_committed(bs, "pc", 3, wait_s=3) == []
    broker.kill()
    # What the coordinator wrote just before dying: PrepareCommit for the three partitions.
    state_dir = Path(broker.log_dir) / f"{TRANSACTION_STATE_TOPIC}-{partition_for('tx-pc', 50)}"
    state = PartitionLog(state_dir, LogConfig())
    last = _read_all(state, 1 << 20)[-1][1]
    assert last is not None and last.state_id == 1  # Ongoing
    value = TxnLogValue(
        last.producer_id,
        last.producer_epoch,
        60000,
        2,
        {"pc": [0, 1, 2]},
        last.last_update_ms,
        last.start_ms,
    )
    state.append(encode_records([(encode_txn_key("tx-pc"), encode_txn_value(value))], 1))
    state.close()
    broker.start()
    seen = read_committed(bs, "pc", 3, want=9, wait_s=15)
    assert sorted(seen) == sorted(b"v%d" % i for i in range(9))
    assert "completing PrepareCommit" in broker.log_text()
