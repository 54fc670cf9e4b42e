"""Kafka Streams 4.4 with ``group.protocol=streams`` (KIP-1071) against tidelog: the broker
assigns the tasks (StreamsGroupHeartbeat) and creates the internal topics the topology declares.

The application (tidelog.jvm.StreamsEos: a repartition topic, a KTable join and a windowed
aggregation, exactly_once_v2) runs as one instance, then a second instance joins (the tasks are
shared between them, StreamsGroupDescribe shows both), the first is SIGKILLed mid-run (its tasks
move to the second once its session times out), then the broker is restarted with SIGTERM and
with SIGKILL (the group comes back from its StreamsGroup* records with its epoch, member and
tasks); a read_committed consumer then finds every enriched order exactly once and every window
total right."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.analytics.kafka_connector_data import read_to_end
from tests.java.test_kafka_streams import (
    N_ORDERS,
    _enriched_count,
    _produce_inputs,
    check_output,
)
from tests.support.jvm import java_bin, jvm_set_classpath
from tests.support.kafka_reference import KafkaProcess
from tests.support.kafka_wire import WireClient

pytestmark = [pytest.mark.timeout(900)]
APP = "st-app"
#: Short timeouts so a killed instance's tasks move within seconds (Kafka's group.streams.*).
OVERRIDES = {
    "group.streams.session.timeout.ms": "8000",
    "group.streams.heartbeat.interval.ms": "1000",
}

#: Kafka checks them against its group.streams.min.* bounds (5000 and 45000 by default).
KAFKA_OVERRIDES = {
    **OVERRIDES,
    "group.streams.min.session.timeout.ms": "8000",
    "group.streams.min.heartbeat.interval.ms": "1000",
}


def _start(cp: str, bootstrap: str, state: Path, log: Path) -> subprocess.Popen[bytes]:
    cmd = [str(java_bin()), "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp,
           "tidelog.jvm.StreamsEos", bootstrap, str(state), "streams"]  # fmt: skip
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def describe(bootstrap: str) -> Any:
    """The group as StreamsGroupDescribe v0 answers it."""
    from kio.schema.streams_group_describe.v0.request import StreamsGroupDescribeRequest

    with WireClient(bootstrap) as c:
        c.send(StreamsGroupDescribeRequest(group_ids=(APP,), include_authorized_operations=False))
        _cid, response = c.receive()
    (group,) = response.groups
    return group


def _active_counts(group: Any) -> list[int]:
    return sorted(sum(len(t.partitions) for t in m.assignment.active_tasks) for m in group.members)


def _wait(
    what: str, cond: Any, log: Path, procs: list[subprocess.Popen[bytes]], secs: float
) -> None:
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if cond():
            return
        for p in procs:
            assert p.poll() is None, log.read_text()[-4000:]
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}\n{log.read_text()[-4000:]}")


@pytest.mark.slow
def test_streams_protocol_two_instances_one_killed(broker_factory: Any, tmp_path: Path) -> None:
    broker = broker_factory(OVERRIDES)
    cp = jvm_set_classpath("clients")
    bs = broker.bootstrap
    want_totals = _produce_inputs(bs)
    log = tmp_path / "streams.log"
    first = _start(cp, bs, tmp_path / "state-a", log)
    second: subprocess.Popen[bytes] | None = None
    t0 = time.monotonic()
    try:
        _wait("first progress", lambda: _enriched_count(bs) >= N_ORDERS // 5, log, [first], 240)
        group = describe(bs)
        assert group.error_code == 0 and group.group_state == "Stable", group
        # 2 subtopologies (orders -> repartition; repartition + customers -> join, windows)
        # x 3 partitions: the broker created the repartition topic with 3.
        assert _active_counts(group) == [6], group
        internal = {t.name for s in group.topology.subtopologies
                    for t in (*s.repartition_source_topics, *s.state_changelog_topics)}  # fmt: skip
        assert any(n.endswith("-repartition") for n in internal), internal
        second = _start(cp, bs, tmp_path / "state-b", log)
        _wait(
            "tasks shared by two instances",
            lambda: (g := describe(bs)).group_state == "Stable" and len(_active_counts(g)) == 2
            and _active_counts(g) == [3, 3],
            log, [first, second], 120,
        )  # fmt: skip
    finally:
        first.send_signal(signal.SIGKILL)  # mid-run: open transactions, uncommitted offsets
        first.wait()
    assert second is not None
    try:
        _wait(
            "the killed instance's tasks on the other",
            lambda: _active_counts(describe(bs)) == [6], log, [second], 120,
        )  # fmt: skip
        # Broker restarts (SIGTERM, then SIGKILL): the group comes back from its records in
        # __consumer_offsets with its epoch, member and tasks; the instance carries on.
        for stop in (broker.stop, broker.kill):
            kept = describe(bs)
            stop()
            broker.start()
            again = describe(bs)
            assert again.group_epoch >= kept.group_epoch, (kept, again)
            assert [m.member_id for m in again.members] == [m.member_id for m in kept.members]
            assert _active_counts(again) == [6], again
        enriched: list[Any] = []

        def done() -> bool:
            nonlocal enriched
            enriched = read_to_end(bs, "st-enriched", 3, "read_committed")
            return len(enriched) >= N_ORDERS

        _wait("every order", done, log, [second], 400)
        elapsed = time.monotonic() - t0
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(60)
    check_output(bs, enriched, want_totals)
    print(
        f"\nKafka Streams (group.protocol=streams) on tidelog: {N_ORDERS} orders in "
        f"{elapsed:.1f} s, two instances, one SIGKILLed"
    )


@pytest.mark.slow
def test_same_application_on_apache_kafka(tmp_path: Path) -> None:
    """The reference: the same application, one instance then two, against Apache Kafka 4.4
    (tests/support/kafka_reference.py) gives the output the tidelog test checks for."""
    kafka = KafkaProcess(jvm_set_classpath("kafka"), tmp_path / "kafka", KAFKA_OVERRIDES).start()
    try:
        cp = jvm_set_classpath("clients")
        bs = kafka.bootstrap
        want_totals = _produce_inputs(bs)
        log = tmp_path / "streams.log"
        procs = [_start(cp, bs, tmp_path / "state-a", log)]
        try:
            _wait("first progress", lambda: _enriched_count(bs) >= N_ORDERS // 5, log, procs, 240)
            group = describe(bs)
            assert group.error_code == 0 and _active_counts(group) == [6], group
            procs.append(_start(cp, bs, tmp_path / "state-b", log))
            _wait(
                "tasks shared by two instances",
                lambda: _active_counts(describe(bs)) == [3, 3], log, procs, 120,
            )  # fmt: skip
            _wait(
                "every order",
                lambda: len(read_to_end(bs, "st-enriched", 3, "read_committed")) >= N_ORDERS,
                log, procs, 400,
            )  # fmt: skip
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
                p.wait(60)
        check_output(bs, read_to_end(bs, "st-enriched", 3, "read_committed"), want_totals)
    finally:
        kafka.stop()
