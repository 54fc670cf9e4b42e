"""Load and limits: a thousand connections, connection quotas, idle connections, a stalled reader.

- 1,000 connections held at once, each doing Metadata, Produce (acks=-1) and Fetch, all
  answered correctly; the broker's RSS stays bounded.
- ``max.connections`` / ``max.connections.per.ip``: a connection over either limit is closed
  as soon as it is accepted (unanswered), and closing a connection frees its slot.
- ``connections.max.idle.ms``: a silent connection is closed; one that keeps talking, or that
  waits for a long-poll answer, is not.
- Backpressure: clients that pipeline large fetches and never read stall only themselves;
  another client's produce/fetch round trips stay fast, and memory stays bounded.
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.fuzz_harness import RssWatch
from tests.load.load_clients import Conn, api_versions, fetch, metadata, produce
from tests.support.broker_process import BrokerProcess
from tests.support.fault_wire import create_topic_request
from tidelog.broker.kafka_channel import MAX_IN_FLIGHT
from tidelog.broker.server import WRITE_HIGH_WATER

CONNECTIONS = 1000
RSS_GROWTH_LIMIT_MIB = 300


def _raise_fd_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


@pytest.fixture
def started(tmp_path: Path) -> Any:
    brokers: list[BrokerProcess] = []

    def start(overrides: dict[str, str]) -> BrokerProcess:
        data = tmp_path / f"broker{len(brokers)}"
        data.mkdir()
        b = BrokerProcess(data, {"auto.create.topics.enable": "false", **overrides})
        brokers.append(b)
        return b.start()

    yield start
    for b in brokers:
        if b.running:
            assert b.stop() == 0, b.log_text()[-3000:]


async def _create(bootstrap: str, topic: str, partitions: int) -> None:
    conn = await Conn.open(bootstrap)
    answer = await conn.call(create_topic_request(topic, partitions=partitions))
    assert answer.topics[0].error_code == 0
    await conn.close()


def test_a_thousand_connections_doing_metadata_produce_fetch(started: Any) -> None:
    _raise_fd_limit(CONNECTIONS + 500)
    broker = started({"num.partitions": "8"})
    assert broker.proc is not None
    rss = RssWatch(broker.proc.pid)
    rss.start()

    async def one(i: int, conns: list[Conn], gate: asyncio.Event) -> tuple[int, int]:
        conn = await Conn.open(broker.bootstrap)
        conns.append(conn)
        await gate.wait()  # every connection is open before anyone asks anything
        topics = (await conn.call(metadata(["load"]))).topics
        assert topics[0].error_code == 0 and len(topics[0].partitions) == 8
        partition = i % 8
        value = f"conn-{i}".encode()
        answer = (await conn.call(produce("load", partition, [value]))).responses[0]
        base = answer.partition_responses[0].base_offset
        assert answer.partition_responses[0].error_code == 0
        got = (await conn.call(fetch("load", partition, base))).responses[0].partitions[0]
        assert got.error_code == 0 and value in bytes(got.records)
        return partition, base

    async def main() -> tuple[int, list[tuple[int, int]], float]:
        await _create(broker.bootstrap, "load", 8)
        conns: list[Conn] = []
        gate = asyncio.Event()
        tasks = [asyncio.ensure_future(one(i, conns, gate)) for i in range(CONNECTIONS)]
        deadline = time.monotonic() + 60
        while len(conns) < CONNECTIONS and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        held = len(conns)
        started_at = time.monotonic()
        gate.set()
        results = await asyncio.wait_for(asyncio.gather(*tasks), 120)
        elapsed = time.monotonic() - started_at
        await asyncio.gather(*(c.close() for c in conns))
        return held, results, elapsed

    held, results, elapsed = asyncio.run(main())
    rss.stop()
    growth = (rss.peak_kib - rss.start_kib) / 1024
    print(
        f"\nload: {held} connections held at once, {3 * len(results)} requests answered in "
        f"{elapsed:.1f} s, broker RSS {rss.start_kib // 1024} -> {rss.peak_kib // 1024} MiB"
    )
    assert held == CONNECTIONS
    # Every produce got its own offset: 1000 appends, none lost or doubled.
    assert len(set(results)) == CONNECTIONS
    for partition in range(8):
        bases = sorted(b for p, b in results if p == partition)
        assert bases == list(range(len(bases)))
    assert growth < RSS_GROWTH_LIMIT_MIB, f"RSS grew by {growth:.0f} MiB"


async def _admitted_after_close(bootstrap: str, timeout_s: float = 10.0) -> Conn:
    """A new connection the broker serves, once it has seen a closed one go (it frees the slot
    when it reads the close: wait for that, not for a time)."""
    deadline = time.monotonic() + timeout_s
    while True:
        conn = await Conn.open(bootstrap)
        try:
            if (await conn.call(api_versions(), timeout=5)).error_code == 0:
                return conn
        except ConnectionError:
            pass  # still over the quota: closed on accept
        await conn.close()
        assert time.monotonic() < deadline, "the closed connection's slot was never freed"


def test_connection_quotas_close_on_accept_and_free_on_close(started: Any) -> None:
    broker = started({"max.connections": "8", "max.connections.per.ip": "5"})

    async def main() -> None:
        first = [await Conn.open(broker.bootstrap) for _ in range(5)]
        for c in first:
            assert (await c.call(api_versions())).error_code == 0
        # A sixth from 127.0.0.1 is over max.connections.per.ip: closed unanswered.
        extra = await Conn.open(broker.bootstrap)
        extra.send(api_versions())
        assert await extra.closed_by_broker(5)
        # Another address still gets in, up to max.connections (8) in all.
        other = [await Conn.open(broker.bootstrap, source="127.0.0.2") for _ in range(3)]
        for c in other:
            assert (await c.call(api_versions())).error_code == 0
        over = await Conn.open(broker.bootstrap, source="127.0.0.2")
        over.send(api_versions())
        assert await over.closed_by_broker(5)
        # Closing frees the slot (per IP and in all).
        await first[0].close()
        again = await _admitted_after_close(broker.bootstrap)
        for c in [*first[1:], *other, again]:
            assert (await c.call(api_versions())).error_code == 0  # the admitted ones serve on
            await c.close()
        await extra.close()
        await over.close()

    asyncio.run(main())
    log = broker.log_text()
    assert "max.connections.per.ip (5)" in log and "max.connections (8) reached" in log


def test_idle_connections_are_closed(started: Any) -> None:
    broker = started({"connections.max.idle.ms": "600"})

    async def main() -> None:
        await _create(broker.bootstrap, "idle", 1)
        silent = await Conn.open(broker.bootstrap)
        talking = await Conn.open(broker.bootstrap)
        polling = await Conn.open(broker.bootstrap)
        # A long poll (1.5 s, no data) is an answer owed: not idle while it waits.
        long_poll = polling.send(fetch("idle", 0, 0, wait_ms=1500))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.0:
            assert (await talking.call(api_versions())).error_code == 0
            await asyncio.sleep(0.1)
        assert silent._task.done(), "a silent connection outlived connections.max.idle.ms"
        answer = await asyncio.wait_for(long_poll, 5)
        assert answer.responses[0].partitions[0].error_code == 0
        assert await polling.closed_by_broker(3)  # idle once answered
        assert not talking._task.done()
        for c in (silent, talking, polling):
            await c.close()

    asyncio.run(main())


STALLED = 3
STALLED_FETCH_BYTES = 256 * 1024


def test_a_stalled_reader_does_not_slow_the_others(started: Any) -> None:
    """Three clients pipeline fetches and never read: another client's round trips stay fast,
    and the broker holds at most MAX_IN_FLIGHT answers per stalled connection."""
    broker = started({"num.partitions": "1"})
    assert broker.proc is not None

    async def main() -> tuple[list[float], int]:
        await _create(broker.bootstrap, "big", 1)
        await _create(broker.bootstrap, "small", 1)
        writer = await Conn.open(broker.bootstrap)
        chunk = [bytes(range(256)) * 400] * 10  # ~1 MiB per batch
        for _ in range(16):
            answer = await writer.call(produce("big", 0, chunk))
            assert answer.responses[0].partition_responses[0].error_code == 0
        rss = RssWatch(broker.proc.pid)  # type: ignore[union-attr]
        rss.start()
        stalled = []
        for _ in range(STALLED):
            conn = await Conn.open(broker.bootstrap)
            conn._task.cancel()  # nobody reads this socket
            for i in range(2 * MAX_IN_FLIGHT):
                conn.send(fetch("big", 0, (i % 16) * 10, max_bytes=STALLED_FETCH_BYTES))
            stalled.append(conn)
        latencies = []
        fast = await Conn.open(broker.bootstrap)
        for i in range(200):
            t = time.monotonic()
            answer = await fast.call(produce("small", 0, [b"x%d" % i]), timeout=10)
            offset = answer.responses[0].partition_responses[0].base_offset
            got = await fast.call(fetch("small", 0, offset), timeout=10)
            assert got.responses[0].partitions[0].error_code == 0
            latencies.append(time.monotonic() - t)
        await asyncio.sleep(0.5)
        rss.stop()
        for conn in [*stalled, fast, writer]:
            await conn.close()
        return latencies, (rss.peak_kib - rss.start_kib) // 1024

    latencies, growth = asyncio.run(main())
    p99 = sorted(latencies)[int(len(latencies) * 0.99) - 1]
    # Each stalled connection holds its unwritten answers: at most MAX_IN_FLIGHT of them (plus
    # the transport's write buffer). Batches are ~1 MiB, so an answer is one whole batch.
    bound_mib = STALLED * (MAX_IN_FLIGHT * 1.1 + WRITE_HIGH_WATER / 2**20) + 64
    print(
        f"\nbackpressure: {STALLED} stalled readers x {2 * MAX_IN_FLIGHT} fetches; another "
        f"client's round trip median {statistics.median(latencies) * 1000:.1f} ms, p99 "
        f"{p99 * 1000:.1f} ms; broker RSS +{growth} MiB (bound {bound_mib:.0f} MiB)"
    )
    assert p99 < 0.25, f"p99 round trip {p99 * 1000:.0f} ms"
    assert growth < bound_mib, f"RSS grew by {growth} MiB"


def test_one_fetch_never_answers_more_than_fetch_max_bytes(started: Any) -> None:
    broker = started({"fetch.max.bytes": str(1 << 20)})

    async def main() -> int:
        await _create(broker.bootstrap, "wide", 1)
        conn = await Conn.open(broker.bootstrap)
        for _ in range(8):  # 8 batches of ~500 KiB
            await conn.call(produce("wide", 0, [bytes(range(256)) * 200] * 10))
        answer = await conn.call(fetch("wide", 0, 0, max_bytes=2**31 - 1))
        await conn.close()
        return len(answer.responses[0].partitions[0].records)

    size = asyncio.run(main())
    assert 0 < size <= 1 << 20, size
