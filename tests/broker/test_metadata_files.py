"""Metadata files left empty or torn by a crash: recovered, or named in one clear error.

Each case: a broker (subprocess, as users run it) writes records and is SIGKILLed; one file
of its log dir is emptied or cut in half (what a file system that loses a write leaves); the
next start must either recover (every acknowledged record served) or stop with one ERROR line
naming the file, exit 1 - never a traceback.
"""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as p9

from tests.support.broker_process import BrokerProcess, serve_to_the_end
from tests.support.fault_wire import create_topic, fetch_once
from tests.support.kafka_wire import WireClient, make_batch

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 30
SETTINGS = {"log.segment.bytes": "2048"}  # a few segments, so recovery has work to do


def _produce(c: WireClient, topic: str) -> None:
    for i in range(RECORDS):
        answer = c.request(
            p9.ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout=timedelta(seconds=10),
                topic_data=(
                    p9.TopicProduceData(
                        name=topic,
                        partition_data=(
                            p9.PartitionProduceData(
                                index=0, records=make_batch([b"value-%03d" % i + b"x" * 100])
                            ),
                        ),
                    ),
                ),
            )
        )
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none


def _fetch(c: WireClient, topic: str) -> Any:
    return fetch_once(c, topic, 0, max_bytes=1 << 22)


def _crashed_broker(tmp_path: Path) -> Path:
    """A log dir left by a SIGKILLed broker holding RECORDS acknowledged records in 'kept'."""
    log_dir = tmp_path / "data"
    broker = BrokerProcess(
        log_dir, {**SETTINGS, "replica.high.watermark.checkpoint.interval.ms": "100"}
    ).start()
    with WireClient(broker.bootstrap) as c:
        create_topic(c, "kept", {"retention.ms": "-1"})
        _produce(c, "kept")
    broker.stop(signal.SIGKILL)
    return log_dir


def _damage(path: Path, how: str) -> None:
    assert path.exists(), path
    data = path.read_bytes()
    path.write_bytes(b"" if how == "empty" else data[: max(len(data) // 2, 1)])


def _serve_fails(log_dir: Path) -> str:
    result = serve_to_the_end(log_dir)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "JSONDecodeError" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, result.stderr
    return errors[0]


@pytest.mark.parametrize(
    ("name", "how"),
    [
        ("recovery-point-offset-checkpoint", "empty"),
        ("recovery-point-offset-checkpoint", "torn"),
        ("replication-offset-checkpoint", "torn"),
        ("log-start-offset-checkpoint", "empty"),
        ("cleaner-offset-checkpoint", "torn"),
        ("tidelog-topics.json", "empty"),
        ("tidelog-topics.json", "torn"),
        ("meta.properties", "empty"),
    ],
)
def test_damaged_file_is_recovered(tmp_path: Path, name: str, how: str) -> None:
    log_dir = _crashed_broker(tmp_path)
    target = log_dir / name
    if not target.exists():  # the cleaner writes its checkpoint once it has cleaned
        target.write_text("0\n1\n__consumer_offsets 0 0\n")
    _damage(target, how)
    broker = BrokerProcess(log_dir, SETTINGS).start()
    try:
        with WireClient(broker.bootstrap) as c:
            part = _fetch(c, "kept")
            assert part.error_code == ErrorCode.none
            assert part.high_watermark == RECORDS
            _produce(c, "kept")  # and the log goes on
            assert _fetch(c, "kept").high_watermark == 2 * RECORDS
        text = broker.log_text()
        assert "Traceback" not in text
        if name == "tidelog-topics.json":
            assert "using its backup" in text
        elif name == "meta.properties":
            assert "meta.properties is empty or damaged" in text
            assert "cluster.id=" in target.read_text()
        elif name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
            # read at start-up (the other two are rewritten before anything reads them)
            assert "ignoring unreadable checkpoint" in text
    finally:
        assert broker.stop() == 0
    if name == "tidelog-topics.json":  # repaired, config overrides kept
        restarted = BrokerProcess(log_dir, SETTINGS).start()
        try:
            assert "using its backup" not in restarted.log_text()
            assert '"retention.ms": "-1"' in target.read_text()
        finally:
            assert restarted.stop() == 0


def test_registry_and_backup_both_damaged_is_one_clear_error(tmp_path: Path) -> None:
    log_dir = _crashed_broker(tmp_path)
    _damage(log_dir / "tidelog-topics.json", "torn")
    _damage(log_dir / "tidelog-topics.json.backup", "empty")
    line = _serve_fails(log_dir)
    assert f"{log_dir / 'tidelog-topics.json'} is not a readable topic registry" in line
    assert "move" in line and "rebuilt from the partition dirs" in line


@pytest.mark.parametrize("how", ["empty", "torn"])
def test_damaged_producer_id_file_is_one_clear_error(tmp_path: Path, how: str) -> None:
    log_dir = _crashed_broker(tmp_path)
    target = log_dir / "tidelog-producer-ids"
    if not target.exists():
        target.write_text("0\n1000\n")
    # (a cut that leaves "0\n10" still parses: only an unparsable file can be noticed)
    target.write_bytes(b"" if how == "empty" else target.read_bytes()[:2])
    line = _serve_fails(log_dir)
    assert f"{target} is not a tidelog producer id file" in line
    assert "delete it" in line
