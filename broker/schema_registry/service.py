"""The Schema Registry service: started with the broker when ``schema.registry.listeners`` is set.

Each listener is ``http://host:port`` or ``https://host:port`` (Kafka's listener syntax with
the scheme for the protocol); ``https`` uses the broker's ``ssl.*`` key store settings.
Authentication: when a SASL listener of the broker has PLAIN users (the JAAS ``user_<name>``
options), every request needs HTTP basic credentials of one of them; otherwise requests are
not authenticated (as Confluent's registry without ``authentication.method``).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from tidelog.broker.schema_registry.http import make_app, serve
from tidelog.broker.schema_registry.registry import SchemaRegistry
from tidelog.broker.schema_registry.store import SchemasHost, SchemasTopic
from tidelog.broker.security.tls import server_context
from tidelog.config import ConfigError
from tidelog.schema.state import RegistryState

if TYPE_CHECKING:
    from tidelog.broker.security.listener import ListenerSecurity
    from tidelog.config import BrokerConfig

__all__ = ("SETTING", "RegistryHost", "SchemaRegistryService", "install", "parse_registry_listener")

log = logging.getLogger("tidelog.schema_registry")

SETTING = "schema.registry.listeners"


class RegistryHost(SchemasHost, Protocol):
    """What the registry uses of the broker (``broker.app.Broker`` implements it)."""

    config: BrokerConfig


def parse_registry_listener(listener: str) -> tuple[str, str, int]:
    """``http://host:port`` -> ("http", host, port)."""
    scheme, sep, rest = listener.strip().partition("://")
    host, colon, port_text = rest.rpartition(":")
    if (
        not sep
        or scheme.lower() not in ("http", "https")
        or not colon
        or not port_text.isdigit()
        or not 0 <= int(port_text) <= 65535
    ):
        raise ConfigError(
            SETTING,
            f"Invalid schema registry listener {listener!r}: write it as http://host:port or "
            "https://host:port (for example http://127.0.0.1:8081).",
        )
    return scheme.lower(), host.strip("[]") or "127.0.0.1", int(port_text)


class SchemaRegistryService:
    """``security``: the broker's listeners (their PLAIN users authenticate HTTP requests)."""

    def __init__(
        self,
        broker: RegistryHost,
        listeners: list[str],
        security: Mapping[str, ListenerSecurity],
    ) -> None:
        self.config = broker.config
        self.security = security
        self.listeners = [parse_registry_listener(item) for item in listeners]
        self.state = RegistryState()
        self.topic = SchemasTopic(broker, self.state)
        self.registry = SchemaRegistry(
            self.state, self.topic.write, run_blocking=broker.run_blocking
        )
        self._runners: list[Any] = []
        self.addresses: list[str] = []

    def _authenticate(self) -> Any:
        users: dict[str, str] = {}
        for listener in self.security.values():
            users.update(listener.plain_users)
        if not users:
            return None

        def check(user: str, password: str) -> bool:
            expected = users.get(user)
            return expected is not None and hmac.compare_digest(
                expected.encode("utf-8"), password.encode("utf-8")
            )

        return check

    async def start(self) -> None:
        await self.topic.start()
        app = make_app(self.registry, self._authenticate())
        for scheme, host, port in self.listeners:
            context = None
            if scheme == "https":
                context = server_context(self.config.get, f"{SETTING} {scheme}://{host}")
            runner, bound = await serve(app, host, port, context)
            self._runners.append(runner)
            self.addresses += bound
        log.info("schema registry listening on %s", ", ".join(self.addresses))

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        await self.topic.stop()


def install(
    broker: RegistryHost, security: Mapping[str, ListenerSecurity]
) -> SchemaRegistryService:
    """The service for ``schema.registry.listeners`` (set: the caller checks)."""
    listeners = broker.config.get(SETTING)
    items = listeners if isinstance(listeners, list) else str(listeners).split(",")
    return SchemaRegistryService(
        broker, [str(item) for item in items if str(item).strip()], security
    )
