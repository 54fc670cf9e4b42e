"""SASL with real clients: PLAIN over SASL_PLAINTEXT, SCRAM-SHA-256/512 over SASL_SSL, the
credential APIs and tools, and bad clients (each closes only its own connection)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
from typing import Any

from tests.security.certs import CertFiles, ssl_settings
from tests.security.secure_broker import (
    PLAIN_JAAS,
    SCRAM_JAAS,
    api_versions_frame,
    auth_error,
    closed_by_peer,
    kstring,
    read_frame,
    request_frame,
    start,
    wait_for_log,
)
from tests.support.net import free_port

TIDELOG = [sys.executable, "-m", "tidelog"]


def _plain_broker(broker_factory: Any) -> tuple[Any, int]:
    port = free_port()
    settings = {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    return start(broker_factory, {"SASL_PLAINTEXT": port}, settings), port


def test_plain_with_three_clients(broker_factory: Any) -> None:
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer

    broker, port = _plain_broker(broker_factory)
    bootstrap = f"127.0.0.1:{port}"
    auth = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }
    producer = KafkaProducer(bootstrap_servers=bootstrap, **auth)
    producer.send("plain", b"kafka-python").get(timeout=20)
    producer.close()
    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "bob",
        "sasl.password": "bob-secret",
    }
    p = Producer(conf)
    p.produce("plain", b"librdkafka")
    assert p.flush(20) == 0
    del p

    async def aio() -> None:
        from aiokafka import AIOKafkaProducer

        ap = AIOKafkaProducer(bootstrap_servers=bootstrap, **auth)
        await ap.start()
        try:
            await ap.send_and_wait("plain", b"aiokafka")
        finally:
            await ap.stop()

    asyncio.run(aio())
    consumer = KafkaConsumer(
        "plain",
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        group_id="plain-readers",
        **auth,
    )
    assert {m.value for m in consumer} == {b"kafka-python", b"librdkafka", b"aiokafka"}
    consumer.close()
    c = Consumer({**conf, "group.id": "g2", "auto.offset.reset": "earliest"})
    c.subscribe(["plain"])
    got = None
    for _ in range(40):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got = m.value()
            break
    c.close()
    assert got is not None
    assert "alice-secret" not in broker.log_text()


def _sasl_handshake(sock: socket.socket, mechanism: str, version: int = 1) -> bytes:
    sock.sendall(request_frame(17, version, kstring(mechanism)))
    answer = read_frame(sock)
    assert answer is not None
    return answer


def test_bad_sasl_clients_close_only_their_connection(broker_factory: Any) -> None:
    from kafka import KafkaProducer

    broker, port = _plain_broker(broker_factory)
    # A request other than ApiVersions / SaslHandshake before authentication: closed.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(api_versions_frame())
        assert read_frame(sock) is not None
        sock.sendall(request_frame(3, 1, (0).to_bytes(4, "big")))  # Metadata v1, no topics
        assert closed_by_peer(sock)
    wait_for_log(broker, "before SASL authentication")
    # An unknown mechanism: UNSUPPORTED_SASL_MECHANISM (33) listing PLAIN, then closed.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        answer = _sasl_handshake(sock, "GSSAPI")
        assert int.from_bytes(answer[4:6], "big") == 33
        assert b"PLAIN" in answer
        assert closed_by_peer(sock)
    wait_for_log(broker, "unsupported SASL mechanism 'GSSAPI'")
    # Garbage token: SASL_AUTHENTICATION_FAILED (58), then closed.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        answer = _sasl_handshake(sock, "PLAIN")
        assert int.from_bytes(answer[4:6], "big") == 0
        garbage = os.urandom(64).replace(b"\0", b"x")
        sock.sendall(request_frame(36, 1, len(garbage).to_bytes(4, "big") + garbage))
        answer = read_frame(sock)
        assert answer is not None and int.from_bytes(answer[4:6], "big") == 58
        assert closed_by_peer(sock)
    wait_for_log(broker, "Invalid SASL/PLAIN response")
    # A huge SaslAuthenticate (over sasl.server.max.receive.size): closed before buffering.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        _sasl_handshake(sock, "PLAIN")
        sock.sendall((64 * 1024 * 1024).to_bytes(4, "big") + b"\0" * 1024)
        assert closed_by_peer(sock)
    wait_for_log(broker, "sasl.server.max.receive.size")
    # Wrong password and unknown user through a real client.
    for user, password in (("alice", "wrong"), ("nobody", "x")):
        conf = {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": password,
        }
        assert auth_error(conf) is not None, f"{user} authenticated"
    log = wait_for_log(broker, "user 'nobody'")
    assert "Invalid username or password" in log
    assert "'wrong'" not in log
    # Legacy SaslHandshake v0: raw tokens without a request header.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert int.from_bytes(_sasl_handshake(sock, "PLAIN", 0)[4:6], "big") == 0
        token = b"\0alice\0alice-secret"
        sock.sendall(len(token).to_bytes(4, "big") + token)
        assert read_frame(sock) == b""
        sock.sendall(api_versions_frame(9))
        answer = read_frame(sock)
        assert answer is not None and answer[:4] == (9).to_bytes(4, "big")
    # Good clients were never disturbed.
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
    producer.send("still-fine", b"ok").get(timeout=20)
    producer.close()
    assert broker.running


def _scram_clients(bootstrap: str, certs: CertFiles, mechanism: str, user: str, pw: str) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"scram-{mechanism.lower()}"
    kp = KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=str(certs.ca),
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=pw,
    )
    kp.send(topic, b"kafka-python").get(timeout=20)
    kp.close()
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": pw,
        }
    )
    p.produce(topic, b"librdkafka")
    assert p.flush(20) == 0
    del p

    async def aio() -> None:
        from aiokafka import AIOKafkaProducer
        from aiokafka.helpers import create_ssl_context

        ap = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            security_protocol="SASL_SSL",
            ssl_context=create_ssl_context(cafile=str(certs.ca)),
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password=pw,
        )
        await ap.start()
        try:
            await ap.send_and_wait(topic, b"aiokafka")
        finally:
            await ap.stop()

    asyncio.run(aio())
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=str(certs.ca),
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=pw,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    assert {m.value for m in consumer} == {b"kafka-python", b"librdkafka", b"aiokafka"}
    consumer.close()


def test_scram_over_sasl_ssl(broker_factory: Any, certs: CertFiles) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    port = free_port()
    settings = {
        **ssl_settings(certs, "listener.name.sasl_ssl."),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    }
    broker = start(broker_factory, {"SASL_SSL": port}, settings)
    bootstrap = f"127.0.0.1:{port}"
    # The first credential is made offline, as kafka-storage.sh format --add-scram does.
    assert broker.stop() == 0
    done = subprocess.run(
        [
            *TIDELOG,
            "storage",
            "format",
            "--override",
            f"log.dirs={broker.log_dir}",
            "--add-scram",
            "SCRAM-SHA-512=[name=admin,iterations=8192,password=admin-secret]",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    broker.start()
    stored = (broker.log_dir / "__scram_credentials.json").read_text()
    assert "admin-secret" not in stored and json.loads(stored)["credentials"][0]["user"] == "admin"

    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
    )
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "alice",
                ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                b"alice-secret",
            ),
            UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-secret"
            ),
        ]
    )
    for future in futures.values():
        future.result(20)
    described = {
        user: future.result(20)
        for user, future in admin.describe_user_scram_credentials(["alice", "bob"]).items()
    }
    assert described["alice"].scram_credential_infos[0].iterations == 8192
    assert described["bob"].scram_credential_infos[0].mechanism == ScramMechanism.SCRAM_SHA_512

    _scram_clients(bootstrap, certs, "SCRAM-SHA-256", "alice", "alice-secret")
    _scram_clients(bootstrap, certs, "SCRAM-SHA-512", "bob", "bob-secret")

    # Wrong password, unknown user, and a mechanism the user has no credential for.
    for mechanism, user, password in (
        ("SCRAM-SHA-256", "alice", "wrong"),
        ("SCRAM-SHA-256", "nobody", "x"),
        ("SCRAM-SHA-512", "alice", "alice-secret"),
    ):
        conf = {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
        assert auth_error(conf) is not None, f"{user}/{mechanism} authenticated"
    log = wait_for_log(broker, "invalid credentials with SASL mechanism SCRAM-SHA-256")
    assert "Invalid user credentials" in log
    for secret in ("alice-secret", "bob-secret", "admin-secret"):
        assert secret not in log

    # Debian's kcat (librdkafka 2.0.2) sends its own nonce in front of ours, as Kafka allows.
    if shutil.which("kcat"):
        listed = subprocess.run(
            [
                "kcat",
                "-b",
                bootstrap,
                "-L",
                "-X",
                "security.protocol=SASL_SSL",
                "-X",
                "sasl.mechanisms=SCRAM-SHA-256",
                "-X",
                "sasl.username=alice",
                "-X",
                "sasl.password=alice-secret",
                "-X",
                f"ssl.ca.location={certs.ca}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert 'topic "scram-scram-sha-256"' in listed.stdout, listed.stderr

    # Credentials survive a restart.
    broker.restart()
    _scram_clients(bootstrap, certs, "SCRAM-SHA-256", "alice", "alice-secret")
