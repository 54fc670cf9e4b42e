"""Keeps the benchmark suite working: a tiny ``scripts/bench/run --quick`` against tidelog only.

Not a performance test: it checks that the suite starts the broker the way users do, drives it
with kcat and the raw latency client, and writes its JSON with figures in it. No thresholds.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "scripts" / "bench" / "run"


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_quick_suite_runs_and_writes_results(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [
            str(RUN),
            "--quick",
            "--brokers",
            "tidelog",
            "--only",
            "produce-kcat,sync-latency,durable-100",
            "--out",
            str(out),
            "--dir",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = list(out.glob("bench-*-quick.json"))
    assert len(files) == 1
    results = json.loads(files[0].read_text())
    tidelog = results["servers"]["tidelog"]
    assert tidelog["exit_code"] == 0
    produce = tidelog["workloads"]["produce-kcat"]["median"]
    assert produce["msgs_per_s"] > 0
    latency = tidelog["workloads"]["sync-latency"]["median"]
    assert 0 < latency["p50_ms"] <= latency["p99_ms"]
    durable = tidelog["workloads"]["durable-100"]["median"]
    assert durable["msgs_per_s"] > 0 and durable["plain_msgs_per_s"] > 0
    assert durable["ratio"] == pytest.approx(durable["msgs_per_s"] / durable["plain_msgs_per_s"])
    assert results["machine"]["cores"] >= 1
    assert "produce 100 B kcat, msgs/s" in proc.stdout


def test_poll_cycle_script_runs() -> None:
    """``scripts/bench/poll_cycle.py`` (the in-process long-poll cycle) still drives the router:
    every fetch waits and every produce answers at once (the script asserts both)."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench" / "poll_cycle.py"),
            *("--count", "50", "--runs", "1"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.fullmatch(
        r"cycle [0-9.]+ us, produce alone [0-9.]+ us, fetch long poll -?[0-9.]+ us"
        r"; CPU \(the loop thread's\): cycle [0-9.]+ us, produce alone [0-9.]+ us,"
        r" fetch long poll -?[0-9.]+ us\n",
        proc.stdout,
    ), proc.stdout


def test_metrics_cost_script_runs() -> None:
    """``scripts/bench/metrics_cost.py`` times every per-request metrics hook."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench" / "metrics_cost.py"),
            *("--number", "1000", "--repeat", "1"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = [line.rsplit(None, 2)[0] for line in proc.stdout.splitlines()]
    assert names == ["observe_request", "observe_request waited", "topic_in", "topic_out"]


def test_startup_workload_runs() -> None:
    """``scripts/bench/startup.py`` measures a real ``tidelog serve`` and an embedded broker
    (figures only: no thresholds here; see docs/benchmarks.md for the measured ones)."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench" / "startup.py"), "--runs", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "tidelog serve -> ApiVersions answer" in proc.stdout
    assert "native image (KIP-974)" in proc.stdout
    result = json.loads(proc.stdout[proc.stdout.index("{") :])
    median = result["median"]
    assert median["serve_ready_ms"] > 0 and median["embedded_start_ms"] > 0
    assert 0 < median["idle_rss_mb"] < 1000


def test_recovery_workload_runs(tmp_path: Path) -> None:
    """``scripts/bench/recovery.py`` on a small partition: filled, SIGKILLed while producing,
    restarted, served (a fetch of the last offset answered) after an unclean shutdown, then
    after a clean one. Figures only: the 5 GB ones are in docs/benchmarks.md."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench" / "recovery.py"),
            *("--gb", "0.05", "--dir", str(tmp_path), "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    (run,) = result["runs"]
    assert run["partition_bytes"] >= 50_000_000
    killed = run["after_sigkill"]
    assert killed["serving_s"] >= killed["listening_s"] > 0
    assert killed["log_end_offset"] > 0
    assert killed["unclean"]  # the restart recovered from the recovery point
    assert not run["after_clean_shutdown"]["unclean"]
    assert run["after_clean_shutdown"]["log_end_offset"] == killed["log_end_offset"]
    assert list(tmp_path.iterdir()) == []  # the work directory is removed


def test_transactions_wire_script_runs() -> None:
    """``scripts/bench/transactions_wire.py`` drives transactions of protocol v1 and v2 (and
    idempotent produces) through a real ``tidelog serve``."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench" / "transactions_wire.py"),
            *("--transactions", "3", "--runs", "1"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert any(line.startswith("v1: ") and "(3 round trips)" in line for line in lines)
    assert any(line.startswith("v2: ") and "(2 round trips)" in line for line in lines)


def test_soak_script_runs(tmp_path: Path) -> None:
    """``scripts/bench/soak.py`` (issue 33's mixed soak), two 10-s windows: every client ran
    without errors, the broker's metrics were scraped, the goal lines were printed (no
    thresholds here: the figures depend on the machine's load)."""
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    report = tmp_path / "soak.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench" / "soak.py"),
            *("--seconds", "20", "--json", str(report)),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = json.loads(report.read_text())["runs"][-1]
    assert len(run["windows"]) == 2
    clients = run["clients"]
    for tag in ("producer-soak-a", "producer-soak-b", "producer-soak-c"):
        assert clients[tag]["errors"] == 0 and clients[tag]["delivered"] > 1000, clients
    for tag in ("consumer-soak-g1", "consumer-soak-g2"):
        assert clients[tag]["errors"] == 0 and clients[tag]["consumed"] > 0, clients
    assert clients["txn"]["transactions"] >= 10 and clients["churn"]["connects"] >= 10
    assert clients["admin"]["rounds"] >= 3
    summary = run["summary"]
    assert summary["produce_per_s"] > 100 and summary["fetch_per_s"] > 0
    assert summary["cpu_us_per_request"] > 0
    assert re.search(r"broker CPU per request <= 150 us: \d+ us: (met|NOT met)", proc.stdout)
    assert re.search(
        r"Produce p99 <= 5 ms \(worst 10-s window\): [\d.]+ ms: (met|NOT met)", proc.stdout
    )
