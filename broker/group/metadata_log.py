"""The group coordinator's writes to ``__consumer_offsets``, on the coordinator runtime.

``GroupMetadataLog`` is the group coordinator's use of the ``CoordinatorRuntime``
(``broker/coordinator/runtime.py``): it picks a group's partition, appends records now (through
the runtime, whose one write timeout is ``offsets.commit.timeout.ms``), waits for their high
watermark (in the background when nobody awaits the answer) and turns failures into error
codes. Offset records are replayed into the offset manager once durable (``replay=True``); the
load status (loading, active, stopped) is the runtime's, which every entry point checks first.
Part of the composed ``GroupCoordinator`` (with ``Rebalancer``, ``GroupMembership`` and the
``OffsetMetadataManager``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import (
    NO_PRODUCER_ID,
    CoordinatorLog,
    CoordinatorLogError,
    KeyValue,
    LogRecord,
)
from tidelog.broker.coordinator.runtime import CoordinatorRuntime
from tidelog.broker.group.config import GroupConfig
from tidelog.broker.group.timer import Timer
from tidelog.protocol.internal_topics.consumer_offsets import partition_for

__all__ = ("GroupMetadataLog",)

log = logging.getLogger("tidelog.group")


class GroupMetadataLog:
    """Appends to ``__consumer_offsets`` for the coordinator's parts, and its load status."""

    def __init__(
        self,
        config: GroupConfig,
        log_: CoordinatorLog,
        timer: Timer,
        replay: Callable[[LogRecord], None],
    ) -> None:
        self.config = config
        self.timer = timer
        self.runtime = CoordinatorRuntime(
            log_,
            replay,
            write_timeout_ms=config.offsets_commit_timeout_ms,
            clock=timer.now_ms,
            name="group coordinator",
        )
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def status(self) -> str:
        """ "loading" until the replay finished, then "active"; "stopped" after shutdown."""
        return self.runtime.status

    @status.setter
    def status(self, value: str) -> None:
        self.runtime.status = value

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.runtime.num_partitions)

    def inactive_error(self) -> ErrorCode | None:
        return self.runtime.inactive_error()

    def write(
        self,
        group_id: str,
        records: Sequence[KeyValue],
        *,
        replay: bool = False,
        at_append: bool = False,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> Awaitable[None]:
        """Append now (raises ``CoordinatorLogError``); await the result for the HW (and the
        replay of the records, ``replay``: once durable, or as appended, ``at_append``)."""
        return self.runtime.write(
            self.partition_for(group_id),
            records,
            replay=replay,
            at_append=at_append,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )

    def write_background(
        self,
        group_id: str,
        records: Sequence[KeyValue],
        on_done: Callable[[ErrorCode], None] | None = None,
        *,
        replay: bool = False,
    ) -> None:
        try:
            waiter = self.write(group_id, records, replay=replay)
        except CoordinatorLogError as e:
            log.warning("group %s: append failed: %s", group_id, e)
            if on_done is not None:
                on_done(e.error)
            return
        self.track(group_id, waiter, on_done)

    def track(
        self,
        group_id: str,
        waiter: Awaitable[None],
        on_done: Callable[[ErrorCode], None] | None,
    ) -> None:
        """Wait for an append's HW in the background, then call ``on_done(error)``."""
        task = asyncio.ensure_future(self._finish_write(group_id, waiter, on_done))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _finish_write(
        self,
        group_id: str,
        waiter: Awaitable[None],
        on_done: Callable[[ErrorCode], None] | None,
    ) -> None:
        error = await self.wait(group_id, waiter)
        if on_done is not None:
            on_done(ErrorCode.none if error is None else error)

    async def wait(self, group_id: str, waiter: Awaitable[None]) -> ErrorCode | None:
        """The error of an append's wait (None when durable), as the log reported it."""
        try:
            await waiter
        except CoordinatorLogError as e:
            log.warning("group %s: metadata append failed: %s", group_id, e.error.name)
            return e.error
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("group %s: append failed", group_id)
            return ErrorCode.unknown_server_error
        return None

    def now(self) -> int:
        return self.timer.now_ms()

    async def stop(self) -> None:
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.runtime.stop()
