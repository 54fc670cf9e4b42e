"""Where the coordinator keeps its records: the partitions of ``__consumer_offsets``.

``CoordinatorLog`` is what the coordinator needs from storage. ``append`` writes at once (so
records land in the order the coordinator made them) and returns an awaitable that resolves
when the high watermark covers the batch; ``read_partition`` returns every record from the
log start to the HW, for the replay at start-up. ``MemoryCoordinatorLog`` keeps real encoded v2
batches in memory, for tests; ``broker.group.service.BrokerCoordinatorLog`` adapts the broker's
storage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from tidelog.storage.record_codec import NewRecord, encode_batch, iter_records

__all__ = ("CoordinatorLog", "CoordinatorLogError", "LogRecord", "MemoryCoordinatorLog")


@dataclass(frozen=True, slots=True)
class LogRecord:
    offset: int
    key: bytes | None
    value: bytes | None


class CoordinatorLogError(Exception):
    """An append or read failed; ``error`` is what the client should be told."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


KeyValue = tuple[bytes, bytes | None]


class CoordinatorLog(Protocol):
    @property
    def num_partitions(self) -> int: ...

    async def prepare(self) -> None:
        """Make sure every partition exists (create the topic when missing)."""
        ...

    async def read_partition(self, partition: int) -> list[LogRecord]:
        """Every record from the log start to the high watermark, in offset order."""
        ...

    def append(
        self, partition: int, records: Sequence[KeyValue], timestamp_ms: int
    ) -> Awaitable[None]:
        """Write one batch now (raise ``CoordinatorLogError`` when that fails) and return an
        awaitable that resolves once the high watermark covers it (or raises)."""
        ...


def encode_records(records: Sequence[KeyValue], timestamp_ms: int) -> bytes:
    """One uncompressed v2 batch holding ``records`` (base offset 0: the log assigns it)."""
    return encode_batch([NewRecord(key=k, value=v, timestamp=timestamp_ms) for k, v in records])


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
        return [
            LogRecord(r.offset, r.key, r.value)
            for r in iter_records(bytes(self.data.get(partition, b"")))
            if r.offset < hw
        ]

    def append(
        self, partition: int, records: Sequence[KeyValue], timestamp_ms: int
    ) -> Awaitable[None]:
        if self.fail_appends is not None:
            raise CoordinatorLogError(self.fail_appends)
        batch = bytearray(encode_records(records, timestamp_ms))
        base = self.leo[partition]
        batch[0:8] = base.to_bytes(8, "big", signed=True)
        self.data[partition] += batch
        self.leo[partition] = base + len(records)
        end = self.leo[partition]
        if not self.hold_hw:
            self.hw[partition] = end
        return self._wait(partition, end)

    async def _wait(self, partition: int, end: int) -> None:
        if self.hw[partition] >= end:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((partition, end, fut))
        await fut

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
        return [
            LogRecord(r.offset, r.key, r.value)
            for r in iter_records(bytes(self.data.get(partition, b"")))
        ]
