"""Small helpers the group handlers share (finding the coordinator, zero durations)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidelog.broker.group.coordinator import GroupCoordinator
    from tidelog.broker.handlers.base import RequestContext

NO_THROTTLE = timedelta(0)
#: DescribeGroups' authorized_operations when the client did not ask for them.
UNSET_OPERATIONS = -(2**31)


def coordinator(ctx: RequestContext) -> GroupCoordinator | None:
    """The broker's group coordinator, or None when it is not wired in."""
    from tidelog.broker.group.coordinator import GroupCoordinator

    groups: Any = getattr(ctx.broker, "groups", None)
    return groups if isinstance(groups, GroupCoordinator) else None


def client_host(ctx: RequestContext) -> str:
    """How Kafka shows a member's host: ``InetAddress.toString()``, e.g. ``/127.0.0.1``."""
    return f"/{ctx.client_host}"


def ms(value: Any, default: int = -1) -> int:
    """A kio duration field (timedelta) or a plain number, in milliseconds."""
    if value is None:
        return default
    if isinstance(value, timedelta):
        return int(value / timedelta(milliseconds=1))
    return int(value)
