"""The SCRAM-SHA-256 and SCRAM-SHA-512 server exchange (RFC 5802, RFC 7677).

client-first ``n,,n=user,r=cnonce`` -> server-first ``r=cnonce+snonce,s=salt,i=iterations`` ->
client-final ``c=biws,r=nonce,p=proof`` -> server-final ``v=signature``. Channel binding is not
offered (``p=`` in the GS2 header is refused). Credentials and their file are
``storage/scram_credentials.py``'s.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from tidelog.storage.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_BY_TYPE,
    MECHANISMS,
    MIN_ITERATIONS,
    STORE_FILE,
    ScramCredential,
    ScramCredentialStore,
    ScramStoreError,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
)
from tidelog.storage.scram_credentials import b64 as _b64
from tidelog.storage.scram_credentials import hmac_digest as _hmac

__all__ = (
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MECHANISM_BY_TYPE",
    "MIN_ITERATIONS",
    "STORE_FILE",
    "ScramCredential",
    "ScramCredentialStore",
    "ScramError",
    "ScramServer",
    "ScramStoreError",
    "credential_from_password",
    "credential_from_salted_password",
    "salted_password",
)


class ScramError(Exception):
    """The exchange failed; the message is safe to show (no secret in it)."""


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            out.setdefault(key, value)
    return out


def _saslname(text: str) -> str:
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise ScramError("invalid user name encoding")
    return text.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One server exchange; ``step(token)`` returns the next server token."""

    def __init__(self, mechanism: str, store: ScramCredentialStore) -> None:
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism][0]
        self._store = store
        self._state = 0
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2 = ""
        self._nonce = ""

    @property
    def complete(self) -> bool:
        return self._state == 2

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        if self._state == 0:
            return self._first(text)
        if self._state == 1:
            return self._final(text)
        raise ScramError("SCRAM exchange already complete")

    def _first(self, text: str) -> bytes:
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise ScramError("invalid SCRAM client-first message (channel binding unsupported)")
        self._gs2 = parts[0] + "," + parts[1] + ","
        bare = parts[2]
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("invalid SCRAM client-first message")
        user = _saslname(attrs["n"])
        credential = self._store.get(user, self.mechanism)
        self.user = user
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self._credential = credential
        self._client_first_bare = bare
        self._nonce = attrs["r"] + secrets.token_urlsafe(18)
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = 1
        return self._server_first.encode("ascii")

    def _final(self, text: str) -> bytes:
        assert self._credential is not None
        attrs = _attributes(text)
        head, sep, proof_b64 = text.rpartition(",p=")
        # As Kafka's ScramSaslServer: the nonce must END with ours (librdkafka <= 2.0, as in
        # Debian's kcat, sends its own nonce in front of the combined one).
        if not sep or not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("invalid SCRAM client-final message (nonce mismatch)")
        try:
            channel = base64.b64decode(attrs.get("c", ""), validate=True)
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise ScramError("invalid SCRAM client-final message (bad base64)") from None
        if channel != self._gs2.encode("utf-8"):
            raise ScramError("invalid SCRAM channel binding")
        auth_message = f"{self._client_first_bare},{self._server_first},{head}".encode()
        signature = _hmac(self._hash, self._credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError(self._invalid())
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), self._credential.stored_key
        ):
            raise ScramError(self._invalid())
        self._state = 2
        server_signature = _hmac(self._hash, self._credential.server_key, auth_message)
        return ("v=" + _b64(server_signature)).encode("ascii")

    def _invalid(self) -> str:
        return (
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"
        )
