"""broker/log_flusher.py: group-commit fsync threads hand their outcome back to the loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.storage.batches import simple_batch
from tidelog.broker.log_flusher import Flusher, LogFlusher
from tidelog.broker.purgatory import HeldAnswers, HighWatermarkWaiters
from tidelog.storage import PartitionLog
from tidelog.storage.config import LogConfig


async def _run(flusher: Flusher, fn: Any) -> tuple[Any, BaseException | None, bool]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[tuple[Any, BaseException | None, bool]] = loop.create_future()

    def finished(result: Any, error: BaseException | None) -> None:
        on_loop = threading.get_ident() == loop_thread
        done.set_result((result, error, on_loop))

    loop_thread = threading.get_ident()
    flusher.submit(fn, finished)
    return await asyncio.wait_for(done, 10)


def test_result_and_error_come_back_on_the_loop() -> None:
    flusher = Flusher(2)

    async def main() -> None:
        worker: list[int] = []

        def job() -> int:
            worker.append(threading.get_ident())
            return 42

        assert await _run(flusher, job) == (42, None, True)
        assert worker[0] != threading.get_ident()

        def fails() -> int:
            raise OSError("disk gone")

        result, error, on_loop = await _run(flusher, fails)
        assert result is None and isinstance(error, OSError) and on_loop

    try:
        asyncio.run(main())
    finally:
        flusher.shutdown()


def test_threads_start_only_when_all_are_busy() -> None:
    flusher = Flusher(4)

    async def main() -> None:
        for _ in range(20):  # one at a time: one thread is enough
            assert (await _run(flusher, lambda: 1))[0] == 1
        assert len(flusher._threads) == 1
        gate = threading.Event()
        loop = asyncio.get_running_loop()
        outcomes: list[asyncio.Future[Any]] = []
        for _ in range(6):  # six blocked jobs at once: up to four threads
            fut: asyncio.Future[Any] = loop.create_future()
            outcomes.append(fut)
            flusher.submit(gate.wait, lambda r, e, f=fut: f.set_result((r, e)))
            await asyncio.sleep(0.05)
        assert len(flusher._threads) == 4
        gate.set()
        assert [r for r, _ in await asyncio.gather(*outcomes)] == [True] * 6

    try:
        asyncio.run(main())
    finally:
        flusher.shutdown()


def test_shutdown_finishes_queued_jobs_then_refuses() -> None:
    flusher = Flusher(1)
    ran: list[int] = []

    async def main() -> None:
        await _run(flusher, lambda: ran.append(1))
        flusher.shutdown()
        with pytest.raises(RuntimeError):
            flusher.submit(lambda: None, lambda r, e: None)

    asyncio.run(main())
    assert ran == [1]
    assert flusher._threads == []


def _durable_log(tmp_path: Path) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", LogConfig(flush_messages=1), clock=lambda: 1_000)


def test_an_answer_is_released_by_the_fsync_that_covers_it(tmp_path: Path) -> None:
    """The acknowledgement policy: an append starts the fsync; only its outcome moves the HW,
    releases the held answer and wakes the HW waiters; ``drain`` waits for the flush."""
    partition_log = _durable_log(tmp_path)
    flusher = Flusher(1)
    held, waiters = HeldAnswers(), HighWatermarkWaiters()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        policy = LogFlusher(
            flusher,
            held,
            waiters.notify,
            lambda: 1_000,
            logs=lambda: [partition_log],
            run_blocking=lambda fn, *args: loop.run_in_executor(None, fn, *args),
        )
        hw_before = partition_log.high_watermark
        info = partition_log.append(simple_batch(3), now_ms=1_000)
        end = info.last_offset + 1
        answer = held.hold(("t", 0), end, loop.time() + 10, b"ok", _error_answer)
        woken = asyncio.ensure_future(waiters.wait_any([("t", 0)], 10))
        await asyncio.sleep(0)  # the waiter is registered
        policy.after_append(partition_log, hw_before)
        assert partition_log.high_watermark == hw_before  # held back until the fsync returns
        assert policy.in_flight() == 1
        assert await asyncio.wait_for(answer, 10) == b"ok"
        assert partition_log.high_watermark == end
        assert await woken
        await asyncio.wait_for(policy.drain(), 10)
        assert policy.in_flight() == 0 and held.held() == 0

    try:
        asyncio.run(main())
    finally:
        flusher.shutdown()
        partition_log.close()


def test_a_deleted_partition_answers_its_held_answers(tmp_path: Path) -> None:
    flusher = Flusher(1)
    held = HeldAnswers()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        policy = LogFlusher(
            flusher,
            held,
            lambda _t, _p: None,
            lambda: 1_000,
            logs=list,
            run_blocking=lambda fn, *args: loop.run_in_executor(None, fn, *args),
        )
        answer = held.hold(("t", 0), 5, loop.time() + 10, b"ok", _error_answer)
        policy.partition_removed("t", 0)
        assert await answer == b"error 3"  # UNKNOWN_TOPIC_OR_PARTITION

    try:
        asyncio.run(main())
    finally:
        flusher.shutdown()


def _error_answer(code: int, _message: str) -> bytes:
    return f"error {code}".encode()
