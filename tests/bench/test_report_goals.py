"""The suite's report prints issue 41's goals as ratios to the best peer of the same run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"

RESULTS = """{'servers': {
  'tidelog': {'peak_rss_mb': 39, 'workloads': {
     'consume-kcat': {'median': {'msgs_per_s': 1200000, 'broker_cpu_s': 1.0}},
     'produce-kcat': {'median': {'msgs_per_s': 1760000, 'broker_cpu_s': 2.0}},
     'sync-produce-plain': {'median': {'p50_ms': 0.18, 'p99_ms': 0.40}}}},
  'kafka': {'peak_rss_mb': 314, 'workloads': {
     'consume-kcat': {'median': {'msgs_per_s': 1300000, 'broker_cpu_s': 4.0}},
     'sync-produce': {'median': {'p50_ms': 0.30, 'p99_ms': 1.40}}}},
  'noida': {'peak_rss_mb': 3338, 'workloads': {
     'produce-kcat': {'median': {'msgs_per_s': 1620000, 'broker_cpu_s': 9.0}},
     'sync-produce': {'median': {'p50_ms': 0.055, 'p99_ms': 0.30}}}}}}"""


def test_each_goal_is_a_ratio_to_the_best_peer_with_its_verdict() -> None:
    code = f"import report; print('\\n'.join(report.peer_ratios({RESULTS})))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=BENCH, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [
        "kcat produce 100 B, msg/s: tidelog 1,760,000 / noida 1,620,000 = 1.09x (goal >= 1x): met",
        "kcat consume, msg/s: tidelog 1,200,000 / kafka 1,300,000 = 0.92x (goal >= 1x): NOT met",
        "sync produce p50, ms: tidelog 0.180 / noida 0.055 = 3.27x (goal <= 1.5x): NOT met",
        "sync produce p99, ms: tidelog 0.400 / noida 0.300 = 1.33x (goal <= 1.5x): met",
        "broker CPU, the workloads both ran, s: tidelog 1.0 / kafka 4.0 = 0.25x "
        "(goal <= 1x, stays ahead): met",
        "peak RSS, MiB: tidelog 39 / kafka 314 = 0.12x (goal <= 1x, stays ahead): met",
    ]
