"""The transaction coordinator's transition table (tests/support/txn_table.py) against Apache
Kafka 4.4: every row must get the answers the table says, which makes it Kafka's table
(tests/integration/test_txn_transition_table.py holds tidelog to it). Restart steps are left
out here. The expiry rows get a Kafka of their own (ids idle for a second expire there)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.support.jvm import jvm_set_classpath
from tests.support.kafka_reference import KafkaProcess
from tests.support.kafka_wire import WireClient
from tests.support.txn_table import (
    EXPIRY_CONFIG,
    EXPIRY_ROWS,
    ROWS,
    Row,
    assert_row,
    params,
    prepare_broker,
)

pytestmark = pytest.mark.integration

_prepared: set[str] = set()
_runs = itertools.count()


@pytest.fixture(scope="module")
def expiring_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaProcess]:
    kafka = KafkaProcess(
        jvm_set_classpath("kafka"), tmp_path_factory.mktemp("kafka_expiry"), EXPIRY_CONFIG
    )
    yield kafka.start()
    kafka.stop()


def _run(kafka: KafkaProcess, row: Row) -> None:
    if kafka.bootstrap not in _prepared:
        with WireClient(kafka.bootstrap, timeout=30.0) as client:
            prepare_broker(client)
        _prepared.add(kafka.bootstrap)
    assert_row(row, kafka.bootstrap, None, f"kafka{next(_runs)}")


@pytest.mark.parametrize("row", params(ROWS))
def test_row_is_kafkas(kafka_broker: KafkaProcess, row: Row) -> None:
    _run(kafka_broker, row)


@pytest.mark.parametrize("row", params(EXPIRY_ROWS))
def test_expiry_row_is_kafkas(expiring_kafka: KafkaProcess, row: Row) -> None:
    _run(expiring_kafka, row)
