"""SCRAM credentials (RFC 5802, RFC 7677) and the file that keeps them.

A credential keeps what RFC 5802 lets a server keep: salt, iteration count, StoredKey and
ServerKey, never the password nor the salted password::

    SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
    StoredKey      = H(HMAC(SaltedPassword, "Client Key"))
    ServerKey      = HMAC(SaltedPassword, "Server Key")

The store file ``<first log dir>/__scram_credentials.json`` (written as checkpoints are: tmp +
fsync + rename + directory fsync, mode 0600) is JSON::

    {"version": 1, "credentials": [{"user": "alice", "mechanism": "SCRAM-SHA-256",
      "iterations": 8192, "salt": <base64>, "stored_key": <base64>, "server_key": <base64>}]}

The SASL exchange that checks a client against these credentials is the broker's
(``broker/security/scram.py``); the broker and ``tidelog storage format --add-scram`` both write
credentials through this module.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tidelog.storage.metadata import atomic_write

__all__ = (
    "MECHANISMS",
    "ScramCredential",
    "ScramCredentialStore",
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


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


# hashlib, hmac and secrets are imported by the first SCRAM computation: a broker that reads
# no credential starts without them.
def hmac_digest(hash_name: str, key: bytes, msg: bytes) -> bytes:
    import hmac

    return hmac.new(key, msg, hash_name).digest()


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    hash_name = MECHANISMS[mechanism][0]
    import hashlib

    client_key = hmac_digest(hash_name, salted_password, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac_digest(hash_name, salted_password, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    import hashlib

    hash_name = MECHANISMS[mechanism][0]
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_password(
    mechanism: str, password: str, iterations: int, salt: bytes | None = None
) -> ScramCredential:
    import secrets

    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


def b64(data: bytes) -> str:
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
        import json  # at first use: most log dirs have no SCRAM store

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
                "salt": b64(c.salt),
                "stored_key": b64(c.stored_key),
                "server_key": b64(c.server_key),
            }
            for (user, mechanism), c in sorted(self._credentials.items())
        ]
        import json

        return json.dumps({"version": 1, "credentials": items}, indent=1).encode("utf-8")

    def save(self, data: bytes | None = None) -> None:
        """Write the file (tmp + fsync + rename); ``data`` from ``snapshot()`` on the loop."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, self.snapshot() if data is None else data, mode=0o600)
