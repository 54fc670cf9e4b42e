"""OAUTHBEARER and re-authentication answers compared with Apache Kafka 4.4 configured the same
way (issue 42): a SASL_PLAINTEXT listener with PLAIN and OAUTHBEARER (Kafka's unsecured
validator) and ``connections.max.reauth.ms``; the same raw exchanges on both, byte for byte
where Kafka's answer is fixed (error codes, messages, challenges, session lifetimes)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.security.oauth_provider import unsecured_token
from tests.security.sasl_wire import (
    AuthenticateAnswer,
    authenticate,
    bearer,
    handshake,
    metadata_frame,
    oauthbearer_failure,
)
from tests.security.secure_broker import PLAIN_JAAS, closed_by_peer, read_frame
from tests.support.jvm import jvm_set_classpath
from tests.support.kafka_reference import KafkaProcess
from tests.support.net import free_port

pytestmark = pytest.mark.integration

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
REAUTH_MS = 2000


def _sasl_settings(port: int) -> dict[str, str]:
    return {
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
            f'{LOGIN_MODULE} required unsecuredLoginStringClaim_sub="admin";'
        ),
        "connections.max.reauth.ms": str(REAUTH_MS),
        "connection.failed.authentication.delay.ms": "50",
    }


@pytest.fixture(scope="module")
def ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    """{"tidelog": port, "kafka": port}: the SASL_PLAINTEXT listener of each."""
    from tests.conftest import _factory, _stop_all

    kafka = KafkaProcess(jvm_set_classpath("kafka"), tmp_path_factory.mktemp("kafka_sasl"))
    kafka_sasl = free_port()
    kafka.overrides = {
        "listeners": (
            f"PLAINTEXT://127.0.0.1:{kafka.port},CONTROLLER://127.0.0.1:{kafka.controller_port},"
            f"SASL_PLAINTEXT://127.0.0.1:{kafka_sasl}"
        ),
        "advertised.listeners": (
            f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_PLAINTEXT://127.0.0.1:{kafka_sasl}"
        ),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
        ),
        **_sasl_settings(kafka_sasl),
    }
    factory, started = _factory(tmp_path_factory.mktemp("tidelog_sasl"))
    tidelog_port = free_port()
    factory(
        {
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{tidelog_port}",
            **_sasl_settings(tidelog_port),
        }
    )
    kafka.start()
    try:
        yield {"tidelog": tidelog_port, "kafka": kafka_sasl}
    finally:
        kafka.stop()
        _stop_all(started)


def _both(ports: dict[str, int], exchange: Any) -> tuple[Any, Any]:
    return exchange(ports["tidelog"]), exchange(ports["kafka"])


def test_bad_oauthbearer_tokens_answer_as_kafka(ports: dict[str, int]) -> None:
    def expired(port: int) -> tuple[bytes, AuthenticateAnswer | None]:
        return oauthbearer_failure(port, unsecured_token("alice", lifetime_s=-60))

    ours, theirs = _both(ports, expired)
    assert ours == theirs
    assert theirs[0] == b'{"status":"invalid_token"}'

    def malformed(port: int) -> AuthenticateAnswer | None:
        # (Not a "Basic" scheme: Kafka 4.4 fails on that one inside its own error message
        # and closes without an answer; tidelog answers with the generic message.)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            assert handshake(sock, "OAUTHBEARER") == 0
            return authenticate(sock, b"n,,\x01user=abc\x01\x01")

    ours_m, theirs_m = _both(ports, malformed)
    assert ours_m == theirs_m and theirs_m is not None and theirs_m.error_code == 58


def test_session_lifetimes_and_expiry_as_kafka(ports: dict[str, int]) -> None:
    def lifetimes(port: int) -> tuple[int, int, int]:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            assert handshake(sock, "PLAIN") == 0
            plain = authenticate(sock, b"\0alice\0alice-secret")
        with socket.create_connection(("127.0.0.1", port)) as sock:
            assert handshake(sock, "OAUTHBEARER") == 0
            long_token = authenticate(sock, bearer(unsecured_token("alice")))
        with socket.create_connection(("127.0.0.1", port)) as sock:
            assert handshake(sock, "OAUTHBEARER") == 0
            short = authenticate(sock, bearer(unsecured_token("alice", lifetime_s=1.2)))
        assert plain is not None and long_token is not None and short is not None
        # the short token's lifetime, rounded to a tenth of a second (both clocks move)
        return (
            plain.session_lifetime_ms,
            long_token.session_lifetime_ms,
            (short.session_lifetime_ms + 50) // 100,
        )

    ours, theirs = _both(ports, lifetimes)
    assert ours[:2] == theirs[:2] == (REAUTH_MS, REAUTH_MS)
    assert abs(ours[2] - theirs[2]) <= 1 and 0 < theirs[2] <= 12

    def expiry(port: int) -> tuple[bool, bool]:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            assert handshake(sock, "PLAIN") == 0
            answer = authenticate(sock, b"\0alice\0alice-secret")
            assert answer is not None
            sock.sendall(metadata_frame())
            answered = read_frame(sock) is not None
            time.sleep(answer.session_lifetime_ms / 1000 + 0.3)
            sock.sendall(metadata_frame(4))
            return answered, closed_by_peer(sock)

    ours_e, theirs_e = _both(ports, expiry)
    assert ours_e == theirs_e == (True, True)


def test_reauthentication_rules_as_kafka(ports: dict[str, int]) -> None:
    def principal_change(port: int) -> tuple[AuthenticateAnswer | None, AuthenticateAnswer | None]:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            assert handshake(sock, "PLAIN") == 0
            assert authenticate(sock, b"\0alice\0alice-secret") is not None
            assert handshake(sock, "PLAIN") == 0
            same = authenticate(sock, b"\0alice\0alice-secret")
            time.sleep(1.1)
            assert handshake(sock, "PLAIN") == 0
            return same, authenticate(sock, b"\0bob\0bob-secret")

    ours, theirs = _both(ports, principal_change)
    assert ours == theirs
    assert theirs[1] is not None and theirs[1].error_message == (
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )

    def mechanism_change(port: int) -> tuple[int, AuthenticateAnswer | None]:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            assert handshake(sock, "PLAIN") == 0
            assert authenticate(sock, b"\0alice\0alice-secret") is not None
            code = handshake(sock, "OAUTHBEARER")
            return code, authenticate(sock, bearer(unsecured_token("alice")))

    ours_c, theirs_c = _both(ports, mechanism_change)
    assert ours_c == theirs_c, (ours_c, theirs_c)
