"""tidelog in test suites: broker objects and the pytest plugin (``tidelog.testing.plugin``).

- ``Broker``: a broker in a subprocess (``tidelog serve``); a crash of the code under test
  cannot take it down. Use it as a context manager without pytest.
- ``EmbeddedBroker`` (also ``tidelog.Broker``): a broker in a background thread of this process.
- ``ExternalBroker``: an already running broker (any Kafka) at ``HOST:PORT``.

All three have ``bootstrap_servers``, ``log_dir``, ``start()``, ``stop()``, ``kill()``,
``restart()``, ``create_topic(name, partitions=1, config=None)`` and ``log_text()``.
The plugin (entry point ``pytest11`` / ``tidelog``) provides the fixtures ``tidelog_broker``,
``tidelog_broker_factory`` and ``tidelog_topic``; see docs/testing.md
("Testing your application").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidelog.testing._common import BrokerLike
    from tidelog.testing.embedded import EmbeddedBroker
    from tidelog.testing.external import ExternalBroker
    from tidelog.testing.process import Broker, BrokerStartError

__all__ = ("Broker", "BrokerLike", "BrokerStartError", "EmbeddedBroker", "ExternalBroker")

_HOMES = {
    "Broker": "tidelog.testing.process",
    "BrokerStartError": "tidelog.testing.process",
    "EmbeddedBroker": "tidelog.testing.embedded",
    "ExternalBroker": "tidelog.testing.external",
    "BrokerLike": "tidelog.testing._common",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tidelog.testing' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
