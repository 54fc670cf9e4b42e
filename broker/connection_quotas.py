"""Connection limits over every listener: Kafka's ``ConnectionQuotas``.

``max.connections`` counts every connection of every listener, ``max.connections.per.ip`` those
of one client address. A connection past either is refused (``admit`` says why, and it is not
counted); ``release`` uncounts a closed one. ``refused`` and ``peak`` feed the metrics.

Threading: event loop only.
"""

from __future__ import annotations

__all__ = ("ConnectionQuotas",)


class ConnectionQuotas:
    """``max.connections`` (over every listener) and ``max.connections.per.ip``."""

    def __init__(self, max_connections: int, max_per_ip: int) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.refused = 0
        self.peak = 0

    def admit(self, host: str) -> str | None:
        """Count a new connection from ``host``; returns why it is refused (then not counted)."""
        if self.total >= self.max_connections:
            self.refused += 1
            return f"max.connections ({self.max_connections}) reached"
        count = self.per_ip.get(host, 0)
        if count >= self.max_per_ip:
            self.refused += 1
            return f"{host} already has max.connections.per.ip ({self.max_per_ip}) connections"
        self.total += 1
        self.peak = max(self.peak, self.total)
        self.per_ip[host] = count + 1
        return None

    def release(self, host: str) -> None:
        self.total -= 1
        count = self.per_ip.get(host, 0) - 1
        if count > 0:
            self.per_ip[host] = count
        else:
            self.per_ip.pop(host, None)
