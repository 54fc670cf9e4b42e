"""tidelog: a single-node broker that speaks the Apache Kafka wire protocol.

Every import name lives under ``tidelog.``: ``tidelog.broker``, ``tidelog.protocol``,
``tidelog.storage``, ``tidelog.config``, ``tidelog.analytics``, ``tidelog.schema``,
``tidelog.tools``, ``tidelog.cli`` and ``tidelog.testing``. In the repository all but the last
are top-level folders (``broker/``, ``protocol/``, ..., ``cli/``; ``tidelog/<name>`` is a link to
each), so that installing tidelog never puts a package named ``config`` or ``storage`` into
site-packages.

``python -m tidelog`` and the ``tidelog`` console script run the command, ``tidelog.cli.main``.

``tidelog.Broker`` is the embedded broker (``tidelog.testing.embedded.EmbeddedBroker``)::

    with tidelog.Broker() as broker:
        print(broker.bootstrap_servers)

Importing ``tidelog`` is cheap: ``Broker`` and the broker code load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidelog.testing.embedded import EmbeddedBroker as Broker

__version__ = "0.1.0"

__all__ = ["Broker", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from tidelog.testing.embedded import EmbeddedBroker

        globals()["Broker"] = EmbeddedBroker
        return EmbeddedBroker
    raise AttributeError(f"module 'tidelog' has no attribute {name!r}")
