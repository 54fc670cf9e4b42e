"""TLS listeners with real clients: SSL, mutual TLS with a mapped principal, bad clients."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import sys
from typing import Any

import pytest

from tests.security.certs import KEY_PASSWORD, CertFiles, ssl_settings
from tests.security.secure_broker import (
    STANDARD_AUTHORIZER,
    closed_by_peer,
    start,
    wait_for_log,
)
from tests.support.net import free_port

ROOT_CMD = [sys.executable, "-m", "tidelog", "serve"]


def test_ssl_listener_with_three_clients(broker_factory: Any, certs: CertFiles) -> None:
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer

    ssl_port, plain_port = free_port(), free_port()
    start(broker_factory, {"SSL": ssl_port, "PLAINTEXT": plain_port}, ssl_settings(certs))
    bootstrap = f"127.0.0.1:{ssl_port}"

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=str(certs.ca)
    )
    producer.send("tls-topic", b"from kafka-python").get(timeout=20)
    producer.close()

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca),
        }
    )
    p.produce("tls-topic", b"from librdkafka")
    assert p.flush(20) == 0
    del p

    async def aio() -> None:
        from aiokafka import AIOKafkaProducer
        from aiokafka.helpers import create_ssl_context

        context = create_ssl_context(cafile=str(certs.ca))
        ap = AIOKafkaProducer(
            bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context
        )
        await ap.start()
        try:
            await ap.send_and_wait("tls-topic", b"from aiokafka")
        finally:
            await ap.stop()

    asyncio.run(aio())

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca),
            "group.id": "tls-readers",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe(["tls-topic"])
    seen: set[bytes] = set()
    for _ in range(60):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.add(m.value())
        if len(seen) == 3:
            break
    c.close()
    assert seen == {b"from kafka-python", b"from librdkafka", b"from aiokafka"}

    # The PLAINTEXT listener of the same broker serves the same data.
    consumer = KafkaConsumer(
        "tls-topic",
        bootstrap_servers=f"127.0.0.1:{plain_port}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    assert {m.value for m in consumer} == seen
    consumer.close()


def _mtls_broker(broker_factory: Any, certs: CertFiles, rules: str) -> tuple[Any, int, int]:
    ssl_port, plain_port = free_port(), free_port()
    settings = {
        **ssl_settings(certs, "listener.name.ssl."),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": rules,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS",  # the loopback PLAINTEXT listener administers
    }
    broker = start(broker_factory, {"SSL": ssl_port, "PLAINTEXT": plain_port}, settings)
    return broker, ssl_port, plain_port


def _grant(plain_port: int, principal: str, topic: str, *ops: str) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"})
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            principal,
            "*",
            getattr(AclOperation, op),
            AclPermissionType.ALLOW,
        )
        for op in ops
    ]
    for future in admin.create_acls(bindings).values():
        future.result(20)


def test_mutual_tls_principal_is_the_subject_dn(broker_factory: Any, certs: CertFiles) -> None:
    from confluent_kafka import KafkaError, Producer

    broker, ssl_port, plain_port = _mtls_broker(broker_factory, certs, "DEFAULT")
    _grant(plain_port, f"User:{certs.client_dn}", "mtls-ok", "WRITE", "DESCRIBE")
    _grant(plain_port, "User:ANONYMOUS", "mtls-ok", "CREATE")  # unused by the TLS client

    conf = {
        "bootstrap.servers": f"127.0.0.1:{ssl_port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
    }
    # The topic exists (created over PLAINTEXT, where ANONYMOUS is a super user).
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{plain_port}")
    admin.create_topics([NewTopic("mtls-ok", 1, 1), NewTopic("mtls-denied", 1, 1)])
    admin.close()

    errors: list[Any] = []
    delivered: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        (errors if err is not None else delivered).append(err or msg)

    async def aio() -> None:
        from aiokafka import AIOKafkaProducer
        from aiokafka.helpers import create_ssl_context

        context = create_ssl_context(
            cafile=str(certs.ca), certfile=str(certs.client_cert), keyfile=str(certs.client_key)
        )
        ap = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{ssl_port}", security_protocol="SSL", ssl_context=context
        )
        await ap.start()
        try:
            await ap.send_and_wait("mtls-ok", b"aiokafka signed")
        finally:
            await ap.stop()

    asyncio.run(aio())

    p = Producer({**conf, "message.timeout.ms": 10000})
    p.produce("mtls-ok", b"signed", on_delivery=report)
    p.produce("mtls-denied", b"refused", on_delivery=report)
    p.flush(20)
    assert [m.topic() for m in delivered] == ["mtls-ok"]
    assert len(errors) == 1 and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    log = wait_for_log(broker, "is Denied operation = DESCRIBE")
    assert f"Principal = User:{certs.client_dn}" in log


def test_mapping_rules_and_unknown_ca(broker_factory: Any, certs: CertFiles) -> None:
    from kafka import KafkaProducer

    rules = "RULE:^CN=([a-z]+),O=.*$/$1/U,DEFAULT"
    broker, ssl_port, plain_port = _mtls_broker(broker_factory, certs, rules)
    _grant(plain_port, "User:ALICE", "mapped", "WRITE", "DESCRIBE", "CREATE")
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{ssl_port}",
        security_protocol="SSL",
        ssl_cafile=str(certs.ca),
        ssl_certfile=str(certs.client_cert),
        ssl_keyfile=str(certs.client_key),
        enable_idempotence=False,
    )
    producer.send("mapped", b"as ALICE").get(timeout=20)
    producer.close()

    # A client certificate from a CA the broker does not trust: the handshake fails and
    # only that connection closes, with a log line naming the peer.
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(certs.rogue_cert), str(certs.rogue_key))
    assert _refused(context, ssl_port)
    wait_for_log(broker, "TLS handshake failed on listener SSL")
    # A client without a certificate on a listener that requires one.
    assert _refused(ssl.create_default_context(cafile=str(certs.ca)), ssl_port)
    assert "PEER_DID_NOT_RETURN_A_CERTIFICATE" in wait_for_log(broker, "DID_NOT_RETURN")
    assert broker.running


def _refused(context: ssl.SSLContext, port: int) -> bool:
    """True when the broker ends the TLS session (an alert, a reset or EOF)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(bytes.fromhex("0000000e00120000000000010003726177"))
                return tls.recv(1) == b""
        except (ssl.SSLError, ConnectionResetError):
            return True


def test_plaintext_client_on_a_tls_port_is_closed(broker_factory: Any, certs: CertFiles) -> None:
    from kafka import KafkaProducer

    ssl_port = free_port()
    broker = start(broker_factory, {"SSL": ssl_port}, ssl_settings(certs))
    with socket.create_connection(("127.0.0.1", ssl_port)) as sock:
        # An ApiVersions request in clear: not a TLS record.
        sock.sendall(bytes.fromhex("0000000e00120000000000010003726177"))
        assert closed_by_peer(sock)
    wait_for_log(broker, "TLS handshake")
    # The broker still serves TLS clients.
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{ssl_port}", security_protocol="SSL", ssl_cafile=str(certs.ca)
    )
    producer.send("after", b"ok").get(timeout=20)
    producer.close()


def test_inline_pem_keystore(broker_factory: Any, certs: CertFiles) -> None:
    from kafka import KafkaProducer

    ssl_port = free_port()
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": certs.server_key_plain.decode(),
        "ssl.keystore.certificate.chain": certs.server_chain.decode(),
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    }
    start(broker_factory, {"SSL": ssl_port}, settings)
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{ssl_port}", security_protocol="SSL", ssl_cafile=str(certs.ca)
    )
    producer.send("inline", b"ok").get(timeout=20)
    producer.close()
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.maximum_version = ssl.TLSVersion.TLSv1_3
    with socket.create_connection(("127.0.0.1", ssl_port)) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.version() == "TLSv1.2"
            assert tls.cipher()[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/nonexistent.jks"}, "PEM only"),
        ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "x.p12"}, "PEM only"),
        ({"ssl.keystore.type": "PEM"}, "has no key store"),
        ({"ssl.key.password": "wrong"}, "ssl.key.password"),
    ],
)
def test_bad_tls_settings_fail_at_start(
    tmp_path: Any, certs: CertFiles, settings: dict[str, str], fragment: str
) -> None:
    base = ssl_settings(certs)
    if "ssl.keystore.location" not in settings and settings.get("ssl.keystore.type") == "PEM":
        base.pop("ssl.keystore.location")
    base.update(settings)
    args = [*ROOT_CMD, "--override", f"listeners=SSL://127.0.0.1:{free_port()}"]
    args += ["--override", f"log.dirs={tmp_path}"]
    for key, value in base.items():
        args += ["--override", f"{key}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert fragment in done.stderr
    assert KEY_PASSWORD not in done.stderr and "wrong" not in done.stderr.replace(fragment, "")
