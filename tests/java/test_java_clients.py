"""The Apache Java client 4.x (tests/jvm/clients, kafka-clients 4.4.0) against a real tidelog
broker: one JVM per Java program, each printing one machine-checkable line per check
("CHECK name ok ..." / "CHECK name FAIL why", "ADMIN method ok|error Exception ...")."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.java.admin_table import ADMIN_ROWS, ADMIN_TABLE
from tests.support.jvm import java_bin, jvm_set_classpath

pytestmark = [pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]


def run_program(main: str, *args: str, timeout: float = 420) -> list[str]:
    """Run tidelog.jvm.<main> with the clients classpath; its stdout lines (stderr on failure)."""
    cp = jvm_set_classpath("clients")
    cmd = [str(java_bin()), "-Xmx256m", "-XX:TieredStopAtLevel=1",
           "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, f"tidelog.jvm.{main}",
           *args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and "DONE" in (lines[-1] if lines else ""), (
        f"{main} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return lines


def checks(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        if line.startswith("CHECK "):
            _, name, rest = line.split(" ", 2)
            out[name] = rest
    return out


def test_idempotent_producer_every_codec_and_both_group_protocols(module_broker: Any) -> None:
    got = checks(run_program("ProduceConsume", module_broker.bootstrap))
    want = [f"produce-consume-{c}" for c in ("none", "gzip", "snappy", "lz4", "zstd")]
    want += ["group-classic", "group-consumer"]
    assert sorted(got) == sorted(want)
    failed = {k: v for k, v in got.items() if not v.startswith("ok")}
    assert not failed, failed


def test_transactions_v2_commit_abort_offsets_fencing(module_broker: Any) -> None:
    got = checks(run_program("Transactions", module_broker.bootstrap))
    assert sorted(got) == sorted(["transaction-version", "commit-abort-read-committed",
                                  "send-offsets-to-transaction", "fencing"])  # fmt: skip
    failed = {k: v for k, v in got.items() if not v.startswith("ok")}
    assert not failed, failed
    assert got["transaction-version"] == "ok finalized=2"  # the client runs transaction version 2


def test_admin_coverage_table(module_broker: Any) -> None:
    """Every Admin method: working, or answering the error listed in docs/java-clients.md."""
    lines = run_program("AdminCoverage", module_broker.bootstrap)
    got = {}
    for line in lines:
        if line.startswith("ADMIN "):
            _, method, outcome, *rest = line.split(" ", 3)
            got[method] = outcome if outcome == "ok" else rest[0].split()[0]
    assert got == ADMIN_TABLE, "\n".join(x for x in lines if x.startswith("ADMIN"))
    # Admin.describeFeatures: the finalized features' names (levels: tests/kafkaref's
    # test_features_as_kafka)
    (features,) = [x for x in lines if x.startswith("ADMIN describeFeatures ok ")]
    names = features.removeprefix("ADMIN describeFeatures ok ").strip("[]").split(", ")
    assert sorted(names) == [
        "group.version",
        "share.version",
        "streams.version",
        "transaction.version",
    ], features


def test_admin_table_is_in_the_docs() -> None:
    text = (ROOT / "docs" / "java-clients.md").read_text()
    for method, (ours, kafka, note) in ADMIN_ROWS.items():
        assert f"| `{method}` | {ours} | {kafka} | {note} |" in text, method
