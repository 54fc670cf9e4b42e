"""Orders for the pipeline tests (scripts/orders_pipeline.py): what to produce, and which
windows the output topic must hold."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

T0 = 1_700_000_040_000  # a minute boundary (ms)
MINUTES = 6
CUSTOMERS = 5
Order = tuple[str, float, int]  # customer, amount, timestamp ms


def make_orders(n: int) -> list[Order]:
    return [(f"c{i % CUSTOMERS}", (i % 7) + 0.5, T0 + (i * MINUTES * 60_000) // n)
            for i in range(n)]  # fmt: skip


def produce_orders(bootstrap: str, topic: str, orders: list[Order]) -> None:
    """The orders, then one late `tick` order whose event time closes every window."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    tick = ("tick", 0.0, T0 + (MINUTES + 5) * 60_000)
    futures = [p.send(topic, key=c.encode(), value=json.dumps({"amount": a}).encode(),
                      timestamp_ms=ts) for c, a, ts in [*orders, tick]]  # fmt: skip
    p.flush()
    for f in futures:
        f.get(timeout=30)
    p.close()


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expected_windows(orders: list[Order]) -> dict[tuple[str, str], tuple[int, float]]:
    counts: Counter[tuple[str, str]] = Counter()
    sums: dict[tuple[str, str], float] = {}
    for c, a, ts in orders:
        w = (c, _iso(ts - ts % 60_000))
        counts[w] += 1
        sums[w] = sums.get(w, 0.0) + a
    return {w: (counts[w], round(sums[w], 2)) for w in counts}


Window = tuple[str, str, int, float]  # customer, window start, orders, amount


def read_windows(bootstrap: str, topic: str, isolation: str = "read_committed",
                 expect: int = 0, wait_s: float = 60) -> list[Window]:  # fmt: skip
    """Every window record of the output topic (duplicates kept), keyed as written."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      isolation_level=isolation)  # fmt: skip
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
    c.assign(tps)
    c.seek_to_beginning()
    out: list[Window] = []
    deadline = time.monotonic() + wait_s
    end = c.end_offsets(tps)
    while time.monotonic() < deadline:
        for batch in c.poll(timeout_ms=500).values():
            for r in batch:
                v: dict[str, Any] = json.loads(r.value)
                assert r.key.decode() == v["customer"]
                out.append((v["customer"], v["window_start"], v["orders"], v["amount"]))
        if len(out) >= expect and all(c.position(tp) >= end[tp] for tp in tps):
            break
    c.close()
    return out


def require_transactions(bootstrap: str) -> None:
    """Fail unless InitProducerId with a transactional id succeeds: tidelog serves transactions,
    so the exactly-once tests run, never skip."""
    import pytest

    from tidelog.analytics.transactions import TransactionsUnsupported, check_transactions

    try:
        check_transactions({"bootstrap_servers": [bootstrap]}, timeout_ms=5000)
    except TransactionsUnsupported as e:
        pytest.fail(f"exactly once needs broker transactions, which tidelog serves: {e}")
