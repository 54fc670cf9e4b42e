"""Transactions survive broker SIGKILLs all-or-nothing, and a consume-transform-produce stage
copies every record once (see ``txn_chaos``); ``scripts/chaos --kills 0 --txn-kills N`` runs
more rounds, and the slow test runs 200 (figures in docs/transactions.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.txn_chaos import RECORDS, TxnChaosReport, run_txn_chaos

pytestmark = pytest.mark.crash


def _check(report: TxnChaosReport, kills: int) -> None:
    print(f"\n{report.summary()}")
    assert report.kills == kills
    assert report.ok, "\n".join(report.problems[:20])
    assert report.committed and report.visible_transactions >= len(report.committed)
    assert report.copied_records == report.visible_transactions * RECORDS


def test_transactions_are_all_or_nothing_across_sigkills(tmp_path: Path) -> None:
    _check(run_txn_chaos(3, work_dir=tmp_path), 3)


@pytest.mark.slow
@pytest.mark.timeout(3 * 3600)
def test_transactions_survive_200_sigkills(tmp_path: Path) -> None:
    _check(run_txn_chaos(200, work_dir=tmp_path, seed=37), 200)
