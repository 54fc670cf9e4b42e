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

Re-authentication (KIP-368): a session lasts ``connections.max.reauth.ms`` (of the listener and
mechanism) or until its credential expires (an OAUTHBEARER token's ``exp``), whichever is first;
SaslAuthenticate v1+ tells the client how long (``session_lifetime_ms``). Once authenticated, a
SaslHandshake on the connection begins a re-authentication (at most one a second, the same
mechanism and then the same principal, else the connection closes); requests answered meanwhile
keep the principal. A connection whose session has expired is closed when it sends any request
other than that SaslHandshake, as Kafka's SocketServer does.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from tidelog.broker.request_channel import Close
from tidelog.broker.security.oauthbearer import (
    InvalidClientFirst,
    OAuthBearerRefused,
    OAuthBearerServer,
    TokenRefused,
)
from tidelog.broker.security.principal import ANONYMOUS, dn_of_peercert, user
from tidelog.broker.security.scram import ScramCredentialStore, ScramError, ScramServer
from tidelog.protocol import codec
from tidelog.protocol.errors import ErrorCode, FrameDecodeError

if TYPE_CHECKING:
    from tidelog.broker.security.listener import ListenerSecurity

__all__ = ("ConnectionSecurity", "SecurityEvents")

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
#: Kafka lets a connection begin a re-authentication at most once a second.
MIN_REAUTH_INTERVAL_S = 1.0


class SecurityEvents(Protocol):
    """What a connection's authentication uses of the broker's security: the SCRAM
    credentials, the clocks, and where it reports its outcomes (counted and logged:
    ``security.service.BrokerSecurity`` implements it)."""

    @property
    def scram(self) -> ScramCredentialStore: ...

    #: session expiry (monotonic seconds)
    monotonic: Callable[[], float]
    #: token lifetimes (ms since the epoch)
    wall_ms: Callable[[], int]

    def authentication_failed(
        self, session: ConnectionSecurity, mechanism: str, user: str | None, reason: str
    ) -> None: ...

    def authenticated(
        self, session: ConnectionSecurity, *, reauthenticated: bool = False
    ) -> None: ...

    def session_expired(self, session: ConnectionSecurity) -> None: ...


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
        "_reauth_started",
        "_server",
        "authenticated",
        "expires_at",
        "failed",
        "host",
        "listener",
        "mechanism",
        "port",
        "previous",
        "principal",
        "raw_tokens",
        "security",
        "session_lifetime_ms",
        "state",
    )

    def __init__(
        self, listener: ListenerSecurity, security: SecurityEvents, host: str, port: int
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
        #: When the session ends (``security.monotonic`` seconds); None: never.
        self.expires_at: float | None = None
        #: The session lifetime the last completed SaslAuthenticate told the client (ms).
        self.session_lifetime_ms = 0
        #: (mechanism, principal) of the session being re-authenticated, else None.
        self.previous: tuple[str, str] | None = None
        self._reauth_started: float | None = None

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
        if self.previous is not None and mechanism != self.previous[0]:
            # Kafka answers the handshake, then fails the re-authentication and closes.
            reason = (
                f"SASL mechanism {mechanism!r} requested by client is not supported for "
                f"re-authentication of mechanism {self.previous[0]!r}"
            )
            self.security.authentication_failed(self, mechanism, None, reason)
            self.failed = reason
            return ErrorCode.none
        if mechanism not in self.listener.mechanisms:
            self.security.authentication_failed(
                self, mechanism, None, f"unsupported SASL mechanism {mechanism!r}"
            )
            self.failed = f"unsupported SASL mechanism {mechanism!r}"
            return ErrorCode.unsupported_sasl_mechanism
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = _PlainServer(self.listener.plain_users)
        elif mechanism == "OAUTHBEARER":
            assert self.listener.oauthbearer is not None
            self._server = OAuthBearerServer(self.listener.oauthbearer, self.security.wall_ms)
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
        except OAuthBearerRefused as refused:
            # RFC 7628: the error JSON as a challenge; the client's "\x01" then fails it.
            self.security.authentication_failed(
                self, self.mechanism or "?", None, f"invalid token: {refused}"
            )
            return ErrorCode.none, None, refused.error.error_json().encode()
        except ScramError as exc:
            message = str(exc)
            self.failed = message
            if not isinstance(exc, TokenRefused):  # logged when the token was refused
                self.security.authentication_failed(
                    self, self.mechanism or "?", self._server.user, message
                )
            if isinstance(exc, InvalidClientFirst):
                message = exc.client_message
                if self.previous is not None:
                    message = message.replace("during authentication", "during re-authentication")
            return ErrorCode.sasl_authentication_failed, message, b""
        if self._server.complete:
            principal = user(str(self._server.user))
            if self.previous is not None and principal != self.previous[1]:
                message = (
                    "Cannot change principals during re-authentication from "
                    f"{self.previous[1].replace(':', '.', 1)}: {principal.replace(':', '.', 1)}"
                )
                self.failed = message
                self.security.authentication_failed(self, self.mechanism or "?", None, message)
                return ErrorCode.sasl_authentication_failed, message, b""
            self.principal = principal
            self.state = "done"
            self.authenticated = True
            self.raw_tokens = False
            self._start_session()
            self.security.authenticated(self, reauthenticated=self.previous is not None)
            self.previous = None
        return ErrorCode.none, None, answer

    def _start_session(self) -> None:
        """The session's lifetime, as Kafka computes it: the shorter of
        ``connections.max.reauth.ms`` (when > 0) and the credential's remaining life."""
        max_reauth_ms = self.listener.max_reauth_ms.get(self.mechanism or "", 0)
        server = self._server
        expiry_ms = server.lifetime_ms if isinstance(server, OAuthBearerServer) else None
        lifetimes = [max_reauth_ms] if max_reauth_ms > 0 else []
        if expiry_ms is not None:
            lifetimes.append(expiry_ms - self.security.wall_ms())
        if not lifetimes:
            self.session_lifetime_ms = 0
            self.expires_at = None
            return
        self.session_lifetime_ms = max(min(lifetimes), 0)
        self.expires_at = self.security.monotonic() + self.session_lifetime_ms / 1000

    # ------------------------------------------------------------------ after authentication

    def check_session(self, frame: bytes | memoryview) -> Close | None:
        """A frame of an authenticated connection whose session has an end (``expires_at``):
        a SaslHandshake begins a re-authentication; any other request after the end closes the
        connection; None lets the frame through."""
        now = self.security.monotonic()
        try:
            api_key, _, _ = codec.peek_request_header(frame)
        except FrameDecodeError as exc:
            return Close(str(exc))
        if api_key == SASL_HANDSHAKE and (
            self._reauth_started is None or now - self._reauth_started >= MIN_REAUTH_INTERVAL_S
        ):
            self._reauth_started = now
            self.previous = (self.mechanism or "", self.principal)
            self.authenticated = False
            self.state = "handshake"
            self._server = None
            return None
        assert self.expires_at is not None
        if now > self.expires_at:
            self.security.session_expired(self)
            return Close("")
        return None

    def _raw_token(self, token: bytes) -> Any:
        """Legacy framing (after SaslHandshake v0): a token in, a size-prefixed token out;
        a failure closes without an answer, as Kafka's v0 does."""
        error, _message, answer = self.authenticate(token)
        if error != ErrorCode.none:
            return Close("")  # logged (rate-limited) by authenticate
        return len(answer).to_bytes(4, "big") + answer
