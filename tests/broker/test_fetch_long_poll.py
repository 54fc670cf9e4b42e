"""The one-partition Fetch long poll run by callbacks (broker/handlers/delayed_fetch.py).

A real Broker object on a real event loop (its log manager, topics and HW waiters), the real
router; requests are real frames. Wire-level behaviour (wake on produce, timeout, shutdown,
min_bytes, pipelined order) is covered in test_wire_data_path.py against a running broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.fetch.v12 import request as f12
from kio.schema.fetch.v12 import response as f12r
from kio.serial import entity_reader

from tests.support.kafka_wire import make_batch, router_frame
from tidelog.broker.app import Broker
from tidelog.broker.delayed_fetch import DelayedFetch
from tidelog.broker.fetch_messages import FetchParams, FetchPartitionData, fetch_messages
from tidelog.broker.sendfile import SENDFILE_MIN_BYTES
from tidelog.config import load_broker_config
from tidelog.protocol.errors import ErrorCode


def _frame(request: Any, correlation_id: int = 5) -> bytes:
    return router_frame(request, correlation_id)


def _fetch(topic: str, offset: int, max_wait_ms: int, min_bytes: int = 1) -> bytes:
    return _frame(
        f12.FetchRequest(
            max_wait=timedelta(milliseconds=max_wait_ms),
            min_bytes=min_bytes,
            topics=(
                f12.FetchTopic(
                    topic=topic,
                    partitions=(
                        f12.FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
    )


def _decode(answer: Any) -> Any:
    data = answer if isinstance(answer, bytes) else b"".join(bytes(c) for c in answer)
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    assert int.from_bytes(data[4:8], "big") == 5
    return entity_reader(f12r.FetchResponse)(data, 9)[0].responses[0].partitions[0]


def _fetches_answered(broker: Broker) -> float:
    """``tidelog_requests_total{api="Fetch"}`` as the metrics endpoint renders it."""
    for line in broker.metrics.render().decode().splitlines():
        if line.startswith('tidelog_requests_total{api="Fetch"}'):
            return float(line.split()[-1])
    return 0.0


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Any]:
    """Run ``body(broker)`` on a loop with a started broker and a topic ``t``."""

    def runner(body: Any) -> Any:
        async def main() -> Any:
            cfg = load_broker_config(
                None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"], environ={}
            )
            broker = Broker(cfg)
            await broker.start()
            try:
                broker.topics.create_topic("t", 1, {})
                # page-cache acks: the HW follows each append (no group-commit fsync to wait for)
                broker.topics.create_topic("p", 2, {"flush.messages": "9223372036854775807"})
                return await body(broker)
            finally:
                await broker.stop()

        return asyncio.run(main())

    yield runner


def test_waits_then_answers_on_append(run: Any) -> None:
    async def body(broker: Broker) -> None:
        outcome = broker.router.dispatch(_fetch("t", 0, 10_000), "h", 1)
        assert isinstance(outcome, asyncio.Future) and not outcome.done()
        assert broker.partitions.waiting() == 1
        await asyncio.sleep(0.05)
        assert not outcome.done()
        broker.topics.get_log("t", 0).append(make_batch([b"a"]))
        broker.log_flusher.after_append(broker.topics.get_log("t", 0), 0)
        part = _decode(await asyncio.wait_for(outcome, 2))
        assert part.high_watermark == 1 and len(part.records) > 0
        assert broker.partitions.waiting() == 0

    run(body)


def test_min_bytes_keeps_waiting_across_wakes(run: Any) -> None:
    async def body(broker: Broker) -> None:
        log = broker.topics.get_log("t", 0)
        one = make_batch([b"x" * 100])
        outcome = broker.router.dispatch(_fetch("t", 0, 10_000, min_bytes=3 * len(one)), "h", 1)
        assert isinstance(outcome, asyncio.Future)
        for n in range(1, 4):
            await asyncio.sleep(0.02)
            assert not outcome.done(), n
            hw = log.high_watermark
            log.append(make_batch([b"x" * 100]))
            broker.log_flusher.after_append(log, hw)
        part = _decode(await asyncio.wait_for(outcome, 2))
        assert part.high_watermark == 3 and len(part.records) == 3 * len(one)
        assert broker.partitions.waiting() == 0

    run(body)


def test_several_partitions_wait_on_the_loop_and_answer_together(run: Any) -> None:
    """A sessionless fetch of several partitions (librdkafka's shape) takes the coroutine-free
    path too: no task; it waits, wakes on an append to any of them and answers all."""

    async def body(broker: Broker) -> None:
        broker.topics.create_topic("u", 2, {})
        partitions = tuple(
            f12.FetchPartition(partition=i, fetch_offset=0, partition_max_bytes=1 << 20)
            for i in range(2)
        )
        frame = _frame(
            f12.FetchRequest(
                max_wait=timedelta(milliseconds=10_000),
                min_bytes=1,
                topics=(
                    f12.FetchTopic(topic="t", partitions=partitions[:1]),
                    f12.FetchTopic(topic="u", partitions=partitions),
                ),
                forgotten_topics_data=(),
            )
        )
        before = _fetches_answered(broker)
        outcome = broker.router.dispatch(frame, "h", 1)
        assert isinstance(outcome, asyncio.Future) and not isinstance(outcome, asyncio.Task)
        assert broker.partitions.waiting() == 3
        await asyncio.sleep(0.05)
        assert not outcome.done()
        log = broker.topics.get_log("u", 1)
        log.append(make_batch([b"a"]))
        broker.log_flusher.after_append(log, 0)
        answer = await asyncio.wait_for(outcome, 2)
        data = answer if isinstance(answer, bytes) else b"".join(bytes(c) for c in answer)
        topics = entity_reader(f12r.FetchResponse)(data, 9)[0].responses
        got = {(t.topic, p.partition_index): p for t in topics for p in t.partitions}
        assert set(got) == {("t", 0), ("u", 0), ("u", 1)}
        assert got[("u", 1)].high_watermark == 1 and len(got[("u", 1)].records) > 0
        assert got[("t", 0)].records == b"" and got[("u", 0)].records == b""
        assert broker.partitions.waiting() == 0
        assert _fetches_answered(broker) == before + 1

    run(body)


def test_expires_empty_after_max_wait(run: Any) -> None:
    async def body(broker: Broker) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        outcome = broker.router.dispatch(_fetch("t", 0, 200), "h", 1)
        assert isinstance(outcome, asyncio.Future)
        part = _decode(await asyncio.wait_for(outcome, 5))
        assert 0.19 <= loop.time() - started < 2
        assert part.records == b"" and part.error_code == 0
        assert broker.partitions.waiting() == 0

    run(body)


def test_cancelled_poll_forgets_its_wake_and_timer(run: Any) -> None:
    """The server cancels pending answers when the connection goes."""

    async def body(broker: Broker) -> None:
        outcome = broker.router.dispatch(_fetch("t", 0, 150), "h", 1)
        assert isinstance(outcome, asyncio.Future)
        assert broker.partitions.waiting() == 1
        outcome.cancel()
        await asyncio.sleep(0.3)  # past max_wait: the timer must not fire into anything
        assert broker.partitions.waiting() == 0
        log = broker.topics.get_log("t", 0)
        log.append(make_batch([b"late"]))
        broker.log_flusher.after_append(log, 0)  # nobody listens any more
        await asyncio.sleep(0.01)

    run(body)


def test_partition_deleted_while_waiting(run: Any) -> None:
    async def body(broker: Broker) -> None:
        outcome = broker.router.dispatch(_fetch("t", 0, 10_000), "h", 1)
        assert isinstance(outcome, asyncio.Future)
        broker.topics.delete_topic("t")
        broker.partitions.notify("t", 0)  # what DeleteTopics does
        part = _decode(await asyncio.wait_for(outcome, 2))
        assert part.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION

    run(body)


def test_a_failure_while_polling_is_answered_unknown_server_error(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tidelog.broker.delayed_fetch as poll

    async def body(broker: Broker) -> None:
        outcome = broker.router.dispatch(_fetch("t", 0, 10_000), "h", 1)
        assert isinstance(outcome, asyncio.Future)

        def broken(*args: Any) -> Any:
            raise RuntimeError("bug while polling")

        monkeypatch.setattr(poll, "read_from_log", broken)
        broker.partitions.notify("t", 0)
        part = _decode(await asyncio.wait_for(outcome, 2))
        # As Kafka's readFromLog answers a partition whose read threw: UNKNOWN_SERVER_ERROR on
        # the partition, the connection kept.
        assert part.error_code == -1

    run(body)


# ---------------------------------------------------------------- fetch_messages: data back


def _append(broker: Broker, partition: int, batch: bytes) -> None:
    log = broker.topics.get_log("p", partition)
    assert log is not None
    hw = log.high_watermark
    log.append(batch)
    broker.after_append(log, hw)


def _wanted(partition: int, offset: int = 0, topic: str | None = "p") -> FetchPartitionData:
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
