"""Named listeners: each client is told the address of the listener it connected to."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.support.net import free_port


def _kcat_brokers(bootstrap: str) -> str:
    out = subprocess.run(
        ["kcat", "-b", bootstrap, "-L"], capture_output=True, text=True, timeout=30, check=True
    )
    return out.stdout


def test_each_listener_advertises_its_own_address(broker_factory: Any) -> None:
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (scripts/test installs it)")
    internal, external = free_port(), free_port()
    broker_factory(
        {
            "listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "advertised.listeners": (
                f"INTERNAL://127.0.0.1:{internal},EXTERNAL://localhost:{external}"
            ),
        }
    )
    assert f"broker 1 at 127.0.0.1:{internal}" in _kcat_brokers(f"127.0.0.1:{internal}")
    assert f"broker 1 at localhost:{external}" in _kcat_brokers(f"127.0.0.1:{external}")

    # A client on the external listener follows its advertised name end to end.
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{external}")
    producer.send("via-external", b"hello").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{internal}")
    tp = TopicPartition("via-external", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    records = consumer.poll(timeout_ms=10_000).get(tp, [])
    consumer.close()
    assert [r.value for r in records] == [b"hello"]
