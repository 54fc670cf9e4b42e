"""What each listener asks of its connections, resolved once at start-up.

``listener.security.protocol.map`` gives each listener its security protocol; the listener's
settings are read with Kafka's prefixes (``listener.name.<listener>.<setting>``, and for JAAS
``listener.name.<listener>.<mechanism>.sasl.jaas.config``, then ``sasl.jaas.config``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from tidelog.broker.security.jaas import PLAIN_MODULE, SCRAM_MODULE, parse_jaas
from tidelog.broker.security.principal import SslPrincipalMapper
from tidelog.broker.security.scram import MECHANISMS
from tidelog.broker.security.tls import server_context
from tidelog.config import BrokerConfig, ConfigError

__all__ = ("SUPPORTED_MECHANISMS", "ListenerSecurity", "listener_security")

SUPPORTED_MECHANISMS = ("PLAIN", *MECHANISMS)


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
            wanted = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
            modules = [e for e in entries if e.module == wanted]
            if not modules and mechanism == "PLAIN":
                raise ConfigError(setting, f"{where}: PLAIN needs the login module {wanted}.")
            for entry in modules:
                if mechanism == "PLAIN":
                    plain_users.update(entry.plain_users())
    return ListenerSecurity(
        name=name,
        protocol=protocol,
        ssl_context=context,
        mechanisms=mechanisms,
        plain_users=plain_users,
        principal_mapper=mapper,
        failed_auth_delay_ms=int(str(get("connection.failed.authentication.delay.ms"))),
        max_receive_size=int(str(get("sasl.server.max.receive.size"))),
    )
