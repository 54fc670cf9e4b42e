"""Kafka Streams 4.4 with processing.guarantee=exactly_once_v2 against tidelog: a repartition
topic, a KTable join and a windowed aggregation (tidelog.jvm.StreamsEos). The instance is
SIGKILLed mid-way and restarted; a read_committed consumer then finds every enriched order exactly
once and every window total right. Internal topics: the changelog is compacted, the repartition
topic is purged with DeleteRecords. Prints the throughput."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.analytics.kafka_connector_data import read_to_end
from tests.support.jvm import java_bin, jvm_set_classpath

pytestmark = [pytest.mark.timeout(900)]
N_ORDERS = 20_000
CUSTOMERS = 50
BASE_TS = int(time.time() * 1000) - 3_600_000


def _region(c: int) -> str:
    return f"r{c % 5}"


def _produce_inputs(bootstrap: str) -> dict[tuple[str, int], tuple[int, int]]:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("st-customers", 3, 1), NewTopic("st-orders", 3, 1),
                         NewTopic("st-enriched", 3, 1), NewTopic("st-totals", 3, 1)])  # fmt: skip
    admin.close()
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    for c in range(CUSTOMERS):
        p.send("st-customers", key=b"c%d" % c, value=_region(c).encode(), timestamp_ms=BASE_TS)
    p.flush()
    totals: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for i in range(N_ORDERS):
        c, amount, ts = i % CUSTOMERS, i % 100, BASE_TS + 1000 + i * 10
        p.send("st-orders", key=b"o%d" % i, value=b"c%d:%d" % (c, amount), timestamp_ms=ts)
        t = totals[(f"c{c}", ts // 10_000 * 10_000)]
        t[0] += 1
        t[1] += amount
    p.flush()
    p.close()
    return {k: (v[0], v[1]) for k, v in totals.items()}


def _start(cp: str, bootstrap: str, state: Path, log: Path) -> subprocess.Popen[bytes]:
    cmd = [str(java_bin()), "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp,
           "tidelog.jvm.StreamsEos", bootstrap, str(state)]  # fmt: skip
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def _enriched_count(bootstrap: str) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    tps = [TopicPartition("st-enriched", p) for p in range(3)]
    n = sum(c.end_offsets(tps).values())  # markers included: an upper bound, fine for progress
    c.close()
    return int(n)


def test_streams_exactly_once_v2_survives_sigkill(module_broker: Any, tmp_path: Path) -> None:
    cp = jvm_set_classpath("clients")
    bs = module_broker.bootstrap
    want_totals = _produce_inputs(bs)
    log = tmp_path / "streams.log"
    first = _start(cp, bs, tmp_path / "state", log)
    t0 = time.monotonic()
    try:
        deadline = time.monotonic() + 240
        while _enriched_count(bs) < N_ORDERS // 3 and time.monotonic() < deadline:
            assert first.poll() is None, log.read_text()[-4000:]
            time.sleep(0.5)
        assert _enriched_count(bs) >= N_ORDERS // 3, log.read_text()[-4000:]
    finally:
        os.kill(first.pid, signal.SIGKILL)  # mid-way: open transactions, uncommitted offsets
        first.wait()
    second = _start(cp, bs, tmp_path / "state", log)
    try:
        deadline = time.monotonic() + 400
        enriched: list[Any] = []
        while time.monotonic() < deadline:
            enriched = read_to_end(bs, "st-enriched", 3, "read_committed")
            if len(enriched) >= N_ORDERS:
                break
            assert second.poll() is None, log.read_text()[-4000:]
            time.sleep(2)
        elapsed = time.monotonic() - t0
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(60)
    check_output(bs, enriched, want_totals)
    _check_internal_topics(bs)
    print(
        f"\nKafka Streams EOS v2 on tidelog: {N_ORDERS} orders in {elapsed:.1f} s "
        f"({N_ORDERS / elapsed:,.0f} records/s, including one SIGKILL and restart)"
    )


def check_output(
    bs: str, enriched: list[Any], want_totals: dict[tuple[str, int], tuple[int, int]]
) -> None:
    """Every order enriched exactly once with its customer's region; every window's last total
    as computed from the input (a replayed order would inflate a window's count and sum)."""
    orders = Counter(r.value.split(b":")[0] for r in enriched)
    assert len(orders) == N_ORDERS and max(orders.values()) == 1, "every order exactly once"
    assert all(r.value.split(b":")[1] == _region(int(r.key[1:])).encode() for r in enriched)
    last: dict[tuple[str, int], tuple[int, int]] = {}
    for r in sorted(
        read_to_end(bs, "st-totals", 3, "read_committed"), key=lambda r: (r.partition, r.offset)
    ):
        customer, start = r.key.decode().split("@")
        n, total = r.value.decode().split(":")
        last[(customer, int(start))] = (int(n), int(total))
    assert last == want_totals


def _check_internal_topics(bs: str) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bs)
    names = set(admin.list_topics())
    changelogs = [t for t in names if t.startswith("st-app-") and t.endswith("-changelog")]
    repartition = [t for t in names if t.startswith("st-app-") and t.endswith("-repartition")]
    assert changelogs and repartition, names
    for t in changelogs:
        res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])
        (configs,) = (c for by_name in res.values() for c in by_name.values())
        policy = configs["cleanup.policy"]
        value = policy.get("value") if isinstance(policy, dict) else policy
        assert "compact" in str(value), (t, policy)
    admin.close()
    c = KafkaConsumer(bootstrap_servers=bs)
    deadline = time.monotonic() + 30
    purged = 0
    while time.monotonic() < deadline and not purged:
        tps = [TopicPartition(repartition[0], p) for p in range(3)]
        purged = sum(c.beginning_offsets(tps).values())
        time.sleep(1)
    c.close()
    assert purged > 0, "Streams purges its repartition topic with DeleteRecords"
