"""The Java ``KafkaShareConsumer`` (kafka-clients 4.4.0 from Maven Central) against tidelog.

``tests/jvm/share/`` holds the pom and ``ShareSmoke.java``; ``scripts/jvm-deps`` resolves them
into ``.cache/jvm/share`` (lib/ and classes/). Skipped when Java or Maven is missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.broker.share.share_support import create_topic, produce, set_group_configs
from tests.support.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / ".cache" / "jvm" / "share"


@pytest.fixture(scope="module")
def share_classpath() -> str:
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("Java or Maven is missing")
    subprocess.run([str(ROOT / "scripts" / "jvm-deps")], check=True, timeout=900)
    if not (CACHE / "classes" / "ShareSmoke.class").exists():
        pytest.skip("tests/jvm/share was not built (Maven Central unreachable?)")
    return f"{CACHE / 'classes'}:{CACHE / 'lib'}/*"


def test_kafka_share_consumer_reads_releases_and_accepts(
    broker: BrokerProcess, share_classpath: str
) -> None:
    create_topic(broker.bootstrap, "java-share")
    set_group_configs(broker.bootstrap, "java-g", {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap, "java-share", [f"j{i}".encode() for i in range(10)])
    done = subprocess.run(
        ["java", "-cp", share_classpath, "ShareSmoke", broker.bootstrap, "java-share", "java-g",
         "10"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    accepted = dict(line.split(":") for line in done.stdout.split())
    assert sorted(int(o) for o in accepted) == list(range(10))
    assert accepted["0"] == "2"  # released once, then delivered again
    assert {accepted[str(i)] for i in range(1, 10)} == {"1"}
