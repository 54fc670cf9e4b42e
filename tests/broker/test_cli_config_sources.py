"""``tidelog serve --config server.properties`` and Kubernetes' variables, as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tidelog.tools.probe import probe

ROOT = Path(__file__).resolve().parents[2]


def test_server_properties_runs_a_broker(broker_factory: Any, tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("# as Kafka's\nnode.id=5\nnum.partitions=3\n")
    b = broker_factory(config_path=config)
    assert probe(b.bootstrap, 5).error_code == 0
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        admin.create_topics({"props-t": {"num_partitions": -1, "replication_factor": -1}})
        (topic,) = admin.describe_topics(["props-t"])
        assert len(topic["partitions"]) == 3
        assert admin.describe_cluster()["brokers"][0]["broker_id"] == 5
    finally:
        admin.close()


def test_unknown_key_in_server_properties_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={tmp_path / 'data'}\nlog.retention.hour=1\n")
    result = subprocess.run(
        [sys.executable, "-m", "tidelog", "serve", "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "log.retention.hour" in result.stderr
    assert "Traceback" not in result.stderr


def test_kubernetes_service_links_do_not_stop_the_broker(
    broker_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDELOG_PORT", "tcp://10.96.0.12:9092")
    monkeypatch.setenv("TIDELOG_SERVICE_HOST", "10.96.0.12")
    monkeypatch.setenv("TIDELOG_SERVICE_PORT", "9092")
    monkeypatch.setenv("TIDELOG_PORT_9092_TCP_ADDR", "10.96.0.12")
    b = broker_factory()
    assert probe(b.bootstrap, 5).error_code == 0
    assert "TIDELOG_PORT_9092_TCP_ADDR" in b.log_text() and "WARNING" in b.log_text()


def test_unrelated_tidelog_variables_do_not_stop_the_broker(
    broker_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka warns about a setting it does not know and carries on: a variable a user set for
    their own scripts (or a typo) is named in a warning, and the broker serves."""
    monkeypatch.setenv("TIDELOG_PROJECT", "payments")
    monkeypatch.setenv("TIDELOG_NUM_PARTITONS", "3")
    b = broker_factory()
    assert probe(b.bootstrap, 5).error_code == 0
    log = b.log_text()
    assert "Unknown environment variable 'TIDELOG_PROJECT'" in log
    assert "Did you mean TIDELOG_NUM_PARTITIONS" in log
