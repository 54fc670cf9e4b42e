"""Keeps ``scripts/bench/request_floor.py`` working (a tiny run; no thresholds)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_request_floor_prints_its_three_figures() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/bench/request_floor.py"), "--count", "300",
         "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = dict(re.findall(r"^\| (floor|tidelog) \| (\d+) \|", proc.stdout, re.M))
    assert set(rows) == {"floor", "tidelog"}, proc.stdout
    assert all(int(v) > 0 for v in rows.values())
    dispatch = re.search(r"thread CPU: ([0-9.]+) us", proc.stdout)
    assert dispatch is not None and float(dispatch.group(1)) > 0, proc.stdout
