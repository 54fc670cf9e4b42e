"""broker.purgatory.HighWatermarkWaiters on a real event loop."""

from __future__ import annotations

import asyncio

from tidelog.broker.purgatory import HighWatermarkWaiters


def test_notify_wakes_waiters_of_that_partition_only() -> None:
    async def main() -> None:
        waiters = HighWatermarkWaiters()
        loop = asyncio.get_running_loop()
        a = asyncio.ensure_future(waiters.wait_any([("t", 0), ("t", 1)], 5))
        b = asyncio.ensure_future(waiters.wait_any([("u", 0)], 0.2))
        await asyncio.sleep(0.01)
        assert waiters.waiting() == 3
        started = loop.time()
        waiters.notify("t", 1)
        assert await a is True
        assert loop.time() - started < 0.1
        assert await b is False  # timed out, never notified
        assert waiters.waiting() == 0  # every registration was removed

    asyncio.run(main())


def test_wait_until_rechecks_condition_on_each_notify() -> None:
    async def main() -> None:
        waiters = HighWatermarkWaiters()
        hw = {"value": 0}
        task = asyncio.ensure_future(waiters.wait_until(("t", 0), lambda: hw["value"] >= 3, 5))
        for value in (1, 2, 3):
            await asyncio.sleep(0.01)
            hw["value"] = value
            waiters.notify("t", 0)
        assert await task is True
        assert await waiters.wait_until(("t", 0), lambda: False, 0.05) is False
        assert waiters.waiting() == 0

    asyncio.run(main())


def test_zero_timeout_does_not_register() -> None:
    async def main() -> None:
        waiters = HighWatermarkWaiters()
        assert await waiters.wait_any([("t", 0)], 0) is False
        assert waiters.waiting() == 0

    asyncio.run(main())
