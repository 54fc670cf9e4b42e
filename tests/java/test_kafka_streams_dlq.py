"""Kafka Streams' dead-letter queue (KIP-1034, Streams 4.2+) against tidelog: tidelog.jvm.StreamsDlq
copies dlq-in to dlq-out with exactly_once_v2; records whose value fails the IntegerDeserializer
(not 4 bytes) or makes the processor throw (a negative value) go to dlq-dead through the built-in
LogAndContinue handlers. The output holds exactly the good records, the DLQ exactly the bad ones
(same key, value and headers) with the ``__streams.errors.*`` headers naming the source record.
The same run against Apache Kafka 4.4 (the session's reference broker) gives the same outcome."""

from __future__ import annotations

import signal
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.analytics.kafka_connector_data import read_to_end
from tests.support.jvm import java_bin, jvm_set_classpath

pytestmark = [pytest.mark.timeout(300)]
PARTITIONS = 2
N_GOOD, N_UNDESERIALIZABLE, N_NEGATIVE = 200, 10, 10
SERIALIZATION = "org.apache.kafka.common.errors.SerializationException"
PROCESSING = "java.lang.IllegalArgumentException"

#: (key, value) -> (exception class, partition, offset) of each bad record.
Bad = dict[tuple[bytes, bytes], tuple[str, int, int]]


def _produce(bootstrap: str) -> tuple[set[tuple[bytes, bytes]], Bad]:
    """N good records, then bad ones interleaved; where each bad record landed."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in ("dlq-in", "dlq-out", "dlq-dead")])
    admin.close()
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    good: set[tuple[bytes, bytes]] = set()
    sent: list[tuple[bytes, bytes, str, Any]] = []
    n_bad = N_UNDESERIALIZABLE + N_NEGATIVE
    for i in range(N_GOOD + n_bad):
        key = b"k%d" % i
        if i % 11 == 5 and len(sent) < n_bad:
            if len(sent) % 2 == 0:
                value, kind = b"x%d" % (i % 10), SERIALIZATION  # 2 bytes: not an Integer
            else:
                value, kind = struct.pack(">i", -i), PROCESSING
            future = p.send("dlq-in", key=key, value=value, headers=[("src", b"%d" % i)])
            sent.append((key, value, kind, future))
        else:
            value = struct.pack(">i", i)
            p.send("dlq-in", key=key, value=value, headers=[("src", b"%d" % i)])
            good.add((key, value))
    p.flush()
    p.close()
    assert len(sent) == n_bad and len(good) == N_GOOD
    bad: Bad = {}
    for key, value, kind, future in sent:
        md = future.get(timeout=30)
        bad[(key, value)] = (kind, md.partition, md.offset)
    return good, bad


def _run_and_check(bootstrap: str, tmp_path: Path) -> None:
    good, bad = _produce(bootstrap)
    log = tmp_path / "streams.log"
    cmd = [str(java_bin()), "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
           "-cp", jvm_set_classpath("clients"), "tidelog.jvm.StreamsDlq", bootstrap,
           str(tmp_path / "state")]  # fmt: skip
    with open(log, "ab") as out:
        app = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    output: list[Any] = []
    dead: list[Any] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            output = read_to_end(bootstrap, "dlq-out", PARTITIONS, "read_committed")
            dead = read_to_end(bootstrap, "dlq-dead", PARTITIONS, "read_committed")
            if len(output) >= len(good) and len(dead) >= len(bad):
                break
            assert app.poll() is None, log.read_text()[-4000:]
            time.sleep(0.5)
    finally:
        app.send_signal(signal.SIGTERM)
        app.wait(60)
    assert len(output) >= len(good) and len(dead) >= len(bad), log.read_text()[-4000:]
    assert sorted((r.key, r.value) for r in output) == sorted(good), "exactly the good records"
    assert sorted((r.key, r.value) for r in dead) == sorted(bad), "exactly the bad records"
    for r in dead:
        kind, partition, offset = bad[(r.key, r.value)]
        headers = dict(r.headers)
        assert headers["src"] == b"%d" % int(r.key[1:]), "the source record's headers are kept"
        assert headers["__streams.errors.exception"] == kind.encode(), headers
        assert headers["__streams.errors.message"], headers
        assert kind.encode() in headers["__streams.errors.stacktrace"], headers
        assert headers["__streams.errors.topic"] == b"dlq-in", headers
        assert headers["__streams.errors.partition"] == str(partition).encode(), headers
        assert headers["__streams.errors.offset"] == str(offset).encode(), headers


def test_streams_dead_letter_queue(module_broker: Any, tmp_path: Path) -> None:
    _run_and_check(module_broker.bootstrap, tmp_path)


def test_streams_dead_letter_queue_on_apache_kafka(kafka_broker: Any, tmp_path: Path) -> None:
    """The reference: the same application against Apache Kafka 4.4 gives the same outcome."""
    _run_and_check(kafka_broker.bootstrap, tmp_path)
