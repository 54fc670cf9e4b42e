"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) and the credential store.

A credential keeps what RFC 5802 lets a server keep: salt, iteration count, StoredKey and
ServerKey, never the password nor the salted password::

    SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
    StoredKey      = H(HMAC(SaltedPassword, "Client Key"))
    ServerKey      = HMAC(SaltedPassword, "Server Key")

The store file ``<first log dir>/__scram_credentials.json`` (written as checkpoints are: tmp +
fsync + rename + directory fsync, mode 0600) is JSON::

    {"version": 1, "credentials": [{"user": "alice", "mechanism": "SCRAM-SHA-256",
      "iterations": 8192, "salt": <base64>, "stored_key": <base64>, "server_key": <base64>}]}

The server exchange (``ScramServer``): client-first ``n,,n=user,r=cnonce`` -> server-first
``r=cnonce+snonce,s=salt,i=iterations`` -> client-final ``c=biws,r=nonce,p=proof`` -> server-final
``v=signature``. Channel binding is not offered (``p=`` in the GS2 header is refused).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tidelog.storage.metadata import atomic_write

__all__ = (
    "MECHANISMS",
    "ScramCredential",
    "ScramCredentialStore",
    "ScramServer",
    "ScramStoreError",
    "credential_from_password",
    "credential_from_salted_password",
)

#: mechanism -> (hashlib name, Kafka's ScramMechanism type id)
MECHANISMS: dict[str, tuple[str, int]] = {
    "SCRAM-SHA-256": ("sha256", 1),
    "SCRAM-SHA-512": ("sha512", 2),
}
MECHANISM_BY_TYPE = {type_id: name for name, (_, type_id) in MECHANISMS.items()}
#: Kafka's bounds on iterations (ScramMechanism.minIterations / maxIterations).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
STORE_FILE = "__scram_credentials.json"


class ScramStoreError(ValueError):
    """``__scram_credentials.json`` cannot be read: the broker does not start."""


class ScramError(Exception):
    """The exchange failed; the message is safe to show (no secret in it)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    hash_name = MECHANISMS[mechanism][0]
    client_key = _hmac(hash_name, salted_password, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = _hmac(hash_name, salted_password, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    hash_name = MECHANISMS[mechanism][0]
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_password(
    mechanism: str, password: str, iterations: int, salt: bytes | None = None
) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class ScramCredentialStore:
    """Credentials by (user, mechanism), durable in one file. Changes are made with ``put``/
    ``delete`` (in memory) and written with ``save`` (blocking: call it in a worker thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._credentials: dict[tuple[str, str], ScramCredential] = {}
        self._lock = threading.Lock()
        self._load()

    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return  # no file yet (a log dir that is not a directory: start() says so)
        try:
            data = json.loads(raw)
            for item in data["credentials"]:
                mechanism = str(item["mechanism"])
                if mechanism not in MECHANISMS:
                    continue
                self._credentials[(str(item["user"]), mechanism)] = ScramCredential(
                    base64.b64decode(item["salt"]),
                    base64.b64decode(item["stored_key"]),
                    base64.b64decode(item["server_key"]),
                    int(item["iterations"]),
                )
        except (ValueError, KeyError, TypeError) as exc:
            raise ScramStoreError(
                f"{self.path} is not a readable SCRAM credential file ({exc}): restore it from "
                "a backup, or move it away to start without SCRAM credentials and create them "
                "again (tidelog storage format --add-scram, or kafka-configs.sh --alter "
                "--add-config 'SCRAM-SHA-256=[password=...]' over a PLAIN or TLS listener)"
            ) from None

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def put(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._credentials[(user, mechanism)] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        return self._credentials.pop((user, mechanism), None) is not None

    def users(self) -> list[str]:
        return sorted({user for user, _ in self._credentials})

    def of_user(self, user: str) -> Iterator[tuple[str, ScramCredential]]:
        for (name, mechanism), credential in sorted(self._credentials.items()):
            if name == user:
                yield mechanism, credential

    def snapshot(self) -> bytes:
        items = [
            {
                "user": user,
                "mechanism": mechanism,
                "iterations": c.iterations,
                "salt": _b64(c.salt),
                "stored_key": _b64(c.stored_key),
                "server_key": _b64(c.server_key),
            }
            for (user, mechanism), c in sorted(self._credentials.items())
        ]
        return json.dumps({"version": 1, "credentials": items}, indent=1).encode("utf-8")

    def save(self, data: bytes | None = None) -> None:
        """Write the file (tmp + fsync + rename); ``data`` from ``snapshot()`` on the loop."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, self.snapshot() if data is None else data, mode=0o600)


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
