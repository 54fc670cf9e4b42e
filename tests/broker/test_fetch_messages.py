"""Fetch's read gives back data (broker/fetch_messages.py, broker/delayed_fetch.py).

A real Broker object on a real event loop (its logs, topics and HW waiters); the Fetch handler's
encoding of this data is covered through the router in test_fetch_long_poll.py and on the wire
in test_wire_data_path.py and test_sendfile.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka_wire import make_batch
from tidelog.broker.app import Broker
from tidelog.broker.delayed_fetch import DelayedFetch
from tidelog.broker.fetch_messages import FetchParams, FetchPartitionData, fetch_messages
from tidelog.broker.sendfile import SENDFILE_MIN_BYTES
from tidelog.config import load_broker_config
from tidelog.protocol.errors import ErrorCode


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Any]:
    """Run ``body(broker)`` on a loop with a started broker and a topic ``t`` of 2 partitions."""

    def runner(body: Any) -> Any:
        async def main() -> Any:
            cfg = load_broker_config(
                None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"], environ={}
            )
            broker = Broker(cfg)
            await broker.start()
            try:
                # page-cache acks: the HW follows each append (no group-commit fsync to wait for)
                broker.topics.create_topic("t", 2, {"flush.messages": "9223372036854775807"})
                return await body(broker)
            finally:
                await broker.stop()

        return asyncio.run(main())

    yield runner


def _append(broker: Broker, partition: int, batch: bytes) -> None:
    log = broker.topics.get_log("t", partition)
    assert log is not None
    hw = log.high_watermark
    log.append(batch)
    broker.after_append(log, hw)


def _wanted(partition: int, offset: int = 0, topic: str | None = "t") -> FetchPartitionData:
    return FetchPartitionData(topic, None, partition, offset, 1 << 20)


def test_data_there_comes_back_as_data(run: Any) -> None:
    async def body(broker: Broker) -> None:
        batch = make_batch([b"a", b"b"])
        _append(broker, 0, batch)
        result = fetch_messages(
            broker, FetchParams(1 << 20, 1, 0.5), [_wanted(0), _wanted(1), _wanted(0, 0, None)]
        )
        assert isinstance(result, list)
        first, empty, unknown = result
        assert first.error is ErrorCode.none and first.records == batch
        assert first.file_regions == () and first.high_watermark == 2
        assert empty.error is ErrorCode.none and empty.records == b""
        assert empty.high_watermark == 0
        assert unknown.error is ErrorCode.unknown_topic_id

    run(body)


def test_one_large_partition_is_sent_from_the_files(run: Any) -> None:
    async def body(broker: Broker) -> None:
        for _ in range(SENDFILE_MIN_BYTES // 50_000 + 1):
            _append(broker, 0, make_batch([b"x" * 1000] * 50))
        result = fetch_messages(broker, FetchParams(1 << 20, 1, 0.5), [_wanted(0)])
        assert isinstance(result, list)
        (data,) = result
        assert data.records == b"" and data.file_regions
        assert sum(r.length for r in data.file_regions) == data.size >= SENDFILE_MIN_BYTES

    run(body)


def test_a_wait_completes_with_the_data_through_respond(run: Any) -> None:
    async def body(broker: Broker) -> None:
        result = fetch_messages(broker, FetchParams(1 << 20, 1, 10.0), [_wanted(1)])
        assert isinstance(result, DelayedFetch)
        seen: list[tuple[list[FetchPartitionData], float]] = []

        def respond(data: list[FetchPartitionData], waited: float) -> str:
            seen.append((data, waited))
            return "answer"

        answer = result.start(respond)
        assert broker.partitions.waiting() == 1
        batch = make_batch([b"c"])
        _append(broker, 1, batch)
        assert await asyncio.wait_for(answer, 2) == "answer"
        ((data,), waited), *_ = seen
        assert data.records == batch and waited >= 0
        assert broker.partitions.waiting() == 0

    run(body)


def test_an_expired_wait_answers_empty(run: Any) -> None:
    async def body(broker: Broker) -> None:
        result = fetch_messages(broker, FetchParams(1 << 20, 1, 0.05), [_wanted(0)])
        assert isinstance(result, DelayedFetch)
        data = await asyncio.wait_for(result.start(lambda data, _waited: data), 2)
        assert data[0].error is ErrorCode.none and data[0].records == b""

    run(body)
