"""Config sources beyond YAML: Java properties files and Kubernetes' service-link variables."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tidelog.config import ConfigError, load_broker_config

K8S_SERVICE_LINKS = {
    "TIDELOG_PORT": "tcp://10.96.0.12:9092",
    "TIDELOG_SERVICE_HOST": "10.96.0.12",
    "TIDELOG_SERVICE_PORT": "9092",
    "TIDELOG_SERVICE_PORT_KAFKA": "9092",
    "TIDELOG_PORT_9092_TCP": "tcp://10.96.0.12:9092",
    "TIDELOG_PORT_9092_TCP_PROTO": "tcp",
    "TIDELOG_PORT_9092_TCP_PORT": "9092",
    "TIDELOG_PORT_9092_TCP_ADDR": "10.96.0.12",
}


def test_server_properties_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# Kafka's own format\n"
        "node.id=3\n"
        "listeners=PLAINTEXT://127.0.0.1:9192\n"
        "log.dirs=/tmp/a,/tmp/b\n"
        "num.partitions : 4\n"
        "log.retention.hours=\\\n  24\n"
    )
    cfg = load_broker_config(path, environ={})
    assert cfg.node_id == 3
    assert cfg.listeners == ["PLAINTEXT://127.0.0.1:9192"]
    assert cfg.log_dirs == ["/tmp/a", "/tmp/b"]
    assert cfg.num_partitions == 4
    assert cfg.retention_ms == 24 * 3600 * 1000
    assert not cfg.is_default("num.partitions")


def test_properties_without_the_suffix_are_recognised(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("num.partitions=5\nauto.create.topics.enable=false\n")
    cfg = load_broker_config(path, environ={})
    assert cfg.num_partitions == 5
    assert cfg.auto_create_topics_enable is False


def test_unknown_key_in_a_properties_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nnum.partitons=3\n")
    with pytest.raises(ConfigError) as err:
        load_broker_config(path, environ={})
    assert "num.partitons" in str(err.value)


def test_bad_value_in_a_properties_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=many\n")
    with pytest.raises(ConfigError) as err:
        load_broker_config(path, environ={})
    assert "num.partitions" in str(err.value)


def test_kubernetes_service_links_are_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = {**K8S_SERVICE_LINKS, "TIDELOG_NUM_PARTITIONS": "6"}
    with caplog.at_level(logging.WARNING, logger="tidelog.config"):
        cfg = load_broker_config(None, environ=env)
    assert cfg.num_partitions == 6
    warned = " ".join(r.getMessage() for r in caplog.records)
    for name in K8S_SERVICE_LINKS:
        assert name in warned
    assert "Kubernetes" in warned


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("TIDELOG_PROJECT", None),  # a user's own variable (the case)
        ("TIDELOG_NUM_PARTITON", "TIDELOG_NUM_PARTITIONS"),  # a typo: named, with the fix
        ("TIDELOG_PORTS", None),
        ("TIDELOG_SERVICE", None),
        ("TIDELOG_PORT_TCP", None),
    ],
)
def test_unknown_variables_are_skipped_with_a_warning_naming_them(
    name: str, hint: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    env = {**K8S_SERVICE_LINKS, name: "1", "TIDELOG_NUM_PARTITIONS": "6"}
    with caplog.at_level(logging.WARNING, logger="tidelog.config"):
        cfg = load_broker_config(None, environ=env)
    assert cfg.num_partitions == 6  # the known variable still applies
    own = [r.getMessage() for r in caplog.records if name + "'" in r.getMessage()]
    assert len(own) == 1, [r.getMessage() for r in caplog.records]
    assert "ignores it" in own[0]
    if hint is not None:
        assert f"Did you mean {hint}" in own[0]


def test_unknown_names_in_a_file_or_override_are_still_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_broker_config(None, ["num.partiton=1"], environ={})
    assert "num.partiton" in str(err.value)
