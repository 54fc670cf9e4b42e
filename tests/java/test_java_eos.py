"""The Apache Java client 4.4 (tests/jvm/clients, EosConsumerProtocol) with the consumer group
protocol of KIP-848 (``group.protocol=consumer``) and exactly-once consume-transform-produce
(``sendOffsetsToTransaction`` on transaction version 2), while the broker is restarted with
SIGTERM and SIGKILL: a read_committed reader (librdkafka, another client) finds every record
exactly once in the output topic."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from tests.support.eos_program import EOS_BROKER_SETTINGS, run_with_restarts
from tests.support.jvm import java_bin, jvm_set_classpath
from tests.support.read_committed import exactly_once, read_committed

pytestmark = [pytest.mark.integration]


def _run(broker: Any, prefix: str, records: int, restarts: list[signal.Signals],
         deadline_s: int) -> None:  # fmt: skip
    classpath = jvm_set_classpath("clients")
    command = [str(java_bin()), "-Xmx256m", "-XX:TieredStopAtLevel=1",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath,
               "tidelog.jvm.EosConsumerProtocol", broker.bootstrap, prefix, str(records), "2",
               str(deadline_s)]  # fmt: skip
    run = run_with_restarts(command, broker, records=records, restarts=restarts,
                            deadline_s=deadline_s, started_marker="INPUT-DONE")  # fmt: skip
    out = read_committed(broker.bootstrap, f"{prefix}-out", expect_at_least=records)
    problems = exactly_once(out, records)
    assert not problems, f"not every record once: {problems}\n{run.tail()}"
    assert run.result().startswith("RESULT ok"), run.tail()


# TxnOffsetCommit from a consumer-protocol member is refused after its first transaction
# (defect 4); pending offsets are lost at a restart (defect 1).
@pytest.mark.timeout(400)
def test_java_consumer_protocol_exactly_once_across_restarts(broker_factory: Any) -> None:
    broker = broker_factory(EOS_BROKER_SETTINGS)
    _run(broker, "jeos", 2000, [signal.SIGTERM, signal.SIGKILL], deadline_s=90)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_java_consumer_protocol_exactly_once_long(broker_factory: Any) -> None:
    broker = broker_factory(EOS_BROKER_SETTINGS)
    restarts = [signal.SIGTERM, signal.SIGKILL] * 3
    _run(broker, "jeos-long", 30000, restarts, deadline_s=900)
