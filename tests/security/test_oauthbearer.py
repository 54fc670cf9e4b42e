"""SASL/OAUTHBEARER with real clients (issue 42): Kafka's unsecured development tokens, and
signed JWTs from an identity provider the test runs on 127.0.0.1 (``oauth_provider.py``: a
token endpoint and its JWKS over HTTPS) checked as Kafka's OAuthBearerValidatorCallbackHandler
checks them; bad tokens fail with Kafka's error flow; ACLs apply to the token's subject."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.security import oauth_provider, sasl_wire
from tests.security.certs import CertFiles
from tests.security.oauth_provider import AUDIENCE, ISSUER, Provider, unsecured_token
from tests.security.sasl_wire import oauthbearer_failure
from tests.security.secure_broker import STANDARD_AUTHORIZER, auth_error, start, wait_for_log
from tests.support.net import free_port

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
JWT_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
INVALID_TOKEN = '{"status":"invalid_token"}'
#: SASL_AUTHENTICATION_FAILED
FAILED = 58


@pytest.fixture(scope="module")
def provider(certs: CertFiles) -> Iterator[Provider]:
    yield from oauth_provider.serve(certs)


class _TokenProvider:
    """kafka-python's ``sasl_oauth_token_provider`` (an AbstractTokenProvider)."""

    def __new__(cls, make: Any) -> Any:
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Provider(AbstractTokenProvider):
            def token(self) -> str:
                return str(make())

        return Provider()


def _oauthbearer_broker(
    broker_factory: Any, jaas_options: str = "", jwt: bool = False, **settings: str
) -> tuple[Any, int]:
    """A broker with a SASL_PLAINTEXT listener for OAUTHBEARER (Kafka's JAAS login module with
    ``jaas_options``); ``jwt``: signed tokens (OAuthBearerValidatorCallbackHandler)."""
    port = free_port()
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    listener = {
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        prefix + "sasl.jaas.config": f"{LOGIN_MODULE} required {jaas_options};",
    }
    if jwt:
        listener[prefix + "sasl.server.callback.handler.class"] = JWT_VALIDATOR
    return start(broker_factory, {"SASL_PLAINTEXT": port}, {**listener, **settings}), port


def _rdkafka_conf(port: int, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        **extra,
    }


def _produce_rdkafka(conf: dict[str, Any], topic: str, value: bytes) -> list[Any]:
    """Produce one record; the errors librdkafka reported (the delivery must succeed)."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({**conf, "error_cb": errors.append})
    delivered: list[Any] = []
    producer.produce(topic, value, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0, errors
    assert delivered == [None], (delivered, errors)
    return errors


def _kafka_python_produce(port: int, make_token: Any, topic: str, value: bytes) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=_TokenProvider(make_token),
    )
    try:
        producer.send(topic, value).get(timeout=30)
    finally:
        producer.close()


def _aiokafka_produce(port: int, make_token: Any, topic: str, value: bytes) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return str(make_token())

    async def produce() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Provider(),
        )
        await producer.start()
        try:
            await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()

    asyncio.run(produce())


def _consume_all(port: int, make_token: Any, topic: str, count: int) -> set[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=f"127.0.0.1:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=_TokenProvider(make_token),
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    got: set[bytes] = set()
    try:
        for message in consumer:
            got.add(message.value)
            if len(got) >= count:
                break
    finally:
        consumer.close()
    return got


def test_unsecured_tokens_with_three_clients(broker_factory: Any) -> None:
    broker, port = _oauthbearer_broker(broker_factory, 'unsecuredLoginStringClaim_sub="admin"')
    topic = "unsecured"
    # librdkafka's own unsecured tokens (principal=...), and a token from oauth_cb.
    _produce_rdkafka(
        _rdkafka_conf(
            port,
            **{
                "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": "principal=alice",
            },
        ),
        topic,
        b"librdkafka-unsecured",
    )
    _produce_rdkafka(
        _rdkafka_conf(port, oauth_cb=lambda _config: (unsecured_token("bob"), time.time() + 3600)),
        topic,
        b"librdkafka-oauth_cb",
    )
    _kafka_python_produce(port, lambda: unsecured_token("carol"), topic, b"kafka-python")
    got = _consume_all(port, lambda: unsecured_token("carol"), topic, 3)
    assert got == {b"librdkafka-unsecured", b"librdkafka-oauth_cb", b"kafka-python"}

    # An expired token: the error JSON as a challenge, then SASL_AUTHENTICATION_FAILED with it.
    expired = unsecured_token("alice", lifetime_s=-60)
    challenge, answer = oauthbearer_failure(port, expired)
    assert challenge == INVALID_TOKEN.encode()
    assert answer is not None and (answer.error_code, answer.error_message) == (
        FAILED,
        INVALID_TOKEN,
    )
    log = wait_for_log(broker, "invalid token: the token expired")
    # A token with no subject, and one that is signed (not an unsecured JWS).
    no_sub = unsecured_token("", lifetime_s=60)
    assert oauthbearer_failure(port, no_sub)[0] == INVALID_TOKEN.encode()
    log = wait_for_log(broker, "'sub' claim is missing")
    assert expired not in log and no_sub not in log


def _jwt_broker(broker_factory: Any, provider: Provider, **settings: str) -> tuple[Any, int]:
    return _oauthbearer_broker(
        broker_factory,
        f'ssl.truststore.location="{provider.ca}"',
        jwt=True,
        **{
            "sasl.oauthbearer.jwks.endpoint.url": provider.jwks_url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
            **settings,
        },
    )


def test_signed_tokens_from_an_identity_provider(broker_factory: Any, provider: Provider) -> None:
    broker, port = _jwt_broker(
        broker_factory,
        provider,
        **{
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin",
            "allow.everyone.if.no.acl.found": "true",
        },
    )
    # librdkafka's OIDC client: client credentials to the token endpoint (HTTPS).
    oidc = _rdkafka_conf(
        port,
        **{
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "svc-alice",
            "sasl.oauthbearer.client.secret": "alice-client-secret",
            "sasl.oauthbearer.token.endpoint.url": provider.token_url,
            "https.ca.location": str(provider.ca),
        },
    )
    issued_before = len(provider.issued)
    _produce_rdkafka(oidc, "signed", b"oidc")
    assert len(provider.issued) > issued_before  # the token came from our endpoint
    _produce_rdkafka(
        _rdkafka_conf(port, oauth_cb=lambda _c: (provider.mint("bob"), time.time() + 3600)),
        "signed",
        b"oauth_cb",
    )
    _kafka_python_produce(port, lambda: provider.mint("carol"), "signed", b"kafka-python")
    _aiokafka_produce(port, lambda: provider.mint("dave"), "signed", b"aiokafka")
    assert _consume_all(port, lambda: provider.mint("carol"), "signed", 4) == {
        b"oidc",
        b"oauth_cb",
        b"kafka-python",
        b"aiokafka",
    }

    # ACLs apply to the token's subject: only alice may write to "payments".
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(
        _rdkafka_conf(port, oauth_cb=lambda _c: (provider.mint("admin"), time.time() + 3600))
    )
    binding = AclBinding(
        ResourceType.TOPIC,
        "payments",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([binding]).values():
        future.result(30)
    _produce_rdkafka(oidc, "payments", b"from alice")
    from confluent_kafka import Producer

    bob = Producer(
        _rdkafka_conf(port, oauth_cb=lambda _c: (provider.mint("bob"), time.time() + 3600))
    )
    outcome: list[Any] = []
    bob.produce("payments", b"from bob", on_delivery=lambda err, msg: outcome.append(err))
    bob.flush(30)
    assert outcome and outcome[0] is not None
    assert outcome[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    wait_for_log(broker, "Principal = User:bob is Denied operation")

    # Bad tokens, each with Kafka's error flow and the reason in the broker log only.
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    bad = {
        "expired": (provider.mint("alice", lifetime_s=-120), "the token expired"),
        "badly signed": (provider.mint("alice", key=other_key), "does not verify"),
        "wrong audience": (provider.mint("alice", aud="someone-else"), "expected.audience)"),
        "wrong issuer": (provider.mint("alice", iss="https://evil.test"), "expected.issuer"),
        "unknown key id": (provider.mint("alice", kid="nope"), "has the token's kid 'nope'"),
        "unsigned": (unsecured_token("alice"), "not signed"),
    }
    for case, (token, reason) in bad.items():
        challenge, answer = oauthbearer_failure(port, token)
        assert challenge == INVALID_TOKEN.encode(), case
        assert answer is not None, case
        assert (answer.error_code, answer.error_message) == (FAILED, INVALID_TOKEN), case
        log = wait_for_log(broker, reason)
        assert token not in log, case
    # The same through a real client: librdkafka reports the authentication failure.
    error = auth_error(
        _rdkafka_conf(port, oauth_cb=lambda _c: (bad["wrong audience"][0], time.time() + 3600))
    )
    assert error is not None and "invalid_token" in error, error
    # A malformed client first message: Kafka's generic answer.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert sasl_wire.handshake(sock, "OAUTHBEARER") == 0
        answer = sasl_wire.authenticate(sock, b"n,,\x01auth=Basic abc\x01\x01")
        assert answer is not None and answer.error_code == FAILED
        assert answer.error_message == (
            "Authentication failed during authentication due to invalid credentials with SASL "
            "mechanism OAUTHBEARER"
        )
    wait_for_log(broker, "Invalid scheme in OAUTHBEARER client first message: Basic")
    assert "client-secret" not in broker.log_text()

    # The ACLs survive a restart and a SIGKILL (the JWKS is fetched again at each start-up).
    for stop in ("restart", "kill"):
        fetches = provider.jwks_fetches
        if stop == "kill":
            broker.kill()
            broker.start()
        else:
            broker.restart()
        assert provider.jwks_fetches > fetches
        _produce_rdkafka(oidc, "payments", f"after {stop}".encode())
        assert auth_error(
            _rdkafka_conf(port, oauth_cb=lambda _c: (bad["expired"][0], time.time() + 3600))
        )
    bob = Producer(
        _rdkafka_conf(port, oauth_cb=lambda _c: (provider.mint("bob"), time.time() + 3600))
    )
    outcome.clear()
    bob.produce("payments", b"from bob", on_delivery=lambda err, msg: outcome.append(err))
    bob.flush(30)
    assert outcome and outcome[0] is not None and outcome[0].name() == "TOPIC_AUTHORIZATION_FAILED"


def test_jwks_file_and_claim_names(broker_factory: Any, provider: Provider, tmp_path: Any) -> None:
    """A JWKS read from a file:// URL; the principal from sasl.oauthbearer.sub.claim.name."""
    path = oauth_provider.jwks_file(provider, tmp_path)
    _, port = _oauthbearer_broker(
        broker_factory,
        jwt=True,
        **{
            "sasl.oauthbearer.jwks.endpoint.url": path.as_uri(),
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.sub.claim.name": "client_id",
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:svc-admin",
        },
    )
    # Only the super user may do anything: the principal must come from client_id, not sub.
    token = provider.mint("nobody", client_id="svc-admin")
    _produce_rdkafka(
        _rdkafka_conf(port, oauth_cb=lambda _c: (token, time.time() + 3600)), "claims", b"x"
    )
    # A token without the claim is refused.
    challenge, _ = oauthbearer_failure(port, provider.mint("svc-admin"))
    assert json.loads(challenge) == {"status": "invalid_token"}
