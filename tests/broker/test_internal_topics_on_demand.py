"""Internal topics are created on first use, as Kafka does, not at start-up.

Kafka creates ``__consumer_offsets`` on the first FindCoordinator for a group and
``__transaction_state`` on the first FindCoordinator for a transactional id
(``KafkaApis.getCoordinator``). A broker nobody uses for transactions never makes the fifty
``__transaction_state`` partitions, and its start does not wait for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import request as fc3
from kio.schema.find_coordinator.v4 import request as fc4

from tests.support.kafka_wire import WireClient

GROUP, TRANSACTION = 0, 1


def _partitions(log_dir: Path, topic: str) -> int:
    return sum(1 for p in log_dir.iterdir() if p.name.rsplit("-", 1)[0] == topic)


def test_internal_topics_wait_for_their_first_find_coordinator(broker: Any) -> None:
    log_dir = Path(broker.log_dir)
    assert _partitions(log_dir, "__transaction_state") == 0
    assert _partitions(log_dir, "__consumer_offsets") == 0
    with WireClient(broker.bootstrap) as client:
        found = client.request(fc3.FindCoordinatorRequest(key="tx-1", key_type=TRANSACTION))
        assert (found.error_code, found.node_id, found.port) == (ErrorCode.none, 1, broker.port)
        assert _partitions(log_dir, "__transaction_state") == 50
        assert _partitions(log_dir, "__consumer_offsets") == 0
        # v4 (KIP-699): a batch of group keys; the first makes __consumer_offsets
        batch = client.request(
            fc4.FindCoordinatorRequest(key_type=GROUP, coordinator_keys=("a", "b"))
        )
        assert [c.error_code for c in batch.coordinators] == [ErrorCode.none] * 2
        assert _partitions(log_dir, "__consumer_offsets") == 50
        again = client.request(fc3.FindCoordinatorRequest(key="tx-2", key_type=TRANSACTION))
        assert again.error_code == ErrorCode.none
    assert "created topic __transaction_state" in broker.log_text()
    # the topics (and the coordinators' state in them) survive a restart as they are
    broker.restart()
    assert _partitions(log_dir, "__transaction_state") == 50
    with WireClient(broker.bootstrap) as client:
        found = client.request(fc3.FindCoordinatorRequest(key="tx-1", key_type=TRANSACTION))
        assert found.error_code == ErrorCode.none
    assert broker.log_text().count("created topic __transaction_state") == 1


def test_transactions_work_on_a_fresh_broker(broker: Any) -> None:
    """A transactional producer finds the coordinator, which makes the topic, then commits."""
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "t-fresh"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("fresh", b"v", partition=0)
    producer.commit_transaction(30)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "g-fresh",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.subscribe(["fresh"])
        message = None
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.value() == b"v"
    finally:
        consumer.close()
