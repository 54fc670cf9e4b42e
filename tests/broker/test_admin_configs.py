"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs against a real in-process broker."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.router_broker import AdminHarness
from tidelog.config import TOPIC_CONFIGS

DESCRIBE, ALTER, INCREMENTAL = 32, 33, 44
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
SOURCE_TOPIC, SOURCE_STATIC, SOURCE_DEFAULT = 1, 4, 5


@pytest.fixture
def h(tmp_path: Path) -> Iterator[AdminHarness]:
    harness = AdminHarness(tmp_path / "data", ("log.retention.hours=100",))
    yield harness
    harness.close()


def describe(
    h: AdminHarness,
    resources: list[tuple[int, str, tuple[str, ...] | None]],
    version: int = 4,
    synonyms: bool = False,
    docs: bool = False,
) -> Any:
    t = h.types(DESCRIBE, version)
    kwargs: dict[str, Any] = {"include_synonyms": synonyms}
    if version >= 3:
        kwargs["include_documentation"] = docs
    return h.call(
        DESCRIBE,
        version,
        t.DescribeConfigsRequest(
            resources=tuple(
                t.DescribeConfigsResource(
                    resource_type=rt, resource_name=name, configuration_keys=keys
                )
                for rt, name, keys in resources
            ),
            **kwargs,
        ),
    )


def topic_configs(h: AdminHarness, name: str) -> dict[str, Any]:
    (result,) = describe(h, [(TOPIC, name, None)]).results
    assert result.error_code == ErrorCode.none
    return {c.name: c for c in result.configs}


def alter(
    h: AdminHarness,
    resources: list[tuple[int, str, dict[str, str | None]]],
    version: int = 2,
    validate_only: bool = False,
) -> list[Any]:
    t = h.types(ALTER, version)
    request = t.AlterConfigsRequest(
        resources=tuple(
            t.AlterConfigsResource(
                resource_type=rt,
                resource_name=name,
                configs=tuple(t.AlterableConfig(name=k, value=v) for k, v in cfg.items()),
            )
            for rt, name, cfg in resources
        ),
        validate_only=validate_only,
    )
    return list(h.call(ALTER, version, request).responses)


def incremental(
    h: AdminHarness,
    rt: int,
    name: str,
    ops: list[tuple[str, int, str | None]],
    version: int = 1,
    validate_only: bool = False,
) -> Any:
    t = h.types(INCREMENTAL, version)
    request = t.IncrementalAlterConfigsRequest(
        resources=(
            t.AlterConfigsResource(
                resource_type=rt,
                resource_name=name,
                configs=tuple(
                    t.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops
                ),
            ),
        ),
        validate_only=validate_only,
    )
    (response,) = h.call(INCREMENTAL, version, request).responses
    return response


# ---------------------------------------------------------------------------- DescribeConfigs


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_topic_lists_every_config_with_its_source(h: AdminHarness, version: int) -> None:
    h.create_topic("orders", 2, retention_ms="3600000")
    (result,) = describe(h, [(TOPIC, "orders", None)], version=version).results
    assert result.error_code == ErrorCode.none and result.resource_name == "orders"
    configs = {c.name: c for c in result.configs}
    assert set(configs) == set(TOPIC_CONFIGS)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].config_source == SOURCE_TOPIC
    assert configs["segment.bytes"].value == str(1024**3)
    assert configs["segment.bytes"].config_source == SOURCE_DEFAULT
    assert not any(c.read_only for c in result.configs)
    assert all(c.synonyms == () for c in result.configs)  # not asked for


def test_describe_topic_default_from_a_broker_setting_is_static(h: AdminHarness) -> None:
    h.create_topic("t")
    configs = topic_configs(h, "t")
    # log.retention.hours=100 was set on the broker: the topic inherits it in ms.
    assert configs["retention.ms"].value == str(100 * 3600 * 1000)
    assert configs["retention.ms"].config_source == SOURCE_STATIC


def test_describe_synonyms_and_documentation_only_when_asked(h: AdminHarness) -> None:
    h.create_topic("t", retention_ms="5000")
    (plain,) = describe(h, [(TOPIC, "t", ("retention.ms",))], docs=False).results
    assert plain.configs[0].documentation is None and plain.configs[0].synonyms == ()
    (full,) = describe(h, [(TOPIC, "t", ("retention.ms",))], synonyms=True, docs=True).results
    entry = full.configs[0]
    assert entry.documentation
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("retention.ms", "5000", SOURCE_TOPIC),
        ("log.retention.hours", "100", SOURCE_STATIC),
    ]


def test_describe_configuration_keys_filter(h: AdminHarness) -> None:
    h.create_topic("t")
    (result,) = describe(h, [(TOPIC, "t", ("cleanup.policy", "no.such.key"))]).results
    assert [c.name for c in result.configs] == ["cleanup.policy"]
    (everything,) = describe(h, [(TOPIC, "t", ())]).results
    assert len(everything.configs) == len(TOPIC_CONFIGS)


def test_describe_errors_are_per_resource(h: AdminHarness) -> None:
    h.create_topic("t")
    results = describe(
        h,
        [
            (TOPIC, "missing", None),
            (TOPIC, "bad/name", None),
            (TOPIC, "t", ("segment.ms",)),
            (BROKER, "7", None),
            (BROKER, "one", None),
            (GROUP, "g", None),
        ],
    ).results
    codes = [r.error_code for r in results]
    assert codes == [
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_topic_exception,
        ErrorCode.none,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.none,  # Kafka 4's group configs (tests/broker/test_dynamic_configs.py)
    ]
    assert (
        results[3].error_message
        == "Unexpected broker id, expected 1 or empty string, but received 7"
    )
    assert all(r.configs == () for i, r in enumerate(results) if i not in (2, 5))


def test_describe_broker(h: AdminHarness) -> None:
    node, cluster_defaults = describe(h, [(BROKER, "1", None), (BROKER, "", None)]).results
    configs = {c.name: c for c in node.configs}
    assert configs["log.retention.hours"].value == "100"
    assert configs["log.retention.hours"].config_source == SOURCE_STATIC
    assert configs["num.partitions"].config_source == SOURCE_DEFAULT
    assert configs["node.id"].read_only
    assert cluster_defaults.error_code == ErrorCode.none and cluster_defaults.configs == ()


def test_describe_broker_logger_shows_levels(h: AdminHarness) -> None:
    logging.getLogger("tidelog.admin").setLevel(logging.WARNING)
    (result,) = describe(h, [(BROKER_LOGGER, "1", ("root", "tidelog.admin"))]).results
    levels = {c.name: c.value for c in result.configs}
    assert levels["tidelog.admin"] == "WARN"
    assert "root" in levels
    (empty,) = describe(h, [(BROKER_LOGGER, "", None)]).results
    assert empty.error_code == ErrorCode.invalid_request


# ---------------------------------------------------------------------------- AlterConfigs


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_replaces_the_whole_set_and_applies_to_logs(h: AdminHarness, version: int) -> None:
    h.create_topic("t", 2, retention_ms="1000", segment_bytes="100000")
    (r,) = alter(h, [(TOPIC, "t", {"retention.bytes": "5000", "segment.ms": "60000"})], version)
    assert r.error_code == ErrorCode.none and r.resource_name == "t"
    info = h.broker.topics.get("t")
    assert info is not None
    assert dict(info.configs) == {"retention.bytes": "5000", "segment.ms": "60000"}
    configs = topic_configs(h, "t")
    assert configs["retention.ms"].config_source == SOURCE_STATIC  # override removed
    assert configs["retention.bytes"].value == "5000"
    for partition in (0, 1):
        log = h.broker.topics.get_log("t", partition)
        assert log is not None
        assert log.config.retention_bytes == 5000 and log.config.segment_ms == 60000
        assert log.config.segment_bytes == 1024**3


def test_alter_survives_a_restart(h: AdminHarness) -> None:
    h.create_topic("t")
    (r,) = alter(h, [(TOPIC, "t", {"cleanup.policy": "compact", "max.message.bytes": "2048"})])
    assert r.error_code == ErrorCode.none
    h.restart()
    configs = topic_configs(h, "t")
    assert configs["cleanup.policy"].value == "compact"
    assert configs["max.message.bytes"].config_source == SOURCE_TOPIC
    log = h.broker.topics.get_log("t", 0)
    assert log is not None and log.config.cleanup_policy == "compact"
    assert log.config.max_message_bytes == 2048


def test_alter_validate_only_changes_nothing(h: AdminHarness) -> None:
    h.create_topic("t", retention_ms="1000")
    (r,) = alter(h, [(TOPIC, "t", {"retention.ms": "2000"})], validate_only=True)
    assert r.error_code == ErrorCode.none
    assert topic_configs(h, "t")["retention.ms"].value == "1000"


def test_alter_errors(h: AdminHarness) -> None:
    h.create_topic("t", retention_ms="1000")
    bad_name, bad_value, missing, null = alter(
        h,
        [
            (TOPIC, "t", {"retention.mss": "5"}),
            (TOPIC, "t2", {"segment.bytes": "1"}),
            (TOPIC, "gone", {"retention.ms": "5"}),
            (TOPIC, "t3", {"retention.ms": None}),
        ],
    )
    assert bad_name.error_code == ErrorCode.invalid_config
    assert "retention.mss" in bad_name.error_message
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    assert null.error_code == ErrorCode.invalid_request
    assert bad_value.error_code == ErrorCode.unknown_topic_or_partition
    h.create_topic("t2")
    (bad_value,) = alter(h, [(TOPIC, "t2", {"segment.bytes": "1"})])
    assert bad_value.error_code == ErrorCode.invalid_config
    assert "segment.bytes" in bad_value.error_message
    assert topic_configs(h, "t")["retention.ms"].value == "1000"  # untouched


def test_alter_duplicate_resources_and_broker(h: AdminHarness) -> None:
    h.create_topic("t")
    first, second = alter(h, [(TOPIC, "t", {}), (TOPIC, "t", {"retention.ms": "1"})])
    assert first.error_code == second.error_code == ErrorCode.invalid_request
    static, unknown, wrong, empty = alter(
        h,
        [
            (BROKER, "1", {"num.partitions": "3"}),
            (BROKER, "", {"no.such.setting": "3"}),
            (BROKER, "2", {}),
            (BROKER_LOGGER, "1", {}),
        ],
    )
    assert static.error_code == ErrorCode.invalid_request
    assert static.error_message == "Cannot update these configs dynamically: Set(num.partitions)"
    assert unknown.error_code == ErrorCode.invalid_config
    assert "no.such.setting" in unknown.error_message
    assert wrong.error_code == empty.error_code == ErrorCode.invalid_request


# ---------------------------------------------------------------------------- Incremental


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_set_and_delete(h: AdminHarness, version: int) -> None:
    h.create_topic("t", retention_ms="1000", segment_ms="100000")
    r = incremental(
        h, TOPIC, "t", [("retention.ms", SET, "7000"), ("segment.ms", DELETE, None)], version
    )
    assert r.error_code == ErrorCode.none
    info = h.broker.topics.get("t")
    assert info is not None and dict(info.configs) == {"retention.ms": "7000"}
    log = h.broker.topics.get_log("t", 0)
    assert log is not None and log.config.retention_ms == 7000
    h.restart()
    info = h.broker.topics.get("t")
    assert info is not None and dict(info.configs) == {"retention.ms": "7000"}


def test_incremental_append_and_subtract_lists(h: AdminHarness) -> None:
    h.create_topic("t")
    r = incremental(h, TOPIC, "t", [("cleanup.policy", APPEND, "compact")])
    assert r.error_code == ErrorCode.none
    assert topic_configs(h, "t")["cleanup.policy"].value == "delete,compact"
    log = h.broker.topics.get_log("t", 0)
    assert log is not None and log.config.compact_enabled and log.config.delete_enabled
    r = incremental(h, TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")])
    assert r.error_code == ErrorCode.none
    assert topic_configs(h, "t")["cleanup.policy"].value == "compact"
    r = incremental(h, TOPIC, "t", [("cleanup.policy", SUBTRACT, "compact")])
    assert r.error_code == ErrorCode.invalid_config  # an empty policy is not allowed
    r = incremental(h, TOPIC, "t", [("retention.ms", APPEND, "5")])
    assert r.error_code == ErrorCode.invalid_config
    assert r.error_message == "Can't APPEND to key retention.ms because its type is not LIST."


def test_incremental_errors(h: AdminHarness) -> None:
    h.create_topic("t")
    cases: list[tuple[list[tuple[str, int, str | None]], ErrorCode]] = [
        ([("retention.mss", SET, "5")], ErrorCode.invalid_config),
        ([("retention.ms", SET, "soon")], ErrorCode.invalid_config),
        ([("retention.ms", SET, None)], ErrorCode.invalid_request),
        ([("retention.ms", SET, "1"), ("retention.ms", DELETE, None)], ErrorCode.invalid_request),
        ([("retention.ms", 9, "1")], ErrorCode.invalid_request),
    ]
    for ops, code in cases:
        r = incremental(h, TOPIC, "t", ops)
        assert r.error_code == code, (ops, r)
        if code == ErrorCode.invalid_config:
            assert ops[0][0] in r.error_message
    assert incremental(h, TOPIC, "nope", [("retention.ms", SET, "1")]).error_code == (
        ErrorCode.unknown_topic_or_partition
    )
    r = incremental(h, TOPIC, "t", [("retention.ms", SET, "1")], validate_only=True)
    assert r.error_code == ErrorCode.none
    assert topic_configs(h, "t")["retention.ms"].config_source != SOURCE_TOPIC
    broker = incremental(h, BROKER, "1", [("log.retention.hours", SET, "1")])
    assert broker.error_code == ErrorCode.invalid_request
    assert "log.retention.hours" in broker.error_message
    assert incremental(h, BROKER, "1", [("log.retention.hours", DELETE, None)]).error_code == (
        ErrorCode.none
    )


def test_incremental_broker_logger(h: AdminHarness) -> None:
    target = logging.getLogger("tidelog.admin")
    target.setLevel(logging.INFO)
    r = incremental(h, BROKER_LOGGER, "1", [("tidelog.admin", SET, "DEBUG")])
    assert r.error_code == ErrorCode.none and target.level == logging.DEBUG
    r = incremental(h, BROKER_LOGGER, "1", [("tidelog.admin", SET, "LOUD")])
    assert r.error_code == ErrorCode.invalid_config
    r = incremental(h, BROKER_LOGGER, "1", [("root", DELETE, None)])
    assert r.error_code == ErrorCode.invalid_request
    r = incremental(h, BROKER_LOGGER, "1", [("tidelog.admin", DELETE, None)])
    assert r.error_code == ErrorCode.none and target.level == logging.NOTSET
