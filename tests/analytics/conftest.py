"""Fixtures of the analytics tests: a real tidelog broker in a subprocess, one SparkSession.

The broker writes its high-watermark checkpoint every second here, so the file path (which
reads only below the checkpointed HW) sees what was produced within a second or two.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Broker:
    bootstrap: str
    log_dir: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def replay_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    log_dir = tmp_path_factory.mktemp("replay-logs")
    port = _free_port()
    cmd = [
        sys.executable, "-c", "import sys; from broker.cli import main; sys.exit(main())",
        "serve", "--override", f"log.dirs={log_dir}",
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override", "log.flush.offset.checkpoint.interval.ms=1000",
        "--log-level", "WARNING",
    ]  # fmt: skip
    out = open(log_dir.parent / f"broker-{port}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out.flush()
                    text = Path(out.name).read_text()[-2000:]
                    pytest.fail(f"the broker did not start (exit {proc.poll()}):\n{text}")
                time.sleep(0.1)
        yield Broker(f"127.0.0.1:{port}", log_dir)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.close()


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import analytics

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tidelog-analytics-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    analytics.register(session)
    yield session
    session.stop()
