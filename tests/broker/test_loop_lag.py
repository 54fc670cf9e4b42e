"""broker/loop_lag.py: the event-loop watchdog sees a blocked loop and shows it in the metrics."""

from __future__ import annotations

import asyncio
import logging
import re
import time

import pytest

from tidelog.broker.loop_lag import LoopLag, running_loop
from tidelog.broker.metrics import Metrics


def test_a_blocked_loop_is_measured_logged_and_scraped(caplog: pytest.LogCaptureFixture) -> None:
    lag = LoopLag(stall_ms=50)
    metrics = Metrics()
    metrics.extra_families.append(lag.families)

    async def main() -> None:
        await lag.start()
        await asyncio.sleep(0.05)
        time.sleep(0.2)  # a callback that blocks the loop for 200 ms
        await asyncio.sleep(0.05)
        await lag.stop()

    with caplog.at_level(logging.WARNING, logger="tidelog.loop"):
        asyncio.run(main())
    assert lag.stalls >= 1  # this one (a loaded machine may add its own)
    assert 0.15 <= lag.worst_s < 1.0
    assert any("the event loop was blocked for" in r.getMessage() for r in caplog.records)
    text = metrics.render().decode()
    m = re.search(r"^tidelog_event_loop_lag_seconds (\S+)$", text, re.M)
    assert m is not None and float(m.group(1)) >= 0.15
    assert re.search(r"^tidelog_event_loop_stalls_total [1-9]", text, re.M)
    # read once: the gauge starts over after a scrape
    assert lag.max_s == 0.0


def test_running_loop_is_the_running_loop_of_each_run_and_raises_outside() -> None:
    async def which() -> tuple[asyncio.AbstractEventLoop, asyncio.AbstractEventLoop]:
        return running_loop(), asyncio.get_running_loop()

    for _ in range(2):  # a second loop in the same thread replaces the kept one
        found, running = asyncio.run(which())
        assert found is running
    with pytest.raises(RuntimeError):
        running_loop()
