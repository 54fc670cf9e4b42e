"""Transactions survive broker SIGKILLs all-or-nothing (see ``txn_chaos``); ``scripts/chaos
--txn-kills N`` runs more rounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.txn_chaos import RECORDS, run_txn_chaos

pytestmark = pytest.mark.crash


def test_transactions_are_all_or_nothing_across_sigkills(tmp_path: Path) -> None:
    report = run_txn_chaos(3, work_dir=tmp_path)
    print(f"\n{report.summary()}")
    assert report.kills == 3
    assert report.ok, "\n".join(report.problems[:20])
    assert report.committed and report.visible_transactions >= len(report.committed)
    assert RECORDS > 1
