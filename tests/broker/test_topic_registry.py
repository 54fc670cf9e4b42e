"""broker.topics: the registry with a real LogManager and config (no broker process)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tidelog.broker.topics import (
    REGISTRY_FILE,
    TopicError,
    Topics,
    log_config_from,
    topic_name_error,
)
from tidelog.config import load_broker_config
from tidelog.config.topic import effective_topic_config
from tidelog.storage import LogConfig, LogManager


def _open(log_dir: Path, *overrides: str) -> tuple[Topics, LogManager]:
    cfg = load_broker_config(None, [f"log.dirs={log_dir}", *overrides], environ={})
    manager = LogManager([log_dir], default_config=LogConfig())
    manager.startup()
    topics = Topics(cfg, manager, log_dir / REGISTRY_FILE)
    topics.load_and_reconcile()
    return topics, manager


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("a", True),
        ("A.b_c-9", True),
        ("x" * 249, True),
        ("x" * 250, False),
        ("", False),
        (".", False),
        ("..", False),
        ("a b", False),
        ("a/b", False),
        ("é", False),
    ],
)
def test_topic_name_rules(name: str, ok: bool) -> None:
    assert (topic_name_error(name) is None) == ok


def test_create_persist_and_reload(tmp_path: Path) -> None:
    topics, manager = _open(tmp_path)
    info = topics.create_topic("orders", 3, {"retention.ms": "1000", "flush.messages": "1"})
    assert info.partitions == 3 and dict(info.configs) == {
        "retention.ms": "1000",
        "flush.messages": "1",
    }
    assert manager.get_log("orders", 2) is not None
    assert manager.get_log("orders", 2).topic_id == info.topic_id
    assert topics.log_config("orders").retention_ms == 1000
    assert topics.log_config("orders").flush_messages == 1
    data = json.loads((tmp_path / REGISTRY_FILE).read_text())
    assert data["topics"]["orders"]["topic_id"] == str(info.topic_id)
    manager.shutdown()

    again, manager2 = _open(tmp_path)
    reloaded = again.get("orders")
    assert reloaded == info
    assert again.by_id(info.topic_id) == info
    assert again.get_log("orders", 0) is manager2.get_log("orders", 0)
    assert again.get_log("orders", 3) is None
    assert manager2.get_log("orders", 0).config.retention_ms == 1000
    manager2.shutdown()


def test_refusals(tmp_path: Path) -> None:
    topics, manager = _open(tmp_path)
    topics.create_topic("a.b", 1)
    cases = [
        (("a.b", 1, {}), "TOPIC_ALREADY_EXISTS"),
        (("a_b", 1, {}), "INVALID_TOPIC_EXCEPTION"),  # collides with a.b in metric names
        (("bad name", 1, {}), "INVALID_TOPIC_EXCEPTION"),
        (("fine", 0, {}), "INVALID_PARTITIONS"),
        (("fine", 1, {"nope": "1"}), "INVALID_CONFIG"),
        (("fine", 1, {"segment.bytes": "-4"}), "INVALID_CONFIG"),
    ]
    for args, error in cases:
        with pytest.raises(TopicError) as exc:
            topics.create_topic(*args)
        assert exc.value.error_name == error, args
    assert topics.names() == ["a.b"]
    manager.shutdown()


def test_reconcile_adopts_unregistered_logs_and_recreates_missing(tmp_path: Path) -> None:
    topics, manager = _open(tmp_path)
    info = topics.create_topic("kept", 2)
    orphan_id = uuid.uuid4()
    manager.create_log("orphan", 0, LogConfig(), orphan_id)
    manager.create_log("orphan", 1, LogConfig(), orphan_id)
    manager.shutdown()
    # a registered partition whose directory vanished
    import shutil

    shutil.rmtree(tmp_path / "kept-1")
    again, manager2 = _open(tmp_path)
    assert again.get("orphan") is not None
    assert again.get("orphan").topic_id == orphan_id and again.get("orphan").partitions == 2
    assert manager2.get_log("kept", 1) is not None
    assert manager2.get_log("kept", 1).topic_id == info.topic_id
    data = json.loads((tmp_path / REGISTRY_FILE).read_text())
    assert set(data["topics"]) == {"kept", "orphan"}
    manager2.shutdown()


def test_delete_add_partitions_and_config(tmp_path: Path) -> None:
    topics, manager = _open(tmp_path)
    topics.create_topic("t", 1)
    with pytest.raises(TopicError) as exc:
        topics.add_partitions("t", 1)
    assert exc.value.error_name == "INVALID_PARTITIONS"
    assert topics.add_partitions("t", 3).partitions == 3
    assert manager.get_log("t", 2) is not None
    updated = topics.set_config_overrides("t", {"retention.ms": "5000"})
    assert dict(updated.configs) == {"retention.ms": "5000"}
    assert manager.get_log("t", 2).config.retention_ms == 5000
    with pytest.raises(TopicError) as exc:
        topics.set_config_overrides("t", {"retention.ms": "x"})
    assert exc.value.error_name == "INVALID_CONFIG"
    topics.delete_topic("t")
    assert topics.get("t") is None and manager.get_log("t", 0) is None
    with pytest.raises(TopicError):
        topics.delete_topic("t")
    manager.shutdown()
    again, manager2 = _open(tmp_path)
    assert again.names() == []
    manager2.shutdown()


def test_log_config_mapping_from_broker_settings(tmp_path: Path) -> None:
    cfg = load_broker_config(
        None,
        [
            f"log.dirs={tmp_path}",
            "log.segment.bytes=1048576",
            "log.retention.hours=1",
            "log.flush.interval.messages=10",
            "log.message.timestamp.type=LogAppendTime",
        ],
        environ={},
    )
    mapped = log_config_from(effective_topic_config(cfg, {"cleanup.policy": "compact,delete"}))
    assert mapped.segment_bytes == 1048576
    assert mapped.retention_ms == 3_600_000
    assert mapped.flush_messages == 10
    assert mapped.flush_ms is None  # Kafka's Long.MAX_VALUE: never forced
    assert mapped.message_timestamp_type == "LogAppendTime"
    assert mapped.cleanup_policy == "compact,delete"
    defaults = log_config_from(effective_topic_config(load_broker_config(None, [], environ={}), {}))
    # Kafka's defaults on both sides, but for the durable acknowledgement (flush.messages=1)
    assert defaults == LogConfig(flush_messages=1)
    assert defaults.holds_high_watermark
