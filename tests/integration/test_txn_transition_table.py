"""The transaction coordinator's transition table (tests/support/txn_table.py) against tidelog,
over the wire, with restarts (SIGTERM and SIGKILL) between steps: every (state, request, epoch)
row gets Kafka 4.4's answer (tests/kafkaref/test_txn_transition_table.py proves the table is
Kafka's) and the state is rebuilt from ``__transaction_state`` identically."""

from __future__ import annotations

import signal
from collections.abc import Iterator, Mapping

import pytest

from tests.support.broker_process import BrokerProcess
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


def _broker(
    tmp_path_factory: pytest.TempPathFactory, overrides: Mapping[str, str]
) -> Iterator[BrokerProcess]:
    log_dir = tmp_path_factory.mktemp("txn-table") / "data"
    log_dir.mkdir()
    process = BrokerProcess(
        log_dir, {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200", **overrides}
    ).start()
    with WireClient(process.bootstrap, timeout=30.0) as client:
        prepare_broker(client)
    yield process
    assert process.stop() == 0, process.log_text()[-3000:]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _broker(tmp_path_factory, {})


@pytest.fixture(scope="module")
def expiring_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _broker(tmp_path_factory, EXPIRY_CONFIG)


def _run(broker: BrokerProcess, row: Row, prefix: str = "tidelog") -> None:
    def restart(kill: bool) -> None:
        if kill:
            broker.stop(signal.SIGKILL)
        else:
            assert broker.stop() == 0, broker.log_text()[-3000:]
        broker.start()

    assert_row(row, broker.bootstrap, restart, prefix)


@pytest.mark.parametrize("row", params(ROWS))
def test_row(broker: BrokerProcess, row: Row) -> None:
    _run(broker, row)


@pytest.mark.parametrize("row", params(EXPIRY_ROWS))
def test_expiry_row(expiring_broker: BrokerProcess, row: Row) -> None:
    _run(expiring_broker, row)


_ANYWHERE = [r for r in ROWS if r.restart_anywhere]


@pytest.mark.slow
@pytest.mark.parametrize("row", params(_ANYWHERE))
def test_row_with_a_restart_at_every_step(broker: BrokerProcess, row: Row) -> None:
    """The same answers with the broker restarted between every two steps (about 3 minutes)."""
    _run(broker, row.restarting_at_every_step(), prefix="tidelog-every-step")
