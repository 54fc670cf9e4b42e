"""A coordinator on an in-memory log and a manual clock, for the group unit tests."""

from __future__ import annotations

import asyncio
import functools
import struct
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from tests.support.coordinator_log import MemoryCoordinatorLog
from tests.support.manual_timer import ManualTimer
from tidelog.broker.group.config import GroupConfig
from tidelog.broker.group.coordinator import GroupCoordinator
from tidelog.broker.group.membership import JoinRequest
from tidelog.broker.group.results import JoinGroupResult, Protocol, SyncGroupResult

T = TypeVar("T")

CONFIG = GroupConfig(
    initial_rebalance_delay_ms=100,
    min_session_timeout_ms=10,
    offsets_topic_num_partitions=4,
    offsets_retention_ms=60_000,
    offsets_retention_check_interval_ms=1_000,
    offsets_commit_timeout_ms=200,
)


def run(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test function on a fresh event loop."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)


class Harness:
    def __init__(
        self,
        config: GroupConfig = CONFIG,
        log: MemoryCoordinatorLog | None = None,
        timer: ManualTimer | None = None,
    ) -> None:
        self.config = config
        self.timer = timer or ManualTimer()
        self.log = log or MemoryCoordinatorLog(config.offsets_topic_num_partitions)
        self.coord = GroupCoordinator(config, self.log, self.timer)

    async def start(self) -> Harness:
        await self.coord.start()
        return self

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    async def advance(self, ms: int) -> None:
        await self.settle()  # let requests already sent arrive first
        self.timer.advance(ms)
        await self.settle()

    def join(
        self,
        group: str = "g",
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = (("range", subscription("t")),),
        protocol_type: str = "consumer",
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        client_id: str = "client",
        require_known_member_id: bool = True,
        supports_skip_assignment: bool = False,
    ) -> asyncio.Task[JoinGroupResult]:
        req = JoinRequest(
            group_id=group,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=tuple(Protocol(n, m) for n, m in protocols),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            group_instance_id=instance,
            client_id=client_id,
            client_host="/127.0.0.1",
            require_known_member_id=require_known_member_id,
            supports_skip_assignment=supports_skip_assignment,
        )
        return asyncio.ensure_future(self.coord.join_group(req))

    async def join_new(self, group: str = "g", **kw: Any) -> asyncio.Task[JoinGroupResult]:
        """JoinGroup v4+ dance: get MEMBER_ID_REQUIRED, then rejoin with the id."""
        first = await self.join(group, **kw)
        assert first.error.name == "member_id_required", first
        return self.join(group, first.member_id, **kw)

    def sync(
        self,
        group: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
    ) -> asyncio.Task[SyncGroupResult]:
        return asyncio.ensure_future(
            self.coord.sync_group(
                group, generation, member_id, instance, None, None, assignments or {}
            )
        )


async def done(task: Awaitable[T], harness: Harness) -> T:
    await harness.settle()
    assert isinstance(task, asyncio.Future) and task.done(), "expected the answer to be ready"
    return task.result()
