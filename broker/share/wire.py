"""Helpers the share-group handlers share: the coordinator look-up and wire conversions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidelog.broker.handlers.base import RequestContext
    from tidelog.broker.share.coordinator import ShareCoordinator

__all__ = ("ack_batches", "share_coordinator")


def share_coordinator(ctx: RequestContext) -> ShareCoordinator | None:
    from tidelog.broker.share.coordinator import ShareCoordinator

    found: Any = getattr(ctx.broker, "share_groups", None)
    return found if isinstance(found, ShareCoordinator) else None


def ack_batches(batches: Any, version: int) -> tuple[list[Any], bool]:
    """A request partition's acknowledgement batches as ``AckBatch``es; the flag is False when
    one uses Renew (4) on a version before 2, which knows no Renew."""
    from tidelog.broker.share.coordinator import AckBatch

    out = []
    valid = True
    for b in batches:
        kinds = tuple(int(t) for t in b.acknowledge_types)
        if version < 2 and 4 in kinds:
            valid = False
        out.append(AckBatch(int(b.first_offset), int(b.last_offset), kinds))
    return out, valid
