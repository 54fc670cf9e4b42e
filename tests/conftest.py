"""Shared fixtures: a REAL tidelog broker in a subprocess.

The broker is started exactly as ``tidelog serve`` is (``python -m tidelog serve``)
on a free 127.0.0.1 port with a temporary log dir, and the fixture waits for its "tidelog
listening on" line. Tear-down sends SIGTERM and checks that the broker exits 0 (graceful shutdown).

Usage::

    def test_something(broker):                 # a fresh broker per test
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)

    def test_settings(broker_factory):
        b = broker_factory({"num.partitions": "3", "log.flush.interval.messages": "1"})
        ...
        b.restart()                              # same port and log dir, SIGTERM + start
        b.restart({"auto.create.topics.enable": "false"})  # ... with changed overrides
        b.kill()                                 # SIGKILL (crash tests); then b.start()

    def test_shared(module_broker):              # one broker for the whole test module

The class is ``BrokerProcess`` of ``tests/support/broker_process.py``; its ``log_text()``
returns what the broker logged (stderr), for assertions and for failure messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.jvm import jvm_set_classpath
from tests.support.kafka_reference import KafkaProcess

BrokerFactory = Callable[..., BrokerProcess]


def _factory(base: Path) -> tuple[BrokerFactory, list[BrokerProcess]]:
    started: list[BrokerProcess] = []

    def start(
        overrides: Mapping[str, str] | None = None, *, config_path: Path | None = None
    ) -> BrokerProcess:
        log_dir = base / f"broker{len(started)}" / "data"
        log_dir.mkdir(parents=True)
        b = BrokerProcess(log_dir, overrides, config_path=config_path)
        started.append(b)
        return b.start()

    return start, started


def _stop_all(started: list[BrokerProcess]) -> None:
    failures = []
    for b in started:
        if b.running:
            code = b.stop()
            if code != 0:
                failures.append(f"broker {b.bootstrap} exited {code}:\n{b.log_text()[-5000:]}")
    assert not failures, "\n".join(failures)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    """``broker_factory(overrides=None, *, config_path=None) -> BrokerProcess`` (started).

    ``overrides`` are ``--override`` settings; ``config_path`` a YAML file for ``--config``
    (the listener and log dir are always set by the fixture).

    Every broker started is stopped with SIGTERM at tear-down and must exit 0.
    """
    start, started = _factory(tmp_path)
    yield start
    _stop_all(started)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """A fresh broker on built-in defaults (plus listener and log dir)."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the tests of a module (use distinct topic names)."""
    start, started = _factory(tmp_path_factory.mktemp("module_broker"))
    yield start()
    _stop_all(started)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaProcess]:
    """One Apache Kafka (tests/jvm/kafka, KRaft combined mode) for the whole session; skipped
    with one line when Java or its jars are missing. Use distinct topic names."""
    kafka = KafkaProcess(jvm_set_classpath("kafka"), tmp_path_factory.mktemp("kafka_reference"))
    yield kafka.start()
    kafka.stop()
