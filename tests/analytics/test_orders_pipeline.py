"""The worked pipeline (scripts/orders_pipeline.py) with exactly once on local[2]: the driver
is killed mid-way and the query restarted from its checkpoint; read_committed sees every
window once. Needs broker transactions, which tidelog serves: fails (never skips) without them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.analytics.orders import (
    expected_windows,
    make_orders,
    produce_orders,
    read_windows,
    require_transactions,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]


def _pipeline(bootstrap: str, cp: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    cmd = [sys.executable, str(ROOT / "scripts" / "orders_pipeline.py"), "--master", "local[2]",
           "--bootstrap-server", bootstrap, "--checkpoint", str(cp), *extra]  # fmt: skip
    log = open(cp.parent / f"pipeline-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)  # fmt: skip


def test_killed_driver_restarts_from_checkpoint_and_writes_each_window_once(
    module_broker: Any, tmp_path: Path
) -> None:
    require_transactions(module_broker.bootstrap)
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    admin.create_topics([NewTopic("orders", 3, 1), NewTopic("orders-by-minute", 3, 1)])
    admin.close()
    orders = make_orders(3000)
    produce_orders(module_broker.bootstrap, "orders", orders)
    cp = tmp_path / "cp"
    started: list[subprocess.Popen[bytes]] = []
    try:
        _kill_and_restart(module_broker.bootstrap, cp, started, orders)
    finally:
        for proc in started:  # never leave a driver behind
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _kill_and_restart(bootstrap: str, cp: Path, started: list[subprocess.Popen[bytes]],
                      orders: list[Any]) -> None:  # fmt: skip
    first = _pipeline(bootstrap, cp, "--max-offsets-per-trigger", "300",
                      "--trigger-seconds", "1")  # fmt: skip
    started.append(first)
    deadline = time.monotonic() + 600  # Spark starts slowly on a loaded machine
    while len(list((cp / "commits").glob("[0-9]*"))) < 2 and time.monotonic() < deadline:
        assert first.poll() is None, "the pipeline stopped on its own"
        time.sleep(0.5)
    os.killpg(first.pid, signal.SIGKILL)  # the driver dies mid-way
    first.wait()
    assert len(list((cp / "commits").glob("[0-9]*"))) >= 2
    second = _pipeline(bootstrap, cp, "--available-now")
    started.append(second)
    assert second.wait(900) == 0
    want = expected_windows(orders)
    got = read_windows(bootstrap, "orders-by-minute", expect=len(want))
    assert Counter((c, w) for c, w, _, _ in got) == Counter(want.keys())  # each window once
    assert {(c, w): (n, a) for c, w, n, a in got} == want
