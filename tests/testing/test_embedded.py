"""``tidelog.Broker`` (embedded, a thread of this process) and ``tidelog.testing.Broker`` used
without pytest, with real clients; and that importing tidelog and the plugin stays cheap."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

import tidelog
from tidelog.testing import Broker, EmbeddedBroker

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for v in values:
        producer.send(topic, v).get(timeout=30)
    producer.close()


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=3000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    out: list[bytes] = []
    while len(out) < end:
        batch = consumer.poll(timeout_ms=3000)
        if not batch:
            break
        for records in batch.values():
            out.extend(r.value for r in records)
    consumer.close()
    return out


def test_embedded_broker_with_confluent_kafka() -> None:
    assert tidelog.Broker is EmbeddedBroker
    with tidelog.Broker() as broker:
        assert broker.bootstrap_servers.startswith("127.0.0.1:")
        log_dir = broker.log_dir
        assert log_dir.is_dir()
        topic = broker.create_topic(f"emb-{uuid.uuid4().hex[:6]}", partitions=2)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
        for i in range(20):
            producer.produce(topic, value=b"m%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "emb",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic])
        got: list[bytes] = []
        for _ in range(60):
            if len(got) == 20:
                break
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.close()
        assert sorted(got) == sorted(b"m%d" % i for i in range(20))
        # the group request created __consumer_offsets in this broker's log dir
        assert any(p.name.startswith("__consumer_offsets-") for p in log_dir.iterdir())
        assert "tidelog listening on" in broker.log_text()
    assert not broker.running
    assert not log_dir.exists()  # log_dir=None: a temporary dir, removed on exit


def test_embedded_restart_and_kill_keep_acknowledged_records(tmp_path: Path) -> None:
    log_dir = tmp_path / "data"
    with tidelog.Broker(log_dir=log_dir, overrides={"num.partitions": 1}) as broker:
        produce(broker.bootstrap_servers, "kept", [b"a", b"b"])
        address = broker.bootstrap_servers
        assert broker.stop() == 0
        broker.restart()
        assert broker.bootstrap_servers == address
        assert read_all(broker.bootstrap_servers, "kept") == [b"a", b"b"]
        produce(broker.bootstrap_servers, "kept", [b"c"])
        broker.kill()  # no flush, no checkpoint, connections dropped
        assert not broker.running
        broker.restart()
        assert read_all(broker.bootstrap_servers, "kept") == [b"a", b"b", b"c"]
        assert "killed (embedded broker)" in broker.log_text()
    assert (log_dir / "kept-0").is_dir()  # a log dir the caller gave is kept


def test_subprocess_broker_as_a_context_manager() -> None:
    with Broker(overrides={"auto.create.topics.enable": False}) as broker:
        assert broker.running and broker.pid is not None
        work_dir = broker.work_dir
        topic = broker.create_topic("ctx")
        produce(broker.bootstrap_servers, topic, [b"1"])
        assert read_all(broker.bootstrap_servers, topic) == [b"1"]
        assert "auto.create.topics.enable=false" in broker.log_text()
    assert not broker.running
    assert broker.exit_codes == [0]  # a graceful stop
    assert not work_dir.exists()


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return set(out.split())


def test_importing_tidelog_and_the_plugin_stays_cheap() -> None:
    heavy = ("asyncio", "kio", "kafka", "tidelog.broker", "tidelog.storage", "uvloop")
    for code in ("import tidelog", "import tidelog.testing.plugin", "import tidelog.testing"):
        loaded = _modules_after(code)
        assert not [m for m in loaded if m.split(".")[0] in heavy or m.startswith(heavy)], code


def test_embedded_start_leaves_the_hosts_collector_as_it_was(tmp_path: Path) -> None:
    """The start pauses the cyclic collector (as ``tidelog serve`` does) and puts it back:
    on when the host had it on, off when the host had turned it off."""
    import gc

    from tidelog.config import ConfigError

    was = gc.isenabled()
    try:
        for host_collects in (True, False):
            gc.enable() if host_collects else gc.disable()
            with tidelog.Broker(log_dir=tmp_path / f"data-{host_collects}") as broker:
                assert broker.running
                assert gc.isenabled() is host_collects
            assert gc.isenabled() is host_collects
        gc.enable()
        with pytest.raises(ConfigError):  # a failed start puts it back too
            EmbeddedBroker(log_dir=tmp_path / "file", overrides={"listeners": "nonsense"}).start()
        assert gc.isenabled()
    finally:
        gc.enable() if was else gc.disable()
