"""The broker's security: listeners' settings, SCRAM credentials, the authorizer, and the log
and counters of failed authentications and denials.

Failed authentications and denials are logged at most once a minute per (principal, resource)
(or per client address and user for authentications), so a client retrying in a loop cannot
flood the log, and each one is counted (``tidelog_authentication_failures_total``,
``tidelog_authorization_denials_total`` on the metrics endpoint).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.config import BrokerConfig, ConfigError
from tidelog.storage.scram_credentials import STORE_FILE

# The listeners' TLS/SASL code, SCRAM and the authorizer are imported when a listener, a
# credential or authorizer.class.name needs them: a PLAINTEXT broker starts without them.
if TYPE_CHECKING:
    from tidelog.broker.security.acls import Operation, ResourceType
    from tidelog.broker.security.authorizer import Authorizer
    from tidelog.broker.security.listener import ListenerSecurity
    from tidelog.broker.security.sasl import ConnectionSecurity
    from tidelog.broker.security.scram import ScramCredentialStore

log = logging.getLogger("tidelog.security")
authorizer_log = logging.getLogger("tidelog.authorizer")

__all__ = ("BrokerSecurity",)

#: A repeated failure or denial of the same key is logged again after this long.
LOG_EVERY_S = 60.0
_MAX_KEYS = 10_000


def parse_super_users(raw: object) -> list[str]:
    """``super.users``: principals separated by ';' (Kafka's syntax)."""
    if not raw:
        return []
    return [p.strip() for p in str(raw).split(";") if p.strip()]


class BrokerSecurity:
    def __init__(
        self,
        config: BrokerConfig,
        log_dir: Path,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.config = config
        #: Clocks: session expiry (monotonic s) and token lifetimes (ms since the epoch).
        self.monotonic = monotonic
        self.wall_ms = wall_ms
        self.listeners: dict[str, ListenerSecurity] = {}
        self._scram_path = log_dir / STORE_FILE
        if self._scram_path.exists():
            self.scram  # noqa: B018 - read now: a damaged file refuses the start
        self.authorizer: Authorizer | None = None
        class_name = str(config.get("authorizer.class.name") or "").strip()
        if class_name:
            from tidelog.broker.security.authorizer import ACL_FILE, AUTHORIZER_ALIASES, Authorizer

            if class_name not in AUTHORIZER_ALIASES:
                raise ConfigError(
                    "authorizer.class.name",
                    f"Unknown authorizer {class_name!r}: set authorizer.class.name="
                    f"{AUTHORIZER_ALIASES[0]} (or leave it empty: no authorization).",
                )
            self.authorizer = Authorizer(
                log_dir / ACL_FILE,
                super_users=parse_super_users(config.get("super.users")),
                allow_if_no_acl=bool(config.get("allow.everyone.if.no.acl.found")),
            )
        self.authentication_failures = 0
        self.reauthentications = 0
        #: Connections closed because their session ended without a re-authentication
        #: (Kafka's expired-connections-killed-count).
        self.expired_connections_killed = 0
        self.denials = 0
        self._last_logged: dict[tuple[str, ...], float] = {}

    @functools.cached_property
    def scram(self) -> ScramCredentialStore:
        """The SCRAM credentials (the store file read on first use, or at start when it
        exists)."""
        from tidelog.broker.security.scram import ScramCredentialStore

        return ScramCredentialStore(self._scram_path)

    def configure_listeners(self, listeners: Iterable[tuple[str, str]]) -> None:
        """(listener name, security protocol) of each listener; ConfigError on a bad setting."""
        for name, protocol in listeners:
            if protocol != "PLAINTEXT":
                from tidelog.broker.security.listener import listener_security

                self.listeners[name] = listener_security(self.config, name, protocol)

    def session_for(self, listener: str, host: str, port: int) -> ConnectionSecurity | None:
        """A connection's authentication state; None on PLAINTEXT (``User:ANONYMOUS``)."""
        security = self.listeners.get(listener)
        if security is None:
            return None
        from tidelog.broker.security.sasl import ConnectionSecurity

        return ConnectionSecurity(security, self, host, port)

    # ------------------------------------------------------------------ events

    def _should_log(self, key: tuple[str, ...]) -> bool:
        now = self.monotonic()
        last = self._last_logged.get(key)
        if last is not None and now - last < LOG_EVERY_S:
            return False
        if len(self._last_logged) >= _MAX_KEYS:
            self._last_logged.clear()
        self._last_logged[key] = now
        return True

    def authentication_failed(
        self, session: ConnectionSecurity, mechanism: str, user: str | None, reason: str
    ) -> None:
        self.authentication_failures += 1
        if self._should_log(("authn", session.host, user or "", reason)):
            log.warning(
                "failed authentication from %s:%d on listener %s (mechanism %s, user %r): %s",
                session.host,
                session.port,
                session.listener.name,
                mechanism,
                user,
                reason,
            )

    def tls_failed(self, host: str, reason: str) -> bool:
        """Count a failed TLS handshake; True when it should be logged now."""
        self.authentication_failures += 1
        return self._should_log(("tls", host, reason))

    def authenticated(self, session: ConnectionSecurity, *, reauthenticated: bool = False) -> None:
        if reauthenticated:
            self.reauthentications += 1
        log.debug(
            "%s:%d %s as %s with %s on listener %s (session lifetime %d ms)",
            session.host,
            session.port,
            "re-authenticated" if reauthenticated else "authenticated",
            session.principal,
            session.mechanism,
            session.listener.name,
            session.session_lifetime_ms,
        )

    def session_expired(self, session: ConnectionSecurity) -> None:
        self.expired_connections_killed += 1
        if self._should_log(("expired", session.host, session.principal)):
            log.info(
                "closing connection from %s:%d (%s): its SASL session expired without a "
                "re-authentication (connections.max.reauth.ms, or the token's expiry)",
                session.host,
                session.port,
                session.principal,
            )

    def denied(
        self,
        principal: str,
        host: str,
        operation: Operation,
        rtype: ResourceType,
        name: str,
        api: str,
    ) -> None:
        self.denials += 1
        if self._should_log(("authz", principal, rtype.name, name, operation.name)):
            authorizer_log.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s "
                "(request %s)",
                principal,
                operation.name,
                host,
                rtype.name,
                name,
                api,
            )
