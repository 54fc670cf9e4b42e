"""Raw SASL exchanges on a socket (SaslHandshake v1, SaslAuthenticate v1) for the OAUTHBEARER
and re-authentication tests: what a client sends and what the broker answers, byte for byte."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from tests.security.secure_broker import kstring, read_frame, request_frame


@dataclass(frozen=True)
class AuthenticateAnswer:
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


def handshake(sock: socket.socket, mechanism: str) -> int:
    """SaslHandshake v1; its error code."""
    sock.sendall(request_frame(17, 1, kstring(mechanism), correlation_id=17))
    answer = read_frame(sock)
    assert answer is not None, "closed on SaslHandshake"
    return int.from_bytes(answer[4:6], "big", signed=True)


def authenticate(sock: socket.socket, token: bytes) -> AuthenticateAnswer | None:
    """SaslAuthenticate v1; its answer, or None when the broker closed the connection."""
    sock.sendall(request_frame(36, 1, len(token).to_bytes(4, "big") + token, correlation_id=36))
    frame = read_frame(sock)
    if frame is None:
        return None
    pos = 4
    error = int.from_bytes(frame[pos : pos + 2], "big", signed=True)
    pos += 2
    size = int.from_bytes(frame[pos : pos + 2], "big", signed=True)
    pos += 2
    message = None
    if size >= 0:
        message = frame[pos : pos + size].decode()
        pos += size
    size = int.from_bytes(frame[pos : pos + 4], "big", signed=True)
    pos += 4
    auth_bytes = frame[pos : pos + size]
    pos += size
    lifetime = int.from_bytes(frame[pos : pos + 8], "big", signed=True)
    return AuthenticateAnswer(error, message, auth_bytes, lifetime)


def bearer(token: str) -> bytes:
    """The OAUTHBEARER client first message (RFC 7628) carrying ``token``."""
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def metadata_frame(correlation_id: int = 3) -> bytes:
    """A Metadata v1 request for no topics."""
    return request_frame(3, 1, (0).to_bytes(4, "big"), correlation_id=correlation_id)


def oauthbearer_failure(port: int, token: str) -> tuple[bytes, AuthenticateAnswer | None]:
    """Present ``token``: the broker's challenge (the error JSON), then the answer to the
    client's ``\\x01`` acknowledgement (RFC 7628's error flow)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert handshake(sock, "OAUTHBEARER") == 0
        first = authenticate(sock, bearer(token))
        assert first is not None and first.error_code == 0, first
        return first.auth_bytes, authenticate(sock, b"\x01")
