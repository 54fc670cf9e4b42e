"""Start a broker with secure listeners (helpers shared by the security tests)."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from tests.support import kafka_wire

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def start(
    broker_factory: Callable[..., Any], listeners: Mapping[str, int], settings: Mapping[str, str]
) -> Any:
    """``listeners``: {NAME: port}; each NAME is also its security protocol unless mapped."""
    overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in listeners.items()),
        "connection.failed.authentication.delay.ms": "50",
        **settings,
    }
    return broker_factory(overrides)


def wait_for_log(broker: Any, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = str(broker.log_text())
        if text in log:
            return log
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the broker log:\n{broker.log_text()[-3000:]}")


def api_versions_frame(correlation_id: int = 1) -> bytes:
    """An ApiVersions v0 request frame (no body)."""
    client = b"raw"
    body = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + correlation_id.to_bytes(4, "big")
    body += len(client).to_bytes(2, "big") + client
    return len(body).to_bytes(4, "big") + body


def request_frame(api_key: int, version: int, payload: bytes, correlation_id: int = 7) -> bytes:
    """A request with header v1 (non-flexible) and ``payload`` as body."""
    client = b"raw"
    header = api_key.to_bytes(2, "big") + version.to_bytes(2, "big")
    header += correlation_id.to_bytes(4, "big") + len(client).to_bytes(2, "big") + client
    body = header + payload
    return len(body).to_bytes(4, "big") + body


def kstring(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def read_frame(sock: socket.socket, timeout: float = 5.0) -> bytes | None:
    """One response frame, or None when the broker closed the connection."""
    sock.settimeout(timeout)
    try:
        return kafka_wire.read_frame(sock)
    except ConnectionError:
        return None


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def auth_error(conf: Mapping[str, Any], timeout: float = 20.0) -> str | None:
    """The authentication error librdkafka reports for ``conf`` (None: none in ``timeout``)."""
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        producer.poll(0.2)
        for error in errors:
            if error.code() == KafkaError._AUTHENTICATION:
                return str(error.str())
    return None


class LogRecords(logging.Handler):
    """The messages a client library logs while it runs (``with LogRecords("kafka") as r``),
    at DEBUG and above."""

    def __init__(self, logger: str) -> None:
        super().__init__(logging.DEBUG)
        self.logger = logging.getLogger(logger)
        self.lines: list[str] = []
        self._level = self.logger.level

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> LogRecords:
        self.logger.addHandler(self)
        self._level = self.logger.level
        self.logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self._level)

    def text(self) -> str:
        return "\n".join(self.lines)
