"""OAUTHBEARER figures: the cost of one token validation, and a connection's set-up and
re-authentication with a signed token.

    .venv/bin/python scripts/bench/oauthbearer.py --validations 2000 --runs 5 --connections 200

1. In process: ``JwtValidator.validate`` of an RS256 JWT (2048-bit key, JWKS from a file) and
   ``UnsecuredValidator.validate`` of an unsecured JWS, ``--validations`` each, ``--runs``
   times; the median microseconds per validation.
2. A broker with a SASL_PLAINTEXT listener checking RS256 tokens
   (OAuthBearerValidatorCallbackHandler, the JWKS from a file): ``--connections`` sequential
   raw connections, each TCP connect, SaslHandshake and SaslAuthenticate (the p50 of that),
   then a re-authentication on the same connection (SaslHandshake + SaslAuthenticate; its p50).

The machine is shared: figures are rough; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

import jwt  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402

from tests.security.oauth_provider import unsecured_token  # noqa: E402
from tests.security.sasl_wire import authenticate, bearer, handshake  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.net import free_port  # noqa: E402
from tidelog.broker.security.jwt_validator import (  # noqa: E402
    JwksSource,
    JwtSettings,
    JwtValidator,
)
from tidelog.broker.security.oauthbearer import UnsecuredValidator  # noqa: E402

JWT_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def validations(jwks: Path, key: rsa.RSAPrivateKey, count: int, runs: int) -> None:
    settings = JwtSettings(jwks.as_uri())
    signed = JwtValidator(settings, JwksSource(settings))
    now = int(time.time())
    claims = {"sub": "alice", "iat": now, "exp": now + 3600}
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})
    unsecured = UnsecuredValidator({})
    plain = unsecured_token("alice")
    cases = (
        ("RS256 JWT (JwtValidator)", lambda: signed.validate(token, now_ms())),
        ("unsecured JWS (UnsecuredValidator)", lambda: unsecured.validate(plain, now_ms())),
    )
    for name, validate in cases:
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            for _ in range(count):
                validate()
            times.append((time.perf_counter() - t0) / count * 1e6)
        print(f"{name}: {statistics.median(times):.1f} us per validation (median of {runs})")


def connections(jwks: Path, key: rsa.RSAPrivateKey, count: int, work: Path) -> None:
    port = free_port()
    broker = BrokerProcess(
        work / "data",
        {
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.jaas.config": f"{LOGIN_MODULE} required;",
            "sasl.server.callback.handler.class": JWT_VALIDATOR,
            "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
            "connections.max.reauth.ms": "600000",
        },
        port=port,
    ).start()
    try:
        now = int(time.time())
        claims = {"sub": "alice", "iat": now, "exp": now + 3600}
        token = bearer(jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"}))
        setup: list[float] = []
        again: list[float] = []
        for _ in range(count):
            t0 = time.perf_counter()
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                assert handshake(sock, "OAUTHBEARER") == 0
                answer = authenticate(sock, token)
                assert answer is not None and answer.error_code == 0, answer
                setup.append(time.perf_counter() - t0)
                t1 = time.perf_counter()
                assert handshake(sock, "OAUTHBEARER") == 0
                answer = authenticate(sock, token)
                assert answer is not None and answer.error_code == 0, answer
                again.append(time.perf_counter() - t1)
        print(
            f"connect + SaslHandshake + SaslAuthenticate (RS256): p50 "
            f"{statistics.median(setup) * 1e3:.2f} ms; re-authentication p50 "
            f"{statistics.median(again) * 1e3:.2f} ms ({count} connections)"
        )
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--validations", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--connections", type=int, default=200)
    args = parser.parse_args()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        jwks = work / "jwks.json"
        jwks.write_text(json.dumps({"keys": [{**public, "kid": "k1", "alg": "RS256"}]}))
        validations(jwks, key, args.validations, args.runs)
        connections(jwks, key, args.connections, work)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
