"""Crash consistency: SIGKILL under load loses no acknowledged record (see ``crash_harness``).

The default run does a few kills (about 30 s); the ``slow`` one 30 (``scripts/chaos --kills N``
runs as many as asked). ``CHAOS_SEED`` replays a run; every run prints its seed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.crash.crash_harness import ChaosReport, run_chaos

pytestmark = pytest.mark.crash


def _seed() -> int | None:
    value = os.environ.get("CHAOS_SEED")
    return int(value) if value else None


def _check(report: ChaosReport, kills: int) -> None:
    print(f"\n{report.summary()}")
    assert report.kills >= kills, report.summary()
    assert report.ok, "\n".join(report.problems[:20])
    assert report.lost == 0 and report.duplicates == 0 and report.changed == 0
    assert report.acked > 0 and report.acked_checks >= report.acked
    assert report.commits_checked > 0, "no offset commit was acknowledged before a kill"
    assert report.segments_checked > 0 and report.lookups > 0
    assert report.retention_deletions > 0, "retention never ran during the rounds"


def test_acknowledged_records_survive_sigkill(tmp_path: Path) -> None:
    _check(run_chaos(4, seed=_seed(), work_dir=tmp_path), 4)


@pytest.mark.slow
def test_acknowledged_records_survive_many_sigkills(tmp_path: Path) -> None:
    _check(run_chaos(30, seed=_seed(), work_dir=tmp_path, startup_kill_chance=0.2), 30)
