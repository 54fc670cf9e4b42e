"""The transaction coordinator's transition table (tests/support/txn_table.py) against Apache
Kafka 4.4: every row must get the answers the table says, which makes it Kafka's table
(tests/integration/test_txn_transition_table.py holds tidelog to it). Restart steps are left
out here (the reference broker is shared by the session)."""

from __future__ import annotations

import itertools

import pytest

from tests.support.kafka_reference import KafkaProcess
from tests.support.kafka_wire import WireClient
from tests.support.txn_table import ROWS, Row, prepare_broker, run_row

pytestmark = pytest.mark.integration

_prepared: set[str] = set()
_runs = itertools.count()


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_row_is_kafkas(kafka_broker: KafkaProcess, row: Row) -> None:
    if kafka_broker.bootstrap not in _prepared:
        with WireClient(kafka_broker.bootstrap, timeout=30.0) as client:
            prepare_broker(client)
        _prepared.add(kafka_broker.bootstrap)
    problems = run_row(
        row,
        lambda: WireClient(kafka_broker.bootstrap, timeout=30.0),
        None,
        prefix=f"kafka{next(_runs)}",
    )
    assert not problems, f"{row.name} ({row.why}):\n" + "\n".join(problems)
