"""Broker and topic configuration: names, types, defaults, precedence and errors."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.config import BROKER_CONFIGS, ConfigError, env_name, load_broker_config, parse_listener
from tidelog.config.broker import SOURCE_DEFAULT, SOURCE_DYNAMIC_TOPIC, SOURCE_STATIC_BROKER
from tidelog.config.definitions import LONG_MAX
from tidelog.config.reference import render_reference_markdown
from tidelog.config.topic import (
    describe_broker_configs,
    describe_topic_configs,
    effective_topic_config,
    validate_topic_configs,
)

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "broker.yaml"


def test_defaults_are_kafkas() -> None:
    cfg = load_broker_config(None, (), {})
    assert cfg.num_partitions == 1
    assert cfg.message_max_bytes == 1048588
    assert cfg.socket_request_max_bytes == 104857600
    assert cfg.get("log.segment.bytes") == 1073741824
    assert cfg.retention_ms == 168 * 3600 * 1000
    # Kafka divergence: acknowledgements wait for the fsync by default (one node, no replica)
    assert cfg.flush_interval_messages == 1
    assert cfg.flush_interval_ms is None
    assert cfg.get("offsets.topic.num.partitions") == 50
    assert cfg.get("group.initial.rebalance.delay.ms") == 3000
    assert cfg.advertised_listeners == cfg.listeners


def test_shipped_file_loads() -> None:
    cfg = load_broker_config(SHIPPED, (), {})
    assert cfg.listeners == ["PLAINTEXT://127.0.0.1:9092"]
    assert cfg.log_dirs == ["./data"]
    assert not cfg.is_default("log.dirs")


def test_precedence_file_env_override(tmp_path: Path) -> None:
    f = tmp_path / "b.yaml"
    f.write_text("num.partitions: 2\nlog.retention.hours: 1\n")
    env = {"TIDELOG_NUM_PARTITIONS": "3", "TIDELOG_LOG_RETENTION_MINUTES": "5"}
    cfg = load_broker_config(f, ["num.partitions=4"], env)
    assert cfg.num_partitions == 4
    # minutes wins over hours, as in Kafka.
    assert cfg.retention_ms == 5 * 60_000
    assert cfg.source("num.partitions") == SOURCE_STATIC_BROKER
    assert cfg.source("log.segment.bytes") == SOURCE_DEFAULT


def test_env_names() -> None:
    assert env_name("advertised.listeners") == "TIDELOG_ADVERTISED_LISTENERS"
    cfg = load_broker_config(
        None, (), {"TIDELOG_ADVERTISED_LISTENERS": "PLAINTEXT://broker.example:9092"}
    )
    assert cfg.advertised_listeners == ["PLAINTEXT://broker.example:9092"]


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("log.segmnt.bytes=1", "Did you mean log.segment.bytes"),
        ("log.segment.bytes=abc", "'log.segment.bytes'"),
        ("log.segment.bytes=1", ">= 14"),
        ("log.cleanup.policy=sometimes", "one of delete, compact"),
        ("auto.create.topics.enable=maybe", "boolean"),
        ("listeners=127.0.0.1:9092", "PLAINTEXT://host:port"),
        ("listeners=TLS://127.0.0.1:9093", "add TLS:PLAINTEXT"),
        ("listener.security.protocol.map=X:KERBEROS", "'listeners'"),
        ("listener.name.sasl_ssl.log.segment.bytes=1", "listener prefix"),
        ("ssl.client.auth=maybe", "required, requested, none"),
        ("num.partitions", "KEY=VALUE"),
    ],
)
def test_bad_settings_name_the_key(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_broker_config(None, [override], {})
    assert fragment in str(info.value)


def test_listener_prefixed_settings() -> None:
    cfg = load_broker_config(
        None,
        [
            "listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093",
            "listener.name.SASL_SSL.ssl.client.auth=required",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=x required;",
            "sasl.jaas.config=y required;",
        ],
        {},
    )
    assert cfg.listener_get("SASL_SSL", "ssl.client.auth") == "required"
    assert cfg.listener_get("PLAINTEXT", "ssl.client.auth") == "none"
    assert cfg.listener_get("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-256") == "x required;"
    assert cfg.listener_get("SASL_SSL", "sasl.jaas.config", "PLAIN") == "y required;"


def test_unknown_env_variable_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka warns about a name it does not know and carries on (test_config_sources.py has the
    cases): a typo is named with its fix, and the other settings apply."""
    with caplog.at_level("WARNING", logger="tidelog.config"):
        cfg = load_broker_config(None, (), {"TIDELOG_NUM_PARTITONS": "3"})
    assert cfg.num_partitions == 1
    assert "TIDELOG_NUM_PARTITONS" in caplog.text and "TIDELOG_NUM_PARTITIONS" in caplog.text


def test_bad_yaml_file(tmp_path: Path) -> None:
    f = tmp_path / "b.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_broker_config(f, (), {})
    with pytest.raises(ConfigError, match="Cannot read"):
        load_broker_config(tmp_path / "missing.yaml", (), {})


def test_listener_parsing() -> None:
    assert parse_listener("PLAINTEXT://127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert parse_listener("PLAINTEXT://:9092") == ("", 9092)
    assert parse_listener("PLAINTEXT://[::1]:9092") == ("::1", 9092)


def test_topic_config_falls_back_to_broker_synonyms() -> None:
    cfg = load_broker_config(None, ["log.retention.hours=2", "log.segment.bytes=1000"], {})
    eff = effective_topic_config(cfg, {"segment.bytes": "500"})
    assert eff["segment.bytes"] == 500
    assert eff["retention.ms"] == 2 * 3_600_000
    assert eff["flush.messages"] == 1
    assert eff["flush.ms"] == LONG_MAX
    plain = load_broker_config(None, [f"log.flush.interval.messages={LONG_MAX}"], {})
    assert effective_topic_config(plain, {})["flush.messages"] == LONG_MAX
    assert eff["cleanup.policy"] == ["delete"]
    assert eff["message.timestamp.type"] == "CreateTime"


def test_topic_config_validation() -> None:
    assert validate_topic_configs({"cleanup.policy": "compact,delete"}) == {
        "cleanup.policy": ["compact", "delete"]
    }
    with pytest.raises(ConfigError, match=r"Unknown topic config .retention\.mss."):
        validate_topic_configs({"retention.mss": "1"})
    with pytest.raises(ConfigError, match=r"retention\.ms"):
        validate_topic_configs({"retention.ms": "-5"})
    with pytest.raises(ConfigError, match=r"min\.compaction\.lag\.ms"):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_describe_topic_reports_value_default_and_source() -> None:
    cfg = load_broker_config(None, ["log.segment.bytes=2000"], {})
    entries = {e.name: e for e in describe_topic_configs(cfg, {"retention.ms": "1000"})}
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source == SOURCE_DYNAMIC_TOPIC
    assert not entries["retention.ms"].is_default
    assert entries["segment.bytes"].value == "2000"
    assert entries["segment.bytes"].source == SOURCE_STATIC_BROKER
    assert entries["max.message.bytes"].is_default
    assert entries["max.message.bytes"].value == "1048588"


def test_describe_broker_lists_every_setting() -> None:
    cfg = load_broker_config(None, (), {})
    names = {e.name for e in describe_broker_configs(cfg)}
    assert names == set(BROKER_CONFIGS)


@given(st.integers(min_value=14, max_value=2**31 - 1))
def test_int_settings_round_trip_as_strings(n: int) -> None:
    cfg = load_broker_config(None, [f"log.segment.bytes={n}"], {})
    assert cfg.get("log.segment.bytes") == n


def test_reference_lists_every_setting() -> None:
    text = render_reference_markdown()
    for name in BROKER_CONFIGS:
        assert f"`{name}`" in text


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["listeners=INTERNAL://127.0.0.1:9092"], "add INTERNAL:PLAINTEXT to"),
        (
            [
                "listeners=PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093",
            ],
            "appears twice",
        ),
        (
            [
                "listeners=PLAINTEXT://127.0.0.1:9092",
                "advertised.listeners=EXTERNAL://example:9092",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
            ],
            "not in listeners",
        ),
        (["listener.security.protocol.map=INTERNAL"], "NAME:PROTOCOL"),
    ],
)
def test_listener_names_are_checked(overrides: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_broker_config(None, overrides, {})
    assert fragment in str(info.value)


def test_named_listeners_with_a_protocol_map() -> None:
    cfg = load_broker_config(
        None,
        [
            "listeners=INTERNAL://:9092,EXTERNAL://:9093",
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        ],
        {},
    )
    assert cfg.listener_protocols == {"INTERNAL": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"}
    assert cfg.advertised_listeners == cfg.listeners
