"""GROUP config resources (Kafka 4) and Kafka-only broker settings, stored and described."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.broker.test_admin_configs import (
    BROKER,
    DELETE,
    GROUP,
    SET,
    SOURCE_DEFAULT,
    alter,
    describe,
    incremental,
)
from tests.support.router_broker import AdminHarness

SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER, SOURCE_GROUP = 2, 3, 8


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AdminHarness]:
    harness = AdminHarness(tmp_path / "data")
    yield harness
    harness.close()


def group_configs(h: AdminHarness, group: str) -> dict[str, tuple[str, int]]:
    (result,) = describe(h, [(GROUP, group, None)]).results
    assert result.error_code == ErrorCode.none
    return {c.name: (c.value, c.config_source) for c in result.configs}


def test_group_configs_default_from_the_broker_then_set_and_survive_restart(
    h: AdminHarness,
) -> None:
    before = group_configs(h, "g1")
    assert before["consumer.session.timeout.ms"] == ("45000", SOURCE_DEFAULT)
    assert before["consumer.heartbeat.interval.ms"] == ("5000", SOURCE_DEFAULT)
    assert before["share.auto.offset.reset"] == ("latest", SOURCE_DEFAULT)
    r = incremental(
        h,
        GROUP,
        "g1",
        [
            ("consumer.session.timeout.ms", SET, "50000"),
            ("consumer.heartbeat.interval.ms", SET, "6000"),
        ],
    )
    assert r.error_code == ErrorCode.none, r
    h.restart()
    after = group_configs(h, "g1")
    assert after["consumer.session.timeout.ms"] == ("50000", SOURCE_GROUP)
    assert after["consumer.heartbeat.interval.ms"] == ("6000", SOURCE_GROUP)
    assert group_configs(h, "other")["consumer.session.timeout.ms"] == ("45000", SOURCE_DEFAULT)
    r = incremental(h, GROUP, "g1", [("consumer.session.timeout.ms", DELETE, None)])
    assert r.error_code == ErrorCode.none
    assert group_configs(h, "g1")["consumer.session.timeout.ms"] == ("45000", SOURCE_DEFAULT)


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([("no.such", SET, "1")], "Unknown group config name: no.such"),
        (
            [("consumer.session.timeout.ms", SET, "1000")],
            "consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        (
            [("consumer.session.timeout.ms", SET, "90000")],
            "consumer.session.timeout.ms must be less than or equal to "
            "group.consumer.max.session.timeout.ms",
        ),
        (
            [("consumer.heartbeat.interval.ms", SET, "20000")],
            "consumer.heartbeat.interval.ms must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms",
        ),
    ],
)
def test_group_config_validation(
    h: AdminHarness, ops: list[tuple[str, int, str | None]], message: str
) -> None:
    r = incremental(h, GROUP, "g", ops)
    assert (r.error_code, r.error_message) == (ErrorCode.invalid_config, message)
    assert group_configs(h, "g")["consumer.session.timeout.ms"][1] == SOURCE_DEFAULT


def test_kafka_only_broker_settings_are_stored_and_described(
    h: AdminHarness, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tidelog.admin"):
        r = incremental(h, BROKER, "1", [("sasl.kerberos.min.time.before.relogin", SET, "58000")])
        assert r.error_code == ErrorCode.none, r
        (default,) = alter(h, [(BROKER, "", {"background.threads": "12"})])
        assert default.error_code == ErrorCode.none, default
    assert any("has no effect" in m for m in caplog.messages)
    h.restart()
    node, cluster = describe(h, [(BROKER, "1", None), (BROKER, "", None)]).results
    configs = {c.name: c for c in node.configs}
    entry = configs["sasl.kerberos.min.time.before.relogin"]
    assert (entry.value, entry.config_source, entry.read_only) == (
        "58000",
        SOURCE_DYNAMIC_BROKER,
        False,
    )
    assert configs["num.partitions"].config_source == SOURCE_DEFAULT  # tidelog's own still there
    assert [(c.name, c.value, c.config_source) for c in cluster.configs] == [
        ("background.threads", "12", SOURCE_DYNAMIC_DEFAULT_BROKER)
    ]
    # tidelog's own settings stay static, unknown names stay INVALID_CONFIG
    static = incremental(h, BROKER, "1", [("num.partitions", SET, "3")])
    assert static.error_code == ErrorCode.invalid_request
    unknown = incremental(h, BROKER, "1", [("no.such.setting", SET, "3")])
    assert unknown.error_code == ErrorCode.invalid_config
    deleted = incremental(h, BROKER, "1", [("sasl.kerberos.min.time.before.relogin", DELETE, None)])
    assert deleted.error_code == ErrorCode.none
    (node,) = describe(h, [(BROKER, "1", None)]).results
    assert "sasl.kerberos.min.time.before.relogin" not in {c.name for c in node.configs}
