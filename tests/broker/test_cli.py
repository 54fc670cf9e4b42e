"""``tidelog`` command line: configuration errors, sub-commands, SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidelog", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_unknown_setting_exits_2_naming_the_key(tmp_path: Path) -> None:
    result = _run("serve", "--override", "no.such.setting=1", "--override", f"log.dirs={tmp_path}")
    assert result.returncode == 2
    assert "no.such.setting" in result.stderr


def test_bad_value_exits_2_naming_the_key(tmp_path: Path) -> None:
    result = _run(
        "serve", "--override", "num.partitions=many", "--override", f"log.dirs={tmp_path}"
    )
    assert result.returncode == 2
    assert "num.partitions" in result.stderr


def test_replication_factor_error_names_the_one_value_allowed(tmp_path: Path) -> None:
    """A single node keeps one copy: the only value is 1, said so (not ">= 1 <= 1")."""
    result = _run(
        "serve", "--override", "default.replication.factor=3", "--override", f"log.dirs={tmp_path}"
    )
    assert result.returncode == 2
    assert (
        "Invalid value '3' for 'default.replication.factor': expected 1 (the only value allowed)."
        in result.stderr
    ), result.stderr


@pytest.mark.parametrize(
    ("command", "typed", "hint"),
    [
        ("serve", "--lsit", ""),
        ("serve", "--zookeeper", ""),
        ("serve", "--conf", " (did you mean --config?)"),  # no prefix matching: said, not taken
        ("topics", "--lsit", " (did you mean --list?)"),
        ("topics", "--zookeeper", " (Kafka's tools take --bootstrap-server"),
    ],
)
def test_unknown_flag_is_named_as_typed(command: str, typed: str, hint: str) -> None:
    """Refused by the sub-command's own parser, naming the flag the user typed (not a required
    flag the sub-command misses, nor a flag a prefix happens to match)."""
    result = _run(command, typed, "x")
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"tidelog {command}: error: unrecognized arguments: {typed}{hint}"), (
        result.stderr
    )


def test_bad_listener_exits_2(tmp_path: Path) -> None:
    result = _run(
        "serve", "--override", "listeners=TLS://127.0.0.1:1", "--override", f"log.dirs={tmp_path}"
    )
    assert result.returncode == 2
    assert "listeners" in result.stderr


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    result = _run("serve", "--config", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert "nope.yaml" in result.stderr


def test_help_lists_serve() -> None:
    result = _run("--help")
    assert result.returncode == 0 and "serve" in result.stdout


def test_sigint_stops_cleanly(broker_factory: Any) -> None:
    b = broker_factory()
    line = f"tidelog listening on 127.0.0.1:{b.port} (advertised 127.0.0.1:{b.port})"
    assert line in b.log_text()
    assert b.stop(signal.SIGINT) == 0
    assert "stopped cleanly" in b.log_text()


def test_yaml_config_file_is_read(broker_factory: Any, tmp_path: Path) -> None:
    config = tmp_path / "broker.yaml"
    config.write_text("node.id: 7\nnum.partitions: 2\n")
    b = broker_factory(config_path=config)
    from kio.schema.metadata.v12 import request as md12

    from tests.support.kafka_wire import WireClient

    with WireClient(b.bootstrap) as c:
        answer = c.request(
            md12.MetadataRequest(
                topics=(md12.MetadataRequestTopic(topic_id=None, name="auto"),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
    assert answer.controller_id == 7 and answer.brokers[0].node_id == 7
    assert len(answer.topics[0].partitions) == 2
