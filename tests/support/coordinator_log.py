"""An in-memory ``CoordinatorLog`` (``broker/coordinator/log.py``) for the coordinator tests:
real encoded v2 batches, with knobs to park the high watermark and to make appends fail."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from tidelog.broker.coordinator.log import (
    COMMIT_MARKER,
    NO_PRODUCER_ID,
    Appended,
    CoordinatorLogError,
    KeyValue,
    LogRecord,
    encode_records,
    log_records,
)
from tidelog.storage.record_codec import encode_control_batch

__all__ = ("MemoryCoordinatorLog",)


class MemoryCoordinatorLog:
    """An in-memory log of encoded batches, with knobs for tests: ``hold_hw`` parks the HW
    (appends then wait until ``release``), ``fail_appends`` makes writes fail."""

    def __init__(self, num_partitions: int) -> None:
        self._n = num_partitions
        self.data: dict[int, bytearray] = {}
        self.leo: dict[int, int] = {}
        self.hw: dict[int, int] = {}
        self.hold_hw = False
        self.fail_appends: ErrorCode | None = None
        self.prepared = False
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []

    @property
    def num_partitions(self) -> int:
        return self._n

    async def prepare(self) -> None:
        for p in range(self._n):
            self.data.setdefault(p, bytearray())
            self.leo.setdefault(p, 0)
            self.hw.setdefault(p, 0)
        self.prepared = True

    async def read_partition(self, partition: int) -> list[LogRecord]:
        hw = self.hw.get(partition, 0)
        return [r for r in log_records(bytes(self.data.get(partition, b"")), 0) if r.offset < hw]

    def append(
        self,
        partition: int,
        records: Sequence[KeyValue],
        timestamp_ms: int,
        *,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> Appended:
        return self._append(
            encode_records(records, timestamp_ms, producer_id, producer_epoch),
            partition,
            len(records),
            timeout_ms,
        )

    def append_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        timeout_ms: int,
    ) -> Appended:
        batch = encode_control_batch(
            COMMIT_MARKER if commit else 0, producer_id=producer_id, producer_epoch=producer_epoch
        )
        return self._append(batch, partition, 1, timeout_ms)

    def _append(self, encoded: bytes, partition: int, count: int, timeout_ms: int) -> Appended:
        if self.fail_appends is not None:
            raise CoordinatorLogError(self.fail_appends)
        batch = bytearray(encoded)
        base = self.leo[partition]
        batch[0:8] = base.to_bytes(8, "big", signed=True)
        self.data[partition] += batch
        self.leo[partition] = base + count
        end = self.leo[partition]
        if not self.hold_hw:
            self.hw[partition] = end
        return Appended(base, self._wait(partition, end, timeout_ms))

    async def _wait(self, partition: int, end: int, timeout_ms: int) -> None:
        if self.hw[partition] >= end:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((partition, end, fut))
        try:
            await asyncio.wait_for(fut, timeout_ms / 1000)
        except TimeoutError:
            raise CoordinatorLogError(ErrorCode.request_timed_out) from None

    def release(self) -> None:
        """Move every HW to its LEO and wake the appends waiting for it."""
        self.hold_hw = False
        for p, leo in self.leo.items():
            self.hw[p] = leo
        waiters, self._waiters = self._waiters, []
        for _, _, fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def records(self, partition: int) -> list[LogRecord]:
        """Everything written to a partition, HW or not (for assertions)."""
        return log_records(bytes(self.data.get(partition, b"")), 0)
