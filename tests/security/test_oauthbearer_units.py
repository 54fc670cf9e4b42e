"""The pure parts of OAUTHBEARER and re-authentication (issue 42): the client first message,
the unsecured and JWT validators with a clock passed in, the JWKS refresh (a local HTTP server),
the listener settings, and a connection's session with fake clocks."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tidelog.broker.request_channel import Close
from tidelog.broker.security.jwt_validator import JwksSource, JwtSettings, JwtValidator
from tidelog.broker.security.listener import listener_security
from tidelog.broker.security.oauthbearer import (
    InvalidClientFirst,
    TokenError,
    UnsecuredValidator,
    parse_client_first,
)
from tidelog.broker.security.sasl import ConnectionSecurity
from tidelog.broker.security.service import BrokerSecurity
from tidelog.config import ConfigError, load_broker_config

LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
NOW_MS = 1_800_000_000_000


def test_client_first_message() -> None:
    first = parse_client_first(b"n,a=alice,\x01auth=Bearer abc.def.\x01traceId=42\x01\x01")
    assert (first.token, first.authzid, first.extensions) == (
        "abc.def.",
        "alice",
        {"traceId": "42"},
    )
    assert parse_client_first(b"n,,\x01auth=bearer t0k-en_~+/=\x01\x01").token == "t0k-en_~+/="
    for bad, why in (
        (b"n,,\x01auth=Bearer x\x01", "Invalid OAUTHBEARER client first message"),
        (b"y,,\x01auth=Bearer x\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01traceId=1\x01\x01", "'auth' not specified"),
        (b"n,,\x01auth=Basic x\x01\x01", "Invalid scheme in OAUTHBEARER client first message"),
        (b"n,,\x01auth=Bearer a b\x01\x01", "invalid 'auth' format"),
        (b"\xff", "Invalid OAUTHBEARER client first message"),
    ):
        with pytest.raises(InvalidClientFirst, match=why):
            parse_client_first(bad)


def _unsecured(claims: dict[str, Any]) -> str:
    import base64

    def b64(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{b64({'alg': 'none'})}.{b64(claims)}."


def test_unsecured_validator_with_a_clock() -> None:
    validator = UnsecuredValidator(
        {
            "unsecuredValidatorRequiredScope": "read write",
            "unsecuredValidatorAllowableClockSkewMs": "1000",
        }
    )
    now_s = NOW_MS / 1000
    good = _unsecured({"sub": "alice", "iat": now_s, "exp": now_s + 60, "scope": "read write x"})
    token = validator.validate(good, NOW_MS)
    assert (token.principal_name, token.lifetime_ms) == ("alice", NOW_MS + 60_000)
    # Expiry and clock skew: valid until exp + 1 s.
    assert validator.validate(good, NOW_MS + 60_999).principal_name == "alice"
    with pytest.raises(TokenError, match="expired"):
        validator.validate(good, NOW_MS + 61_000)
    with pytest.raises(TokenError, match="issued at"):
        validator.validate(good, NOW_MS - 1_001)
    missing = _unsecured({"sub": "alice", "exp": now_s + 60, "scope": "read"})
    with pytest.raises(TokenError) as refused:
        validator.validate(missing, NOW_MS)
    assert refused.value.error_json() == '{"status":"insufficient_scope", "scope":"read write"}'
    for bad in (
        _unsecured({"sub": "alice"}),  # no exp
        _unsecured({"exp": now_s + 60}),  # no sub
        good.replace(good.split(".")[0], "eyJhbGciOiJSUzI1NiJ9"),  # alg RS256
        good + "signature",
        "not-a-jws",
    ):
        with pytest.raises(TokenError):
            validator.validate(bad, NOW_MS)
    with pytest.raises(ValueError, match="must not be negative"):
        UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "-1"})


class _Jwks:
    """A JWKS endpoint on 127.0.0.1 whose keys and failures a test sets."""

    def __init__(self) -> None:
        self.keys: list[dict[str, Any]] = []
        self.fail = 0
        self.fetches = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner.fetches += 1
                if owner.fail > 0:
                    owner.fail -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                raw = json.dumps({"keys": owner.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, key: rsa.RSAPrivateKey, kid: str) -> None:
        public = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
        self.keys.append({**public, "kid": kid, "use": "sig", "alg": "RS256"})


@pytest.fixture
def jwks() -> Iterator[_Jwks]:
    endpoint = _Jwks()
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()


def _sign(key: rsa.RSAPrivateKey, kid: str, **claims: Any) -> str:
    now = NOW_MS // 1000
    body = {"sub": "alice", "iat": now, "exp": now + 300, "aud": "kafka", "iss": "idp", **claims}
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})


def test_jwt_validator_claims_and_key_rotation(jwks: _Jwks) -> None:
    first = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks.add(first, "k1")
    jwks.fail = 2  # the first two fetches fail: retried with backoff within the start-up wait
    settings = JwtSettings(
        jwks.url,
        retry_backoff_ms=10,
        retry_backoff_max_ms=2000,
        expected_audience=("kafka",),
        expected_issuer="idp",
    )
    source = JwksSource(settings)
    try:
        assert set(source.keys) == {"k1"} and jwks.fetches == 3
        validator = JwtValidator(settings, source)
        token = validator.validate(_sign(first, "k1", scope=["a", "b"]), NOW_MS)
        assert (token.principal_name, token.scopes) == ("alice", frozenset({"a", "b"}))
        assert token.lifetime_ms == NOW_MS + 300_000
        cases = {
            "expired": (_sign(first, "k1", exp=NOW_MS // 1000 - 31), NOW_MS),
            "audience": (_sign(first, "k1", aud=["other"]), NOW_MS),
            "issuer": (_sign(first, "k1", iss="evil"), NOW_MS),
            "issued at": (_sign(first, "k1", iat=None), NOW_MS),
            "not valid before": (_sign(first, "k1", nbf=NOW_MS // 1000 + 60), NOW_MS),
            "'sub' claim": (_sign(first, "k1", sub=""), NOW_MS),
        }
        for why, (bad, now) in cases.items():
            with pytest.raises(TokenError, match=why):
                validator.validate(bad, now)
        # Within the clock skew (30 s) an expired token still passes.
        validator.validate(_sign(first, "k1", exp=NOW_MS // 1000 - 29), NOW_MS)
        # A key the set does not have yet: refused, and the set is fetched again at once.
        second = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwks.add(second, "k2")
        rotated = _sign(second, "k2")
        with pytest.raises(TokenError, match="kid 'k2'"):
            validator.validate(rotated, NOW_MS)
        deadline = threading.Event()
        for _ in range(100):
            if "k2" in source.keys:
                break
            deadline.wait(0.05)
        assert validator.validate(rotated, NOW_MS).principal_name == "alice"
    finally:
        source.close()


def test_jwt_validator_refuses_an_aud_without_expected_audience(jwks: _Jwks) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks.add(key, "k1")
    settings = JwtSettings(jwks.url)
    source = JwksSource(settings)
    try:
        validator = JwtValidator(settings, source)
        with pytest.raises(TokenError, match=r"expected\.audience is not set"):
            validator.validate(_sign(key, "k1"), NOW_MS)
        assert validator.validate(_sign(key, "k1", aud=None), NOW_MS).principal_name == "alice"
    finally:
        source.close()


def _config(**settings: str | None) -> Any:
    """A broker config with a SASL_PLAINTEXT listener (PLAIN, OAUTHBEARER); None drops one."""
    base: dict[str, str | None] = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9092",
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="a";'
        ),
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{LOGIN} required;",
    }
    merged = {**base, **settings}
    overrides = [f"{k}={v}" for k, v in merged.items() if v is not None]
    return load_broker_config(overrides=overrides, environ={})


def test_listener_settings_per_mechanism() -> None:
    config = _config(
        **{
            "connections.max.reauth.ms": "5000",
            "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": "1000",
        }
    )
    security = listener_security(config, "SASL_PLAINTEXT", "SASL_PLAINTEXT")
    assert security.max_reauth_ms == {"PLAIN": 5000, "OAUTHBEARER": 1000}
    assert isinstance(security.oauthbearer, UnsecuredValidator)
    for settings, setting in (
        (
            {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": None},
            "oauthbearer.sasl.jaas.config",
        ),
        (
            {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "x.Y"},
            "sasl.server.callback.handler.class",
        ),
        (
            {
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
                    "org.apache.kafka.common.security.oauthbearer."
                    "OAuthBearerValidatorCallbackHandler"
                )
            },
            "sasl.oauthbearer.jwks.endpoint.url",
        ),
    ):
        config = _config(**settings)
        with pytest.raises(ConfigError) as refused:
            listener_security(config, "SASL_PLAINTEXT", "SASL_PLAINTEXT")
        assert setting in str(refused.value)


def test_a_session_ends_with_its_token(tmp_path: Path) -> None:
    """Fake clocks: the session lasts min(connections.max.reauth.ms, the token's life); a
    request after it closes the connection, a SaslHandshake begins a re-authentication."""
    config = _config(**{"connections.max.reauth.ms": "10000"})
    wall = [NOW_MS]
    mono = [100.0]
    security = BrokerSecurity(config, tmp_path, monotonic=lambda: mono[0], wall_ms=lambda: wall[0])
    security.configure_listeners([("SASL_PLAINTEXT", "SASL_PLAINTEXT")])
    session = security.session_for("SASL_PLAINTEXT", "127.0.0.1", 5555)
    assert isinstance(session, ConnectionSecurity)
    assert session.handshake("OAUTHBEARER", 1).name == "none"
    token = _unsecured({"sub": "alice", "exp": NOW_MS / 1000 + 4})
    error, _, _ = session.authenticate(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    assert error.name == "none" and session.principal == "User:alice"
    assert session.session_lifetime_ms == 4000  # the token's, shorter than the setting
    metadata = (3).to_bytes(2, "big") + (1).to_bytes(2, "big") + (1).to_bytes(4, "big")
    metadata += (3).to_bytes(2, "big") + b"raw" + (0).to_bytes(4, "big")
    assert session.check_session(metadata) is None
    mono[0] += 4.001
    assert isinstance(session.check_session(metadata), Close)
    assert security.expired_connections_killed == 1
    # A SaslHandshake instead begins a re-authentication, whatever the time.
    handshake = (17).to_bytes(2, "big") + (1).to_bytes(2, "big") + (2).to_bytes(4, "big")
    handshake += (3).to_bytes(2, "big") + b"raw" + (11).to_bytes(2, "big") + b"OAUTHBEARER"
    assert session.check_session(handshake) is None
    assert not session.authenticated and session.principal == "User:alice"
    wall[0] += 4000
    fresh = _unsecured({"sub": "alice", "exp": wall[0] / 1000 + 3600})
    assert session.handshake("OAUTHBEARER", 1).name == "none"
    error, _, _ = session.authenticate(f"n,,\x01auth=Bearer {fresh}\x01\x01".encode())
    assert error.name == "none" and session.authenticated
    assert session.session_lifetime_ms == 10000 and security.reauthentications == 1
