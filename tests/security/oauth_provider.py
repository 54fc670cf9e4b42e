"""A small OAuth 2 / OIDC identity provider for the OAUTHBEARER tests, on 127.0.0.1 (HTTPS with
the test CA): ``/token`` answers the client-credentials grant with a signed JWT (RFC 6749 4.4),
``/jwks`` serves the public keys. Tokens are signed with PyJWT; tests can also mint tokens
directly (``mint``) with any claims or with a key the JWKS does not hold."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.security.certs import CertFiles

ISSUER = "https://idp.tidelog.test"
AUDIENCE = "tidelog-broker"
#: client id -> (secret, subject of its tokens)
CLIENTS = {"svc-alice": ("alice-client-secret", "alice"), "svc-bob": ("bob-client-secret", "bob")}


def unsecured_token(sub: str, lifetime_s: float = 3600, **claims: Any) -> str:
    """An unsecured JWS (``alg`` none, empty signature), as Kafka's unsecured login makes."""

    def b64(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = time.time_ns() // 1_000_000 / 1000  # whole ms, as Kafka's unsecured login writes it
    body = {"sub": sub, "iat": now, "exp": now + lifetime_s, **claims}
    return f"{b64({'alg': 'none'})}.{b64(body)}."


@dataclass
class Provider:
    base_url: str
    key: rsa.RSAPrivateKey
    #: The CA that signed the provider's HTTPS certificate (PEM).
    ca: Path = Path()
    kid: str = "key-1"
    #: Lifetime of the tokens /token hands out (tests shorten it for re-authentication).
    token_lifetime_s: int = 3600
    issued: list[str] = field(default_factory=list)
    jwks_fetches: int = 0

    @property
    def jwks_url(self) -> str:
        return self.base_url + "/jwks"

    @property
    def token_url(self) -> str:
        return self.base_url + "/token"

    def jwks(self) -> dict[str, Any]:
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def mint(
        self,
        sub: str = "alice",
        *,
        lifetime_s: float | None = None,
        key: rsa.RSAPrivateKey | None = None,
        kid: str | None = None,
        **claims: Any,
    ) -> str:
        now = int(time.time())
        body: dict[str, Any] = {
            "sub": sub,
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + int(lifetime_s if lifetime_s is not None else self.token_lifetime_s),
            "scope": "kafka",
            **claims,
        }
        body = {k: v for k, v in body.items() if v is not None}
        headers = {"kid": kid or self.kid}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers=headers)


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _json(self, status: int, value: dict[str, Any]) -> None:
            raw = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path == "/jwks":
                provider.jwks_fetches += 1
                self._json(200, provider.jwks())
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(min(size, 65536)).decode())
            client_id = form.get("client_id", [""])[0]
            secret = form.get("client_secret", [""])[0]
            auth = self.headers.get("Authorization", "")
            if auth.lower().startswith("basic "):
                decoded = base64.b64decode(auth[6:]).decode()
                client_id, _, secret = decoded.partition(":")
                client_id = urllib.parse.unquote(client_id)
                secret = urllib.parse.unquote(secret)
            known = CLIENTS.get(client_id)
            if (
                self.path != "/token"
                or form.get("grant_type") != ["client_credentials"]
                or known is None
                or known[0] != secret
            ):
                self._json(401, {"error": "invalid_client"})
                return
            token = provider.mint(known[1])
            provider.issued.append(token)
            self._json(
                200,
                {
                    "access_token": token,
                    "token_type": "bearer",
                    "expires_in": provider.token_lifetime_s,
                },
            )

    return Handler


def serve(certs: CertFiles) -> Iterator[Provider]:
    """Run the provider (HTTPS, the test CA's 127.0.0.1 certificate) until the generator ends."""
    key_file = certs.dir / "idp.key"
    chain_file = certs.dir / "idp.pem"
    key_file.write_bytes(certs.server_key_plain)
    chain_file.write_bytes(certs.server_chain)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(chain_file), str(key_file))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    provider = Provider("", key, ca=certs.ca)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(provider))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    provider.base_url = f"https://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()


def jwks_file(provider: Provider, directory: Path) -> Path:
    path = directory / "jwks.json"
    path.write_text(json.dumps(provider.jwks()))
    return path
