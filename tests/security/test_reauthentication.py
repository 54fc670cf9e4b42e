"""SASL re-authentication (KIP-368, issue 42): with ``connections.max.reauth.ms`` set, librdkafka,
kafka-python and the Java client re-authenticate on their connection and keep it; a client that
does not is closed at its first request after the session ends; an OAUTHBEARER session ends when
its token expires."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from typing import Any

from tests.security.oauth_provider import unsecured_token
from tests.security.sasl_wire import authenticate, bearer, handshake, metadata_frame
from tests.security.secure_broker import (
    PLAIN_JAAS,
    LogRecords,
    closed_by_peer,
    read_frame,
    start,
    wait_for_log,
)
from tests.support.jvm import java_bin, jvm_set_classpath
from tests.support.net import free_port

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
REAUTH_MS = 2000
#: Long enough for three sessions of REAUTH_MS each.
RUN_S = 7


def _broker(broker_factory: Any) -> tuple[Any, int]:
    port = free_port()
    broker = start(
        broker_factory,
        {"SASL_PLAINTEXT": port},
        {
            "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                f"{LOGIN_MODULE} required;"
            ),
            "listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS),
        },
    )
    return broker, port


def _librdkafka_keeps_its_connection(port: int) -> None:
    from confluent_kafka import Producer

    stats: list[dict[str, Any]] = []
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "statistics.interval.ms": 500,
            "stats_cb": lambda raw: stats.append(json.loads(raw)),
        }
    )
    deadline = time.monotonic() + RUN_S
    delivered: list[Any] = []
    while time.monotonic() < deadline:
        producer.produce("reauth", b"librdkafka", on_delivery=lambda e, m: delivered.append(e))
        producer.flush(10)
        producer.poll(0.2)
    producer.poll(0.6)
    assert delivered and all(e is None for e in delivered), delivered
    brokers = [b for b in stats[-1]["brokers"].values() if b["nodeid"] == 1]
    assert brokers and brokers[0]["connects"] == 1, brokers  # never reconnected
    assert brokers[0]["disconnects"] == 0, brokers


def _kafka_python_keeps_its_connection(port: int) -> None:
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class ShortTokens(AbstractTokenProvider):
        """Each token lives 3 s: the session ends with it (connections.max.reauth.ms is 2 s,
        so the shorter wins until the token's last 2 s)."""

        def token(self) -> str:
            return unsecured_token("carol", lifetime_s=3)

    with LogRecords("kafka.net.connection") as records:
        producer = KafkaProducer(
            bootstrap_servers=f"127.0.0.1:{port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=ShortTokens(),
        )
        deadline = time.monotonic() + RUN_S
        while time.monotonic() < deadline:
            producer.send("reauth", b"kafka-python").get(timeout=10)
            time.sleep(0.2)
        producer.close()
    # "<KafkaConnection node_id=1 host=[127.0.0.1:<port><-<local port>] ...>: Authenticated via"
    authenticated = [
        m.group(1)
        for line in records.lines
        if "node_id=1" in line and "Authenticated via SASL" in line
        for m in [re.search(r"<-(\d+)\]", line)]
        if m
    ]
    assert len(authenticated) >= 3, records.lines[-20:]  # first authentication + re-auths
    assert len(set(authenticated)) == 1, authenticated  # all on one connection


def _start_java(port: int) -> subprocess.Popen[str]:
    cp = jvm_set_classpath("clients")
    jaas = f'{LOGIN_MODULE} required unsecuredLoginStringClaim_sub="java";'
    return subprocess.Popen(
        [str(java_bin()), "-Xmx256m", "-XX:TieredStopAtLevel=1",
         "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, "tidelog.jvm.SaslSessions",
         f"127.0.0.1:{port}", "OAUTHBEARER", jaas, str(RUN_S), "reauth"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _java_kept_its_connection(java: subprocess.Popen[str]) -> None:
    stdout, stderr = java.communicate(timeout=180)
    check = next((line for line in stdout.splitlines() if line.startswith("CHECK ")), "")
    assert java.returncode == 0 and " ok " in check, f"{stdout}\n{stderr[-3000:]}"
    counts = dict(kv.split("=") for kv in check.split(" ok ", 1)[1].split())
    assert int(counts["reauths"]) >= 2, check
    # The bootstrap connection is closed once the node's is open; no other close.
    assert int(counts["closed"]) <= 1 and int(counts["created"]) <= 2, check


def test_clients_reauthenticate_and_keep_their_connection(broker_factory: Any) -> None:
    """The three clients run side by side (RUN_S seconds, about three sessions each)."""
    broker, port = _broker(broker_factory)
    java = _start_java(port) if java_bin() is not None else None
    failures: list[BaseException] = []

    def librdkafka() -> None:
        try:
            _librdkafka_keeps_its_connection(port)
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)

    thread = threading.Thread(target=librdkafka)
    thread.start()
    try:
        _kafka_python_keeps_its_connection(port)
    finally:
        thread.join(60)
    if failures:
        raise failures[0]
    if java is not None:
        _java_kept_its_connection(java)
    assert "SASL session expired" not in broker.log_text()


def test_a_client_that_does_not_reauthenticate_is_closed(broker_factory: Any) -> None:
    broker, port = _broker(broker_factory)
    # PLAIN: the session lasts connections.max.reauth.ms; the client is told so.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert handshake(sock, "PLAIN") == 0
        answer = authenticate(sock, b"\0alice\0alice-secret")
        assert answer is not None and answer.error_code == 0
        assert answer.session_lifetime_ms == REAUTH_MS
        ends = time.monotonic() + REAUTH_MS / 1000
        sock.sendall(metadata_frame())
        assert read_frame(sock) is not None  # within the session: answered
        time.sleep(max(ends - time.monotonic(), 0) + 0.2)  # the session's end is the condition
        sock.sendall(metadata_frame(4))
        assert closed_by_peer(sock)
    wait_for_log(broker, "(User:alice): its SASL session expired")

    # OAUTHBEARER: a token with 1.5 s left ends the session then (shorter than the setting).
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert handshake(sock, "OAUTHBEARER") == 0
        answer = authenticate(sock, bearer(unsecured_token("dave", lifetime_s=1.5)))
        assert answer is not None and answer.error_code == 0
        assert 0 < answer.session_lifetime_ms <= 1500, answer
        time.sleep(answer.session_lifetime_ms / 1000 + 0.2)
        sock.sendall(metadata_frame())
        assert closed_by_peer(sock)
    wait_for_log(broker, "(User:dave): its SASL session expired")

    # Re-authenticating in time keeps the connection; changing the principal does not.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert handshake(sock, "PLAIN") == 0
        assert authenticate(sock, b"\0alice\0alice-secret") is not None
        assert handshake(sock, "PLAIN") == 0
        again = authenticate(sock, b"\0alice\0alice-secret")
        assert again is not None and (again.error_code, again.session_lifetime_ms) == (0, REAUTH_MS)
        sock.sendall(metadata_frame())
        assert read_frame(sock) is not None
        time.sleep(1.0)  # Kafka allows one re-authentication a second
        assert handshake(sock, "PLAIN") == 0
        changed = authenticate(sock, b"\0bob\0bob-secret")
        assert changed is not None and changed.error_code == 58
        assert changed.error_message == (
            "Cannot change principals during re-authentication from User.alice: User.bob"
        )
        assert closed_by_peer(sock)
    assert "alice-secret" not in broker.log_text()
