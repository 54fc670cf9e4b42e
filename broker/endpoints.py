"""The broker's listeners as endpoints: where each binds and what clients are told.

``listeners`` and ``advertised.listeners`` are paired by listener name (as Kafka pairs them),
else by position; an advertised host left empty or a wildcard becomes an address a client can
reach.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelog.config import BrokerConfig, ConfigError, parse_listener

__all__ = ("DEFAULT_BIND_HOST", "Endpoint", "resolve_endpoints")

# Kafka divergence: Kafka's default listener PLAINTEXT://:9092 binds every interface; an empty
# host here binds 127.0.0.1 only (safety: a broker without auth should not face the network
# unless asked). Write PLAINTEXT://0.0.0.0:9092 to listen everywhere.
DEFAULT_BIND_HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: its name (``PLAINTEXT``), where it binds, and what clients are told."""

    name: str
    bind_host: str
    bind_port: int
    advertised_host: str
    advertised_port: int


def resolve_endpoints(config: BrokerConfig) -> list[Endpoint]:
    """Pair ``listeners`` with ``advertised.listeners`` (by listener name, else by position)."""
    listeners = config.listeners
    if not listeners:
        raise ConfigError("listeners", "'listeners' must name at least one PLAINTEXT://host:port")
    protocols = config.listener_protocols
    advertised_raw = config.advertised_listeners
    advertised: dict[str, tuple[str, int]] = {}
    for item in advertised_raw:
        advertised[item.partition("://")[0].upper()] = parse_listener(
            item, "advertised.listeners", protocols
        )
    endpoints = []
    for i, item in enumerate(listeners):
        name = item.partition("://")[0].upper()
        host, port = parse_listener(item, "listeners", protocols)
        bind_host = host or DEFAULT_BIND_HOST
        adv_host, adv_port = advertised.get(name) or (
            parse_listener(advertised_raw[i], "advertised.listeners", protocols)
            if i < len(advertised_raw)
            else (host, port)
        )
        if adv_host in ("", "0.0.0.0", "::"):
            adv_host = bind_host if bind_host not in ("0.0.0.0", "::") else DEFAULT_BIND_HOST
        endpoints.append(Endpoint(name, bind_host, port, adv_host, adv_port))
    return endpoints
