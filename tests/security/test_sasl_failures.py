"""A wrong password or an unknown user fails fast with an authentication error in each Python
client, for PLAIN and SCRAM on SASL_PLAINTEXT and SASL_SSL (issue 26).

Kafka answers the last SaslAuthenticate with SASL_AUTHENTICATION_FAILED and its message before
it closes the connection. kafka-python 3.0.12 reads the answer and the end of the stream in one
go and drops the answer when both arrive together, so the broker must not close right behind
the answer.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.security.certs import CertFiles, ssl_settings
from tests.security.secure_broker import PLAIN_JAAS, SCRAM_JAAS, LogRecords, start
from tests.support.net import free_port

#: Each client must report the failure within this many seconds (its timeouts are 20-30 s).
FAST_S = 8.0

CASES = [
    ("SASL_PLAINTEXT", "PLAIN", "alice", "wrong"),
    ("SASL_PLAINTEXT", "PLAIN", "nobody", "x"),
    ("SASL_SSL", "PLAIN", "alice", "wrong"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "wrong"),
    ("SASL_SSL", "SCRAM-SHA-256", "alice", "wrong"),
    ("SASL_SSL", "SCRAM-SHA-256", "nobody", "x"),
]


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory, certs: CertFiles) -> Any:
    """One broker with a SASL_PLAINTEXT and a SASL_SSL listener, PLAIN and SCRAM-SHA-256
    on both, and a SCRAM credential for alice."""
    from tests.conftest import _factory, _stop_all

    factory, started = _factory(tmp_path_factory.mktemp("sasl_failures"))
    ports = {"SASL_PLAINTEXT": free_port(), "SASL_SSL": free_port()}
    settings = {
        **ssl_settings(certs, "listener.name.sasl_ssl."),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    }
    for listener in ports:
        prefix = f"listener.name.{listener.lower()}."
        settings[prefix + "plain.sasl.jaas.config"] = PLAIN_JAAS
        settings[prefix + "scram-sha-256.sasl.jaas.config"] = SCRAM_JAAS
    broker = start(factory, ports, settings)
    assert broker.stop() == 0
    done = subprocess.run(
        [
            *(sys.executable, "-m", "tidelog", "storage", "format"),
            *("--override", f"log.dirs={broker.log_dir}"),
            *("--add-scram", "SCRAM-SHA-256=[name=alice,iterations=4096,password=alice-secret]"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    broker.start()
    yield broker, ports
    _stop_all(started)


def _kafka_python_error(bootstrap: str, auth: dict[str, Any], certs: CertFiles) -> str:
    """What kafka-python got: its bootstrap retries any error, an authentication failure
    too, until bootstrap_timeout_ms, then raises "Unable to bootstrap"; the error it got is
    in its log."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    extra = {"ssl_cafile": str(certs.ca)} if auth["security_protocol"] == "SASL_SSL" else {}
    with LogRecords("kafka") as records, pytest.raises(KafkaError):
        KafkaProducer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=3000, **auth, **extra)
    return records.text()


def _confluent_error(bootstrap: str, protocol: str, mech: str, user: str, pw: str, ca: str) -> Any:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": protocol,
        "sasl.mechanism": mech,
        "sasl.username": user,
        "sasl.password": pw,
        "error_cb": errors.append,
    }
    if protocol == "SASL_SSL":
        conf["ssl.ca.location"] = ca
    p = Producer(conf)
    deadline = time.monotonic() + FAST_S
    while time.monotonic() < deadline:
        p.poll(0.1)
        for error in errors:
            if error.code() == KafkaError._AUTHENTICATION:
                return error
    return None


def _aiokafka_error(bootstrap: str, auth: dict[str, Any], certs: CertFiles) -> str:
    """What aiokafka got: start() raises "Unable to bootstrap" at once, after logging the
    error of each bootstrap server."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError
    from aiokafka.helpers import create_ssl_context

    async def attempt() -> None:
        extra: dict[str, Any] = {}
        if auth["security_protocol"] == "SASL_SSL":
            extra["ssl_context"] = create_ssl_context(cafile=str(certs.ca))
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **auth, **extra)
        try:
            await asyncio.wait_for(producer.start(), FAST_S)
        finally:
            await producer.stop()

    with LogRecords("aiokafka") as records, pytest.raises(KafkaConnectionError):
        asyncio.run(attempt())
    return records.text()


@pytest.mark.parametrize(("protocol", "mechanism", "user", "password"), CASES)
def test_bad_credentials_fail_fast_in_every_client(
    sasl_broker: Any, certs: CertFiles, protocol: str, mechanism: str, user: str, password: str
) -> None:
    broker, ports = sasl_broker
    bootstrap = f"127.0.0.1:{ports[protocol]}"
    auth = {
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }

    started = time.monotonic()
    log = _kafka_python_error(bootstrap, auth, certs)
    failures = [line for line in log.splitlines() if "Bootstrap connection to" in line]
    assert failures, log[-3000:]
    # Every attempt got the broker's answer, none a bare end of stream.
    for line in failures:
        assert "SaslAuthenticationFailedError" in line and "Authentication failed" in line, line
    assert "socket disconnected" not in log
    assert time.monotonic() - started < FAST_S

    error = _confluent_error(bootstrap, protocol, mechanism, user, password, str(certs.ca))
    assert error is not None, "librdkafka reported no authentication error"
    assert "Authentication failed" in error.str()

    started = time.monotonic()
    log = _aiokafka_error(bootstrap, auth, certs)
    assert "SaslAuthenticationFailed" in log and "Authentication failed" in log, log[-3000:]
    assert time.monotonic() - started < FAST_S
    assert broker.running
    assert "'wrong'" not in broker.log_text()


def test_failed_connection_closes_when_the_client_does_not(sasl_broker: Any) -> None:
    """A client that keeps its socket after the failure answer is closed by the broker."""
    import socket

    from tests.security.secure_broker import closed_by_peer, kstring, read_frame, request_frame

    _broker, ports = sasl_broker
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(request_frame(17, 1, kstring("PLAIN")))
        assert read_frame(sock) is not None
        token = b"\0alice\0wrong"
        sock.sendall(request_frame(36, 1, len(token).to_bytes(4, "big") + token))
        answer = read_frame(sock)
        assert answer is not None and int.from_bytes(answer[4:6], "big") == 58
        assert closed_by_peer(sock, timeout=5.0)
