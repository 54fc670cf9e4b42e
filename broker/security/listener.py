"""What each listener asks of its connections, resolved once at start-up.

``listener.security.protocol.map`` gives each listener its security protocol; the listener's
settings are read with Kafka's prefixes (``listener.name.<listener>.<setting>``, and for JAAS
``listener.name.<listener>.<mechanism>.sasl.jaas.config``, then ``sasl.jaas.config``; the
OAUTHBEARER validator's settings and ``connections.max.reauth.ms`` likewise per mechanism).

OAUTHBEARER validates tokens with the listener's ``sasl.server.callback.handler.class``:
Kafka's ``OAuthBearerValidatorCallbackHandler`` (signed JWTs, ``broker/security/jwt_validator.py``)
or, when unset, the unsecured validator (``broker/security/oauthbearer.py``), whose options are
those of the ``OAuthBearerLoginModule`` entry of the listener's JAAS configuration (required, as
in Kafka).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from tidelog.broker.security.jaas import PLAIN_MODULE, SCRAM_MODULE, JaasEntry, parse_jaas
from tidelog.broker.security.oauthbearer import LOGIN_MODULE as OAUTHBEARER_MODULE
from tidelog.broker.security.oauthbearer import TokenValidator, UnsecuredValidator
from tidelog.broker.security.principal import SslPrincipalMapper
from tidelog.broker.security.scram import MECHANISMS
from tidelog.broker.security.tls import server_context
from tidelog.config import BrokerConfig, ConfigError

__all__ = ("SUPPORTED_MECHANISMS", "ListenerSecurity", "listener_security")

SUPPORTED_MECHANISMS = ("PLAIN", *MECHANISMS, "OAUTHBEARER")

#: ``sasl.server.callback.handler.class`` values of Kafka's signed-JWT validator (the second is
#: its older, deprecated name).
JWT_VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
#: ``sasl.oauthbearer.jwt.validator.class`` values (both check JWTs against the JWKS here).
JWT_CHECKERS = (
    "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
    "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator",
)
UNSECURED_VALIDATOR_CLASS = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler"
)


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    #: PLAIN users from the JAAS ``user_<name>`` options (kept in memory only).
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    principal_mapper: SslPrincipalMapper = field(default_factory=lambda: SslPrincipalMapper(None))
    failed_auth_delay_ms: int = 100
    max_receive_size: int = 524288
    #: The OAUTHBEARER token validator (None when OAUTHBEARER is not enabled).
    oauthbearer: TokenValidator | None = None
    #: ``connections.max.reauth.ms`` per enabled mechanism (0: no limit).
    max_reauth_ms: dict[str, int] = field(default_factory=dict)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def listener_security(config: BrokerConfig, name: str, protocol: str) -> ListenerSecurity:
    """The security of listener ``name``; ConfigError names the setting to fix."""
    where = f"listener {name} ({protocol})"

    def get(setting: str) -> object:
        return config.listener_get(name, setting)

    context = server_context(get, where) if protocol in ("SSL", "SASL_SSL") else None
    try:
        mapper = SslPrincipalMapper(str(get("ssl.principal.mapping.rules") or "DEFAULT"))
    except ValueError as exc:
        raise ConfigError("ssl.principal.mapping.rules", f"{where}: {exc}") from None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = {}
    oauthbearer: TokenValidator | None = None
    max_reauth_ms: dict[str, int] = {}
    if protocol.startswith("SASL_"):
        raw = get("sasl.enabled.mechanisms") or []
        mechanisms = tuple(str(m).upper() for m in (raw if isinstance(raw, list) else [raw]))
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported or not mechanisms:
            raise ConfigError(
                "sasl.enabled.mechanisms",
                f"{where}: SASL mechanism(s) {', '.join(unsupported) or '(none)'} not supported: "
                f"set sasl.enabled.mechanisms (or listener.name.{name.lower()}."
                f"sasl.enabled.mechanisms) to some of {', '.join(SUPPORTED_MECHANISMS)}.",
            )
        for mechanism in mechanisms:
            jaas = config.listener_get(name, "sasl.jaas.config", mechanism)
            setting = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
            if jaas is None:
                if mechanism == "OAUTHBEARER":
                    raise ConfigError(
                        setting,
                        f"{where}: OAUTHBEARER needs its login module: set {setting}="
                        f"{OAUTHBEARER_MODULE} required;",
                    )
                if mechanism == "PLAIN":
                    raise ConfigError(
                        setting,
                        f"{where}: PLAIN needs its users: set {setting}={PLAIN_MODULE} "
                        'required user_alice="alice-secret";',
                    )
                continue  # SCRAM's credentials live in the credential store
            try:
                entries = parse_jaas(str(jaas))
            except ValueError as exc:
                raise ConfigError(setting, f"{where}: invalid JAAS configuration: {exc}") from None
            wanted = {"PLAIN": PLAIN_MODULE, "OAUTHBEARER": OAUTHBEARER_MODULE}.get(
                mechanism, SCRAM_MODULE
            )
            modules = [e for e in entries if e.module == wanted]
            if not modules and mechanism in ("PLAIN", "OAUTHBEARER"):
                raise ConfigError(setting, f"{where}: {mechanism} needs the login module {wanted}.")
            for entry in modules:
                if mechanism == "PLAIN":
                    plain_users.update(entry.plain_users())
            if mechanism == "OAUTHBEARER":
                oauthbearer = _token_validator(config, name, where, modules[0])
        max_reauth_ms = {
            m: int(str(config.listener_get(name, "connections.max.reauth.ms", m)))
            for m in mechanisms
        }
    return ListenerSecurity(
        name=name,
        protocol=protocol,
        ssl_context=context,
        mechanisms=mechanisms,
        plain_users=plain_users,
        principal_mapper=mapper,
        failed_auth_delay_ms=int(str(get("connection.failed.authentication.delay.ms"))),
        max_receive_size=int(str(get("sasl.server.max.receive.size"))),
        oauthbearer=oauthbearer,
        max_reauth_ms=max_reauth_ms,
    )


def _token_validator(
    config: BrokerConfig, name: str, where: str, jaas: JaasEntry
) -> TokenValidator:
    """The OAUTHBEARER validator of listener ``name``; ConfigError names the setting to fix."""

    def get(setting: str) -> object:
        return config.listener_get(name, setting, "OAUTHBEARER")

    prefix = f"listener.name.{name.lower()}.oauthbearer."
    handler = str(get("sasl.server.callback.handler.class") or "").strip()
    if handler in ("", UNSECURED_VALIDATOR_CLASS):
        try:
            return UnsecuredValidator(jaas.options)
        except ValueError as exc:
            raise ConfigError(prefix + "sasl.jaas.config", f"{where}: {exc}") from None
    # Kafka divergence: no Java plug-ins: only Kafka's two OAUTHBEARER validators are known.
    if handler not in JWT_VALIDATOR_CLASSES:
        raise ConfigError(
            prefix + "sasl.server.callback.handler.class",
            f"{where}: unknown OAUTHBEARER validator {handler!r}: set "
            f"{prefix}sasl.server.callback.handler.class={JWT_VALIDATOR_CLASSES[0]} (signed "
            "JWTs) or leave it unset (unsecured tokens, for development).",
        )
    validator_class = str(get("sasl.oauthbearer.jwt.validator.class") or "").strip()
    if validator_class not in JWT_CHECKERS:
        raise ConfigError(
            "sasl.oauthbearer.jwt.validator.class",
            f"{where}: unknown JWT validator {validator_class!r}: set "
            f"sasl.oauthbearer.jwt.validator.class to {' or '.join(JWT_CHECKERS)}.",
        )
    url = str(get("sasl.oauthbearer.jwks.endpoint.url") or "").strip()
    if not url:
        raise ConfigError(
            "sasl.oauthbearer.jwks.endpoint.url",
            f"{where}: {JWT_VALIDATOR_CLASSES[0]} needs the keys that sign the tokens: set "
            "sasl.oauthbearer.jwks.endpoint.url to the identity provider's JWKS URL "
            "(https://...) or a file:// URL.",
        )
    # Imported only for a listener that validates signed JWTs (PyJWT, urllib: not at every start).
    from tidelog.broker.security.jwt_validator import JwksSource, JwtSettings, JwtValidator

    audience = get("sasl.oauthbearer.expected.audience") or []
    issuer = get("sasl.oauthbearer.expected.issuer")
    settings = JwtSettings(
        jwks_url=url,
        refresh_ms=int(str(get("sasl.oauthbearer.jwks.endpoint.refresh.ms"))),
        retry_backoff_ms=int(str(get("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"))),
        retry_backoff_max_ms=int(str(get("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"))),
        expected_audience=tuple(
            str(a).strip()
            for a in (audience if isinstance(audience, list) else str(audience).split(","))
            if str(a).strip()
        ),
        expected_issuer=None if issuer in (None, "") else str(issuer),
        clock_skew_s=int(str(get("sasl.oauthbearer.clock.skew.seconds"))),
        scope_claim=str(get("sasl.oauthbearer.scope.claim.name") or "scope"),
        sub_claim=str(get("sasl.oauthbearer.sub.claim.name") or "sub"),
    )
    try:
        source = JwksSource(settings, ssl_context=_jwks_ssl_context(jaas.options))
    except (ValueError, OSError, ssl.SSLError) as exc:
        raise ConfigError("sasl.oauthbearer.jwks.endpoint.url", f"{where}: {exc}") from None
    return JwtValidator(settings, source)


def _jwks_ssl_context(options: dict[str, str]) -> ssl.SSLContext | None:
    """TLS to the JWKS endpoint: the JAAS options ``ssl.truststore.location`` (a PEM file of
    CA certificates; else the system's) and ``ssl.endpoint.identification.algorithm`` (empty:
    no host name check), as Kafka 4.x reads them from the JAAS configuration."""
    cafile = options.get("ssl.truststore.location")
    check_host = options.get("ssl.endpoint.identification.algorithm", "https") != ""
    if cafile is None and check_host:
        return None
    context = ssl.create_default_context(cafile=cafile)
    context.check_hostname = check_host
    return context
