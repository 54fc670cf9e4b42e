"""tidelog: a single-node broker that speaks the Apache Kafka wire protocol.

Every import name lives under ``tidelog.``: ``tidelog.broker``, ``tidelog.protocol``,
``tidelog.storage``, ``tidelog.config`` and ``tidelog.analytics``. In the repository these are the
top-level folders ``broker/``, ``protocol/``, ... (``tidelog/<name>`` is a link to each), so that
installing tidelog never puts a package named ``config`` or ``storage`` into site-packages.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
