"""One connection's authentication: the SASL state machine, and PLAIN.

Every connection of a listener gets a ``ConnectionSecurity``. On PLAINTEXT and SSL listeners it
is authenticated from the start (``User:ANONYMOUS``, or the client certificate's mapped DN on
SSL with a client certificate). On SASL listeners the connection may send only:

1. ApiVersions (any number of times) and SaslHandshake (picks the mechanism);
2. after a SaslHandshake v1: SaslAuthenticate requests carrying the tokens (KIP-152);
   after a SaslHandshake v0: the tokens themselves, each size-prefixed, without a request
   header (Kafka's legacy framing), answered the same way;

anything else before authentication completes closes the connection, as Kafka does. A failed
authentication is answered with SASL_AUTHENTICATION_FAILED (or UNSUPPORTED_SASL_MECHANISM),
then the connection is closed after ``connection.failed.authentication.delay.ms``. Frames
before authentication are limited to ``sasl.server.max.receive.size``.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from tidelog.broker.router import Close
from tidelog.broker.security.principal import ANONYMOUS, dn_of_peercert, user
from tidelog.broker.security.scram import ScramError, ScramServer
from tidelog.protocol import codec
from tidelog.protocol.errors import ErrorCode, FrameDecodeError

if TYPE_CHECKING:
    from tidelog.broker.security.listener import ListenerSecurity
    from tidelog.broker.security.service import BrokerSecurity

__all__ = ("ConnectionSecurity",)

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36


class _PlainServer:
    """RFC 4616: ``[authzid] NUL authcid NUL passwd`` checked against the JAAS users."""

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.user: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise ScramError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, authcid, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise ScramError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not authcid:
            raise ScramError("Authentication failed: username not specified")
        self.user = authcid
        if authzid and authzid != authcid:
            raise ScramError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        expected = self._users.get(authcid)
        if expected is None or not hmac.compare_digest(
            expected.encode("utf-8"), password.encode("utf-8")
        ):
            raise ScramError("Authentication failed: Invalid username or password")
        self.complete = True
        return b""


class ConnectionSecurity:
    """The authentication state of one connection (created by the listener on accept)."""

    __slots__ = (
        "_server",
        "authenticated",
        "failed",
        "host",
        "listener",
        "mechanism",
        "port",
        "principal",
        "raw_tokens",
        "security",
        "state",
    )

    def __init__(
        self, listener: ListenerSecurity, security: BrokerSecurity, host: str, port: int
    ) -> None:
        self.listener = listener
        self.security = security
        self.host = host
        self.port = port
        self.principal = ANONYMOUS
        self.authenticated = not listener.uses_sasl
        #: Why authentication failed (the connection closes after the delay), else None.
        self.failed: str | None = None
        self.state = "handshake"  # -> "authenticate" -> "done"
        self.mechanism: str | None = None
        self.raw_tokens = False
        self._server: Any = None

    def __repr__(self) -> str:
        return f"<ConnectionSecurity {self.host}:{self.port} {self.principal} {self.state}>"

    # ------------------------------------------------------------------ TLS

    def peer_certificate(self, peercert: dict[str, Any] | None) -> str | None:
        """Take the client certificate (already verified by the TLS layer): the principal is
        its mapped DN (SSL listeners). Returns why the connection must close, or None."""
        if not peercert or self.listener.uses_sasl:
            return None
        dn = dn_of_peercert(peercert)
        try:
            self.principal = user(self.listener.principal_mapper.name(dn))
        except LookupError as exc:
            self.security.authentication_failed(self, "SSL", dn, str(exc))
            return f"authentication failed: {exc}"
        return None

    # ------------------------------------------------------------------ before authentication

    def intercept(self, frame: bytes | memoryview) -> Any:
        """A frame on a connection not yet authenticated: None routes it (ApiVersions, the
        SASL requests); else the answer (a raw token or Close)."""
        if self.failed is not None:
            return Close("")  # logged (rate-limited) when it failed
        if self.raw_tokens:
            return self._raw_token(bytes(frame))
        try:
            api_key, api_version, _ = codec.peek_request_header(frame)
        except FrameDecodeError as exc:
            return Close(str(exc))
        if api_key in (API_VERSIONS, SASL_HANDSHAKE):
            return None
        if api_key == SASL_AUTHENTICATE and self.state == "authenticate":
            return None
        return Close(
            f"unexpected request (API key {api_key} v{api_version}) before SASL "
            f"authentication on listener {self.listener.name}"
        )

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        if not self.listener.uses_sasl or self.authenticated or self.state != "handshake":
            return ErrorCode.illegal_sasl_state
        if mechanism not in self.listener.mechanisms:
            self.security.authentication_failed(
                self, mechanism, None, f"unsupported SASL mechanism {mechanism!r}"
            )
            self.failed = f"unsupported SASL mechanism {mechanism!r}"
            return ErrorCode.unsupported_sasl_mechanism
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = _PlainServer(self.listener.plain_users)
        else:
            self._server = ScramServer(mechanism, self.security.scram)
        self.state = "authenticate"
        self.raw_tokens = version == 0
        return ErrorCode.none

    def authenticate(self, token: bytes) -> tuple[ErrorCode, str | None, bytes]:
        """One SaslAuthenticate token -> (error, message, server token)."""
        if self.state != "authenticate" or self._server is None:
            self.failed = "SaslAuthenticate before SaslHandshake"
            return ErrorCode.illegal_sasl_state, "SaslAuthenticate before SaslHandshake", b""
        try:
            answer: bytes = self._server.step(token)
        except ScramError as exc:
            message = str(exc)
            self.failed = message
            self.security.authentication_failed(
                self, self.mechanism or "?", self._server.user, message
            )
            return ErrorCode.sasl_authentication_failed, message, b""
        if self._server.complete:
            self.principal = user(str(self._server.user))
            self.state = "done"
            self.authenticated = True
            self.raw_tokens = False
            self.security.authenticated(self)
        return ErrorCode.none, None, answer

    def _raw_token(self, token: bytes) -> Any:
        """Legacy framing (after SaslHandshake v0): a token in, a size-prefixed token out;
        a failure closes without an answer, as Kafka's v0 does."""
        error, _message, answer = self.authenticate(token)
        if error != ErrorCode.none:
            return Close("")  # logged (rate-limited) by authenticate
        return len(answer).to_bytes(4, "big") + answer
