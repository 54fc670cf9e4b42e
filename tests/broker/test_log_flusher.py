"""broker/log_flusher.py: group-commit fsync threads hand their outcome back to the loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tidelog.broker.log_flusher import Flusher


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
