"""``tidelog transactions`` against a real broker: list, describe, describe-producers,
find-hanging (a transaction the coordinator lost) and abort."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.tools.tools_fixtures import RunTool
from tidelog.protocol.internal_topics.consumer_offsets import partition_for

pytestmark = pytest.mark.integration


def open_transaction(bootstrap: str, topic: str, transactional_id: str) -> Producer:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(3):
        producer.produce(topic, value=b"x")
    producer.flush(10)
    return producer


def committed_end(bootstrap: str, topic: str) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "probe", "isolation.level": "read_committed"}
    )
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def test_list_describe_and_producers(broker_factory: Any, tidelog: RunTool) -> None:
    broker = broker_factory()
    bs = broker.bootstrap
    producer = open_transaction(bs, "h", "tx-tool")
    listed = tidelog("transactions", "--bootstrap-server", bs, "list")
    assert listed.code == 0
    assert listed.lines[0].split() == [
        "TransactionalId", "Coordinator", "ProducerId", "TransactionState"
    ]  # fmt: skip
    assert listed.lines[1].split()[0] == "tx-tool" and listed.lines[1].split()[3] == "Ongoing"
    described = tidelog(
        "transactions", "--bootstrap-server", bs, "describe", "--transactional-id", "tx-tool"
    )
    assert described.code == 0 and described.lines[1].split()[-1] == "h-0"
    unknown = tidelog(
        "transactions", "--bootstrap-server", bs, "describe", "--transactional-id", "nope"
    )
    assert unknown.code != 0 and "TRANSACTIONAL_ID_NOT_FOUND" in unknown.err
    producers = tidelog(
        "transactions", "--bootstrap-server", bs, "describe-producers", "--topic", "h",
        "--partition", "0",
    )  # fmt: skip
    assert producers.code == 0 and producers.lines[1].split()[-1] == "0"  # open at offset 0
    producer.commit_transaction(30)
    listed = tidelog("transactions", "--bootstrap-server", bs, "list")
    assert listed.lines[1].split()[3] == "CompleteCommit"


def test_find_hanging_and_abort(broker_factory: Any, tidelog: RunTool) -> None:
    broker = broker_factory()
    bs = broker.bootstrap
    producer = open_transaction(bs, "h", "tx-lost")
    del producer
    broker.kill()
    # the coordinator's record of the transaction is lost: the transaction now hangs
    state = Path(broker.log_dir) / f"__transaction_state-{partition_for('tx-lost', 50)}"
    for name in os.listdir(state):
        if name.endswith((".log", ".index", ".timeindex", ".snapshot")):
            os.unlink(state / name)
    broker.start()
    assert committed_end(bs, "h") == 0
    hanging = tidelog(
        "transactions", "--bootstrap-server", bs, "find-hanging", "--topic", "h",
        "--max-transaction-timeout", "0",
    )  # fmt: skip
    assert hanging.code == 0 and len(hanging.lines) == 2
    assert hanging.lines[1].split()[:2] == ["h", "0"] and hanging.lines[1].split()[5] == "0"
    aborted = tidelog(
        "transactions", "--bootstrap-server", bs, "abort", "--topic", "h", "--partition", "0",
        "--start-offset", "0",
    )  # fmt: skip
    assert aborted.code == 0, aborted.err
    assert committed_end(bs, "h") == 4  # three records and the ABORT marker
    again = tidelog(
        "transactions", "--bootstrap-server", bs, "abort", "--topic", "h", "--partition", "0",
        "--start-offset", "0",
    )  # fmt: skip
    assert again.code != 0
