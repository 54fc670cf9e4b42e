"""What the KIP-848 consumer-group coordinator (``coordinator.py``) speaks in: one
ConsumerGroupHeartbeat as a request value and a result value (the handler,
``broker/handlers/consumer_group_heartbeat.py``, converts from and to the wire), and ``Host``,
what the coordinator needs of the broker and of the classic coordinator.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from tidelog.broker.group.consumer.model import Partitions
from tidelog.broker.group.modern import GroupRuntime

__all__ = ["HeartbeatRequest", "HeartbeatResult", "Host", "owned_from_wire"]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Partitions | None
    client_id: str
    client_host: str
    api_version: int


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


@dataclass(frozen=True, slots=True)
class Host:
    """What the consumer-group protocol uses of the broker and the classic coordinator."""

    #: writes (replayed into the groups as appended), timers, load state
    runtime: GroupRuntime
    #: classic group id -> True when it has members (None: no such classic group)
    classic_group_busy: Callable[[str], bool | None]
    drop_classic_group: Callable[[str], None]
    #: name -> (topic id, partitions) of the topics that exist (internal excluded)
    topics: Callable[[], Mapping[str, tuple[uuid.UUID, int]]]
    #: group id -> (session timeout ms, heartbeat interval ms)
    timeouts: Callable[[str], tuple[int, int]]
    assignors: Sequence[str]
    max_size: int


def owned_from_wire(topic_partitions: Any) -> Partitions | None:
    """The heartbeat's owned partitions (None when the request left them out)."""
    if topic_partitions is None:
        return None
    out: dict[uuid.UUID, frozenset[int]] = {}
    for t in topic_partitions:
        if t.topic_id is None:
            continue
        out[t.topic_id] = out.get(t.topic_id, frozenset()) | frozenset(int(p) for p in t.partitions)
    return out
