"""Kafka reads tidelog's files: Apache Kafka's own segment dumper
(``org.apache.kafka.tools.DumpLogSegments``, what ``kafka-dump-log.sh`` runs) on the files a
tidelog broker wrote (plain, every codec, idempotent, transactional with an abort, compacted with
tombstones, records deleted, a group's offsets, a transaction log) exits 0, reports nothing wrong
with any index, and prints exactly what ``tidelog dump-log`` prints for the same files.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.jvm import jvm_set_classpath
from tests.support.kafka_reference import log4j_config, run_java
from tests.support.sample_logs import tidelog_dump_log, write_sample

pytestmark = pytest.mark.integration

DUMPER = "org.apache.kafka.tools.DumpLogSegments"
KINDS = (".log", ".index", ".timeindex", ".snapshot", ".txnindex")


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data = tmp_path_factory.mktemp("tidelog_files") / "data"
    data.mkdir()
    broker = BrokerProcess(data, {"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        write_sample(broker.bootstrap, "kr")
    finally:
        assert broker.stop() == 0, broker.log_text()[-3000:]  # clean stop: snapshots written
    yield data


def _files(log_dir: Path, *patterns: str) -> str:
    found = sorted(
        str(f)
        for pattern in patterns
        for f in log_dir.glob(pattern)
        if f.suffix in KINDS and f.stat().st_size >= 0
    )
    assert found, patterns
    return ",".join(found)


def _one_nonempty(log_dir: Path, topic: str) -> str:
    logs = [f for f in log_dir.glob(f"{topic}-*/*.log") if f.stat().st_size > 0]
    assert len(logs) == 1, logs
    return str(logs[0])


def _both(log_dir: Path, *args: str) -> str:
    classpath = jvm_set_classpath("kafka")
    kafka = run_java(classpath, DUMPER, *args, log4j=log4j_config(log_dir.parent), check=False)
    ours = tidelog_dump_log(*args)
    assert kafka.returncode == 0, kafka.stdout[-3000:] + kafka.stderr[-3000:]
    for text in (kafka.stdout, kafka.stderr):
        for word in ("Exception", "mismatch", "Mismatch", "corrupt", "isvalid: false"):
            assert word not in text, text[-3000:]
    assert ours.stdout.splitlines() == kafka.stdout.splitlines()
    return kafka.stdout


def test_segments_deep(log_dir: Path) -> None:
    out = _both(
        log_dir, "--deep-iteration", "--print-data-log", "--files", _files(log_dir, "kr-*/*")
    )
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        assert f"compresscodec: {codec}" in out
    assert "endTxnMarker: ABORT" in out and "endTxnMarker: COMMIT" in out
    assert "producerId:" in out and "isTransactional: true" in out
    # a transaction marker carries the leader epoch, as Kafka's leader writes it
    markers = [line for line in out.splitlines() if "isControl: true" in line]
    assert markers and all("partitionLeaderEpoch: 0 " in line for line in markers), markers
    assert "version: 0 producerId: " in out and " firstOffset: " in out  # the .txnindex entry
    assert "currentTxnFirstOffset: " in out  # the .snapshot entries


def test_indexes_verify(log_dir: Path) -> None:
    _both(
        log_dir,
        "--verify-index-only",
        "--files",
        _files(log_dir, "kr-*/*.index", "kr-*/*.timeindex"),
    )


def test_consumer_offsets(log_dir: Path) -> None:
    out = _both(
        log_dir, "--offsets-decoder", "--files", _one_nonempty(log_dir, "__consumer_offsets")
    )
    assert '"group":"kr-group"' in out and '"offset":7' in out


def test_transaction_log(log_dir: Path) -> None:
    out = _both(
        log_dir,
        "--transaction-log-decoder",
        "--files",
        _one_nonempty(log_dir, "__transaction_state"),
    )
    assert '"transactionalId":"kr-tx"' in out
    assert '"transactionStatus":"CompleteAbort"' in out
