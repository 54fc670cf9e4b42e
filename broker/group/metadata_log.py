"""The group coordinator's metadata log: writes to ``__consumer_offsets`` and their HW waits.

``GroupMetadataLog`` wraps the ``CoordinatorLog`` (the partitions of ``__consumer_offsets``):
it picks a group's partition, appends records now, waits for their high watermark (in the
background when nobody awaits the answer) and turns failures into error codes. It also holds the
coordinator's load status (loading, active, stopped), which every entry point checks first.
Part of the composed ``GroupCoordinator`` (with ``Rebalancer``, ``GroupMembership`` and the
``OffsetStore``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from kio.schema.errors import ErrorCode

from tidelog.broker.group.config import GroupConfig
from tidelog.broker.group.log import CoordinatorLog, CoordinatorLogError, KeyValue
from tidelog.broker.group.timer import Timer
from tidelog.protocol.internal_topics.consumer_offsets import partition_for

__all__ = ("GroupMetadataLog",)

log = logging.getLogger("tidelog.group")


class GroupMetadataLog:
    """Appends to ``__consumer_offsets`` for the coordinator's parts, and its load status."""

    def __init__(self, config: GroupConfig, log_: CoordinatorLog, timer: Timer) -> None:
        self.config = config
        self.timer = timer
        self.log = log_
        self.tasks: set[asyncio.Task[None]] = set()
        #: "loading" until the replay finished, then "active"; "stopped" after shutdown.
        self.status = "loading"

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.log.num_partitions)

    def inactive_error(self) -> ErrorCode | None:
        if self.status == "active":
            return None
        if self.status == "loading":
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.coordinator_not_available

    def write(self, group_id: str, records: Sequence[KeyValue]) -> Awaitable[None]:
        """Append now (raises ``CoordinatorLogError``); await the result for the HW."""
        return self.log.append(self.partition_for(group_id), records, self.timer.now_ms())

    def write_background(
        self,
        group_id: str,
        records: Sequence[KeyValue],
        on_done: Callable[[ErrorCode], None] | None = None,
    ) -> None:
        try:
            waiter = self.write(group_id, records)
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
        error = ErrorCode.none
        try:
            await asyncio.wait_for(waiter, self.config.offsets_commit_timeout_ms / 1000)
        except CoordinatorLogError as e:
            error = e.error
        except TimeoutError:
            error = ErrorCode.request_timed_out
        except Exception:
            log.exception("group %s: append failed", group_id)
            error = ErrorCode.unknown_server_error
        if error is not ErrorCode.none:
            log.warning("group %s: metadata append failed: %s", group_id, error.name)
        if on_done is not None:
            on_done(error)

    def now(self) -> int:
        return self.timer.now_ms()
